"""Which job a command calls, and how its options map to the job's parameters: what
``tests/unit/test_cli_defaults.py`` reads to hold every option's default to the job's
(written once, in the job's signature)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def calls(job: Callable[..., Any] | str, *, cli_only: tuple[str, ...] = (),
          renamed: dict[str, str] | None = None,
          convert: dict[str, tuple[str, Callable[[Any], Any]]] | None = None
          ) -> Callable[[F], F]:
    """Mark a command as calling ``job``. Every option of the command is the job
    parameter of the same name unless it is in ``renamed`` (option -> parameter),
    ``convert`` (option -> (parameter, what the option's value is as the parameter's,
    e.g. milliseconds to seconds)) or ``cli_only`` (how the command renders: ``--json``,
    ``--html``). ``job`` may be ``"module:function"``, imported only when read (a job
    whose module is slow to import stays out of ``devicebench --help``)."""

    def mark(func: F) -> F:
        func.__dict__["devicebench_job"] = {  # copied by functools.wraps (typer's too)
            "job": job, "cli_only": set(cli_only), "renamed": dict(renamed or {}),
            "convert": dict(convert or {})}
        return func

    return mark


def job_of(marked: dict[str, Any]) -> Callable[..., Any]:
    """The job a :func:`calls` marker names, imported if it was named by string."""
    job = marked["job"]
    if isinstance(job, str):
        import importlib

        module, _, name = job.partition(":")
        job = getattr(importlib.import_module(module), name)
    return job
