"""One module per command's orchestration: each job takes keyword arguments whose
defaults are written once, in its signature, and returns a frozen outcome that
serialises itself. The CLI parses, calls one job and renders; ``devicebench.api``
re-exports them."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


def default_of(job: Callable[..., Any], parameter: str) -> Any:
    """The default of one of ``job``'s parameters, so a command's option default is the
    job's, written once.

    Example:
        >>> from devicebench.jobs.run import run
        >>> default_of(run, "timeout")
        300.0
    """
    return inspect.signature(job).parameters[parameter].default
