"""advise's final against this machine's earlier runs (issue 25): the same widening `run`
shows, in a real SQLite store, and a caveat when reruns would not hold the recommended
speed-up. The verdict itself stays the one this run measured."""

from __future__ import annotations

from pathlib import Path

from devicebench.advisor.advice import AdviceResult
from devicebench.advisor.reruns import rerun_caveat, with_reruns
from devicebench.env.snapshot import EnvSnapshot, HostInfo
from devicebench.store import ResultStore
from devicebench.trials.summary import compare
from tests.unit.test_reruns import JAX, REF, _run


def _advice(trials) -> AdviceResult:
    return AdviceResult("seed-rnn", REF, 40.0, rows=compare(trials), recommended=JAX,
                        verdict="switch to jax", notes=["measured here"])


def _after(store: ResultStore, ratios: list[float], now: float) -> tuple[int, int, list]:
    machine = store.add_machine(EnvSnapshot(host=HostInfo()))
    for i, q in enumerate(ratios):
        _run(store, machine, 4e-3, 4e-3 / q, seed=i)
    run, trials = _run(store, machine, 4e-3, 4e-3 / now, seed=9)
    return machine, run, trials


def test_a_gain_reruns_here_do_not_hold_is_widened_and_said(tmp_path: Path):
    with ResultStore.open(tmp_path / "r.db") as store:
        machine, run, trials = _after(store, [1.05, 1.35, 0.85], now=1.12)
        advice = with_reruns(_advice(trials), store, machine, run)
    row = advice.recommended_row
    own = row.speedup_this_run
    assert own is not None and own.ci_low > 1  # significant in this run (±1% blocks)
    assert row.speedup.ci_low < 1 < row.speedup.ci_high  # not across this machine's runs
    assert advice.verdict == "switch to jax" and advice.notes[0] == "measured here"
    reruns, caveat = advice.notes[1:]
    assert reruns.startswith("seed-rnn: reruns on this machine move beyond a run's own CI")
    assert caveat.startswith(f"jax/cpu: {own.value:.2f}x faster in this run [95% CI")
    assert "(3 earlier runs)" in caveat
    assert "includes no gain" in caveat and "rerun advise" in caveat
    assert advice.to_dict()["speedup_vs_baseline"]["ci95_this_run"] == [own.ci_low,
                                                                         own.ci_high]


def test_a_gain_that_holds_across_runs_gets_no_caveat(tmp_path: Path):
    with ResultStore.open(tmp_path / "r.db") as store:
        machine, run, trials = _after(store, [12.8, 19.6, 15.0], now=16.0)
        advice = with_reruns(_advice(trials), store, machine, run)
    row = advice.recommended_row
    assert row.speedup.ci_low < row.speedup_this_run.ci_low  # widened all the same
    assert row.speedup.ci_low > 1 and rerun_caveat(advice) is None
    assert len(advice.notes) == 2 and "reruns on this machine" in advice.notes[1]


def test_a_first_advise_on_a_machine_is_left_as_measured(tmp_path: Path):
    with ResultStore.open(tmp_path / "r.db") as store:
        machine = store.add_machine(EnvSnapshot(host=HostInfo()))
        run, trials = _run(store, machine, 4e-3, 3e-3, seed=1)
        plain = _advice(trials)
        advice = with_reruns(plain, store, machine, run)
    assert advice == plain
