"""``devicebench fleet``: the same questions on every machine of a Ray cluster.

Ray (an optional extra, ``pip install 'devicebench[ray]'``) schedules one task per node,
pinned to it; each task runs devicebench's own job there (the doctor's probe, ``advise``
with its worker processes local to that node) and streams its trials back through
Ray's object store to the machine the user is on, whose results store records them
under each node's own machine fingerprint and snapshot.

Nothing here imports Ray at module import time: :func:`devicebench.fleet.cluster.import_ray`
does, when a fleet command runs.
"""
