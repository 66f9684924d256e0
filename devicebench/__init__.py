"""devicebench: is my accelerator actually speeding up my training, and why?

Public API (no deep-learning framework is imported by importing this package):

- :func:`advise` — measure candidate configurations of a workload or Keras model and
  return the fastest safe one, with the reasons and the code to apply it.
- :func:`run` — measure the configurations you name, interleaved, with loss
  equivalence; returns a :class:`devicebench.api.RunOutcome`.
- :func:`devicebench.api.ops` — the op micro-benchmark; returns a
  :class:`devicebench.api.OpsOutcome` (not re-exported here: ``devicebench.ops`` is the
  op-sweep package).
- :func:`doctor` — probe and check this machine (and a script); returns a
  :class:`devicebench.api.DoctorResult`.

Each is a job of :mod:`devicebench.jobs` (its defaults are the command's). Progress:
``on_progress=`` takes a callable given :class:`devicebench.progress.ProgressEvent`; left
out, one line per event goes to stderr when stderr is a terminal, nothing otherwise.
"""

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "advise", "doctor", "run"]


def advise(workload_or_model: Any, data: Any = None, **kwargs: Any):
    """See :func:`devicebench.api.advise`."""
    from devicebench.api import advise as _advise

    return _advise(workload_or_model, data, **kwargs)


def run(workloads: Any = None, **kwargs: Any):
    """See :func:`devicebench.api.run`."""
    from devicebench.api import run as _run

    return _run(workloads, **kwargs)


def doctor(script: Any = None, **kwargs: Any):
    """See :func:`devicebench.api.doctor`."""
    from devicebench.api import doctor as _doctor

    return _doctor(script, **kwargs)
