"""One progress protocol for every job: a job reports ``started``, ``progress`` (items
done of a total, and the budget left, where known), ``note`` and ``finished`` events to
one callback, ``on_progress(event)``.

The CLI renders them with one rich spinner on stderr (``devicebench.cli.progress``).
A library caller who passes nothing gets :func:`default_progress`: one line per event
on stderr when stderr is a terminal, nothing otherwise (a notebook cell or a log file
stays clean); :func:`silent` turns it off, any callable taking a
:class:`ProgressEvent` replaces it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["started", "progress", "note", "finished"]


@dataclass(frozen=True)
class ProgressEvent:
    """One event of a job.

    Attributes:
        kind: ``started``, ``progress``, ``note`` (a line worth keeping, e.g. what a
            probe measured) or ``finished``.
        job: what is running, e.g. ``"advise seed-rnn"``, ``"profile record"``.
        message: what it is doing now, in words.
        done, total: items done and how many there are (None where not known).
        budget_left_s: seconds of the job's time budget left (None: no budget).
    """

    kind: Kind
    job: str
    message: str = ""
    done: int | None = None
    total: int | None = None
    budget_left_s: float | None = None

    def line(self) -> str:
        """The event in one line: ``advise seed-rnn: round 3 (3 of 30; 41 s of the
        budget left)``."""
        extra = []
        if self.done is not None:
            extra.append(f"{self.done} of {self.total}" if self.total else f"{self.done} done")
        if self.budget_left_s is not None:
            extra.append(f"{max(self.budget_left_s, 0.0):.0f} s of the budget left")
        text = f"{self.job}: {self.message}" if self.message else f"{self.job}: {self.kind}"
        return text + (f" ({'; '.join(extra)})" if extra else "")


OnProgress = Callable[[ProgressEvent], None]


def silent(event: ProgressEvent) -> None:
    """Progress off."""


def stderr_lines(event: ProgressEvent) -> None:
    """Each event as one line on stderr."""
    print(event.line(), file=sys.stderr, flush=True)


def default_progress() -> OnProgress:
    """A library caller's default: one line per event on stderr when stderr is a
    terminal, silent otherwise."""
    isatty = getattr(sys.stderr, "isatty", None)
    return stderr_lines if isatty is not None and isatty() else silent


def resolve(on_progress: OnProgress | None) -> OnProgress:
    """``on_progress`` itself, or :func:`default_progress` when None."""
    return on_progress if on_progress is not None else default_progress()


class Reporter:
    """A job's side of the protocol: it names the job once, and works out the budget
    left from its own clock when the job has a ``budget_s``."""

    def __init__(self, job: str, on_progress: OnProgress | None, *,
                 budget_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.job = job
        self.emit = resolve(on_progress)
        self.budget_s = budget_s
        self.clock = clock
        self.t0 = clock()

    def _left(self) -> float | None:
        return None if self.budget_s is None else self.budget_s - (self.clock() - self.t0)

    def _send(self, kind: Kind, message: str, done: int | None = None,
              total: int | None = None) -> None:
        self.emit(ProgressEvent(kind, self.job, message, done, total, self._left()))

    def started(self, message: str = "starting", *, total: int | None = None) -> None:
        self._send("started", message, 0 if total else None, total)

    def progress(self, message: str, *, done: int | None = None,
                 total: int | None = None) -> None:
        self._send("progress", message, done, total)

    def note(self, message: str) -> None:
        self.emit(ProgressEvent("note", self.job, message))

    def finished(self, message: str = "done") -> None:
        self.emit(ProgressEvent("finished", self.job, message))

    def trial_events(self, trials: int | None = None
                     ) -> Callable[[str, Any, dict[str, Any]], None]:
        """The trial engine's ``on_event(kind, spec, info)`` as progress: each set-up
        (k of ``trials`` when known) and each interleaved round (of at most N)."""
        setups: list[Any] = []

        def event(kind: str, spec: Any, info: dict[str, Any]) -> None:
            if kind == "setup" and spec is not None:
                setups.append(spec)
                self.progress(f"setting up {spec.label}: import, build, compile, warm-up",
                              done=len(setups), total=trials)
            elif kind == "round":
                self.progress("interleaved round", done=info.get("round"),
                              total=info.get("max_rounds"))
            elif kind == "replica-failed" and spec is not None:
                self.note(f"{spec.label}: a replica failed: {info.get('error', '')}")

        return event
