"""devicebench: is my accelerator actually speeding up my training, and why?

Public API (no deep-learning framework is imported by importing this package):

- :func:`advise` — measure candidate configurations of a workload or Keras model and
  return the fastest safe one, with the reasons and the code to apply it.
"""

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "advise"]


def advise(workload_or_model: Any, data: Any = None, **kwargs: Any):
    """See :func:`devicebench.api.advise`."""
    from devicebench.api import advise as _advise

    return _advise(workload_or_model, data, **kwargs)
