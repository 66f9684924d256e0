"""The Python API: the jobs the CLI runs, with the same results it renders.

Each call takes keyword arguments whose defaults are the commands' own (written once, in
the job's signature: :mod:`devicebench.jobs`) and returns a frozen, typed outcome with
``to_dict()`` (the ``--json`` document). Progress: every job takes ``on_progress``, a
callable given :class:`devicebench.progress.ProgressEvent` (started, progress with items
done and the budget left, note, finished); left out, it prints one line per event on
stderr when stderr is a terminal and nothing otherwise;
:func:`devicebench.progress.silent` turns it off.
"""

from __future__ import annotations

from devicebench.jobs import default_of
from devicebench.jobs.advise_any import advise
from devicebench.jobs.doctor import DoctorResult, doctor
from devicebench.jobs.ops import OpsOutcome, ops
from devicebench.jobs.run import RunOutcome, run

__all__ = ["DoctorResult", "OpsOutcome", "RunOutcome", "advise", "default_of", "doctor",
           "ops", "run"]
