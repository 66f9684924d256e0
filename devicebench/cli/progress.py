"""The CLI's one renderer of the jobs' progress events (:mod:`devicebench.progress`): a
rich spinner on stderr (so ``--json`` and piped stdout stay clean) saying what runs,
items done of the total and the budget left where the job knows them; notes are
printed above it as lines that stay."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from devicebench.progress import OnProgress, ProgressEvent, silent


class Spinner:
    """``on_progress`` for a terminal: the spinner appears with the first event (after
    the input was validated) and stops on ``finished`` (the next job's ``started``
    brings it back). Off a terminal a spinner shows nothing; with ``lines_off_terminal``
    each event is then one line instead (a long job's log says what it is doing)."""

    def __init__(self, lines_off_terminal: bool = False) -> None:
        self.status: Any = None
        self.console: Any = None
        self.lines = lines_off_terminal

    def __call__(self, event: ProgressEvent) -> None:
        if self.lines and not self._console().is_terminal:
            if event.kind in ("progress", "note"):
                self._console().print(event.line(), markup=False, highlight=False,
                                      soft_wrap=True)
            return
        if event.kind == "note":
            self._console().print(f"  {event.message}", markup=False, highlight=False)
            return
        if event.kind == "finished":
            self.stop()
            return
        if self.status is None:
            from rich.status import Status

            self.status = Status(event.line(), console=self._console())
            self.status.start()
        else:
            self.status.update(event.line())

    def _console(self) -> Any:
        if self.console is None:
            from rich.console import Console

            self.console = Console(stderr=True)
        return self.console

    def stop(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None


@contextmanager
def progress(show: bool = True, *, lines_off_terminal: bool = False
             ) -> Iterator[OnProgress]:
    """The ``on_progress`` to hand a job: the spinner when ``show`` (else silent; off a
    terminal, lines if ``lines_off_terminal``); the spinner stops however the job
    ends."""
    if not show:
        yield silent
        return
    spinner = Spinner(lines_off_terminal)
    try:
        yield spinner
    finally:
        spinner.stop()
