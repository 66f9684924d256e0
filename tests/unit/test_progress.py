"""The one progress protocol: events, the budget left on the job's clock, the engine's
events as progress, and the library default (lines on a terminal's stderr, else
silence)."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest

from devicebench import progress
from devicebench.progress import ProgressEvent, Reporter


def test_a_reporter_says_items_done_and_the_budget_left_on_its_clock() -> None:
    now = [100.0]
    seen: list[ProgressEvent] = []
    rep = Reporter("advise seed-rnn", seen.append, budget_s=40.0, clock=lambda: now[0])
    rep.started(total=3)
    now[0] = 112.5
    on_event = rep.trial_events(trials=3)
    on_event("setup", SimpleNamespace(label="jax/cpu"), {})
    now[0] = 130.0
    on_event("round", None, {"round": 2, "max_rounds": 30})
    on_event("done", SimpleNamespace(label="jax/cpu"), {"status": "ok"})  # no event
    rep.note("measured the dispatch cost")
    rep.finished()
    assert [e.kind for e in seen] == ["started", "progress", "progress", "note", "finished"]
    assert (seen[1].done, seen[1].total, seen[1].budget_left_s) == (1, 3, 27.5)
    assert seen[2].line() == ("advise seed-rnn: interleaved round (2 of 30; 10 s of the "
                              "budget left)")
    assert seen[3].line() == "advise seed-rnn: measured the dispatch cost"


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("tty", [True, False])
def test_the_library_default_prints_lines_only_on_a_terminal(monkeypatch, tty) -> None:
    err = _Stream(tty)
    monkeypatch.setattr("sys.stderr", err)
    rep = Reporter("profile record", None)  # no callback: the default
    rep.progress("setting up jax/cpu", done=1, total=8)
    assert err.getvalue() == ("profile record: setting up jax/cpu (1 of 8)\n" if tty else "")
    assert progress.default_progress() is (progress.stderr_lines if tty else progress.silent)


def test_the_cli_renderer_off_a_terminal_prints_lines_only_when_asked() -> None:
    from rich.console import Console

    from devicebench.cli.progress import Spinner

    events = [ProgressEvent("started", "doctor"),
              ProgressEvent("progress", "doctor", "probing jax (imported in a subprocess)"),
              ProgressEvent("finished", "doctor")]
    for lines in (True, False):
        out = io.StringIO()
        spinner = Spinner(lines_off_terminal=lines)
        spinner.console = Console(file=out, force_terminal=False, width=200)
        for e in events:
            spinner(e)
        spinner.stop()
        assert out.getvalue() == ("doctor: probing jax (imported in a subprocess)\n"
                                  if lines else "")
