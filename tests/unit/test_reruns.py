"""Run-to-run spread (issue 25): a run's CIs against this machine's earlier runs of the
same configurations, in a real SQLite store. Runs that moved beyond their own CIs widen
the next run's CIs by the DerSimonian-Laird between-run sd; runs that agree leave them."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from devicebench.env.snapshot import EnvSnapshot, HostInfo
from devicebench.measure.reruns import between_runs, log_se, widened
from devicebench.results.reruns import rerun_lines, with_rerun_spread
from devicebench.store import ResultStore
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec
from devicebench.trials.summary import compare

REF = TrialSpec("seed-rnn")
JAX = TrialSpec("seed-rnn", backend="jax")


def _run(store: ResultStore, machine: int, ref_step: float, jax_step: float, seed: int,
         jitter: float = 0.01) -> tuple[int, list[TrialResult]]:
    """One run of the two configurations: 12 interleaved rounds of 10-step blocks at the
    given step times, each block off by ``jitter`` (seeded)."""
    rng = np.random.default_rng(seed)
    run = store.start_run(machine, "run", {})
    out = []
    for spec, step, verdict in ((REF, ref_step, "reference"), (JAX, jax_step, "same")):
        blocks = [10 * step * (1 + jitter * rng.standard_normal()) for _ in range(12)]
        r = TrialResult(spec, status="ok", steps_per_block=10, block_seconds=blocks,
                        block_rounds=list(range(12)), loss_verdict=verdict,
                        group_id=f"g{run}")
        store.add_trial(run, r)
        out.append(r)
    return run, out


def _after_runs_that_moved(store: ResultStore) -> tuple[int, int, list[TrialResult]]:
    """Three runs whose reference step moved 3.7 -> 5.8 ms, jax's less (each run's own CI
    ~±1%; the ratio 12.8x -> 19.6x, the VM's calibration scaled), then a fourth."""
    machine = store.add_machine(EnvSnapshot(host=HostInfo()))
    for i, (ref, jax) in enumerate([(3.7e-3, 0.29e-3), (5.8e-3, 0.31e-3), (4.9e-3, 0.25e-3)]):
        _run(store, machine, ref, jax, seed=i)
    run, trials = _run(store, machine, 4.7e-3, 0.285e-3, seed=9)
    return machine, run, trials


def test_dersimonian_laird_on_runs_that_agree_and_runs_that_do_not():
    agree = between_runs([(2.0, 1.9, 2.1), (2.05, 1.95, 2.15), (1.98, 1.88, 2.08)])
    assert agree is not None and agree.tau == 0.0
    apart = between_runs([(2.0, 1.96, 2.04), (2.6, 2.55, 2.65), (1.6, 1.57, 1.63)])
    # The log figures' sd is ~0.24; their own se is ~0.01: almost all of it is between runs.
    sd = float(np.std(np.log([2.0, 2.6, 1.6]), ddof=1))
    assert apart.tau == pytest.approx(sd, rel=0.1)
    assert between_runs([(2.0, 1.9, 2.1), (2.6, 2.5, 2.7)]) is None  # two runs: no estimate
    lo, hi = widened(2.0, 1.9, 2.1, apart.tau)
    assert lo < 1.9 and hi > 2.1
    assert math.log(hi / 2.0) == pytest.approx(
        math.hypot(math.log(2.1 / 2.0), 1.959964 * apart.tau))
    with pytest.raises(ValueError):
        log_se(0.0, -1.0, 1.0)


def test_a_run_after_runs_that_moved_gets_a_ci_that_covers_them(tmp_path: Path):
    with ResultStore.open(tmp_path / "r.db") as store:
        machine, run, trials = _after_runs_that_moved(store)
        plain = compare(trials)
        rows = with_rerun_spread(plain, store, machine, run)
    ref_row, jax_row = rows
    own = jax_row.speedup_this_run
    assert own is not None and own == plain[1].speedup
    assert jax_row.speedup.value == own.value
    assert jax_row.speedup.ci_low < own.ci_low and jax_row.speedup.ci_high > own.ci_high
    # The widened CI reaches the earlier runs' ratios (12.8x .. 19.6x) nearly: their
    # between-run sd is the spread a rerun should land in.
    assert jax_row.speedup_reruns.runs == 4
    assert jax_row.speedup.ci_low < 13.5 and jax_row.speedup.ci_high > 19.0
    st, own_st = ref_row.step_time, ref_row.result.step_time
    assert st.median == own_st.median and st.ci_low < 3.9e-3 and st.ci_high > 5.5e-3
    d = jax_row.to_dict()["speedup_vs_reference"]
    assert d["ci95_this_run"] == [own.ci_low, own.ci_high] and d["reruns"]["runs"] == 4
    line, = rerun_lines(rows)
    assert line.startswith("seed-rnn: reruns on this machine move beyond a run's own CI "
                           "(3 earlier runs") and "jax/cpu speed-up ±" in line


def test_runs_that_agree_leave_the_ci_and_the_first_runs_have_none(tmp_path: Path):
    with ResultStore.open(tmp_path / "r.db") as store:
        machine = store.add_machine(EnvSnapshot(host=HostInfo()))
        run1, first = _run(store, machine, 4.0e-3, 0.25e-3, seed=1, jitter=0.05)
        # The first run has no history: rows unchanged, nothing said.
        alone = with_rerun_spread(compare(first), store, machine, run1)
        assert all(r.step_reruns is None and r.speedup_reruns is None for r in alone)
        assert rerun_lines(alone) == []
        _run(store, machine, 4.02e-3, 0.251e-3, seed=2, jitter=0.05)
        run, trials = _run(store, machine, 3.99e-3, 0.249e-3, seed=3, jitter=0.05)
        plain = compare(trials)
        rows = with_rerun_spread(plain, store, machine, run)
        # Another machine's runs are not this machine's history.
        other = store.add_machine(EnvSnapshot(host=HostInfo(os="Darwin")))
        elsewhere = with_rerun_spread(plain, store, other, run)
    # Runs that differ by their own noise only: tau near 0, the CI about as it was.
    own, shown = plain[1].speedup, rows[1].speedup
    assert rows[1].speedup_reruns.tau < 0.03
    assert (shown.ci_high - shown.ci_low) < 1.5 * (own.ci_high - own.ci_low)
    assert all(r.speedup_reruns is None for r in elsewhere)


def test_runs_that_repeat_exactly_are_said_to_agree(tmp_path: Path):
    with ResultStore.open(tmp_path / "r.db") as store:
        machine = store.add_machine(EnvSnapshot(host=HostInfo()))
        for _ in range(2):
            _run(store, machine, 4.0e-3, 0.25e-3, seed=5)
        run, trials = _run(store, machine, 4.0e-3, 0.25e-3, seed=5)
        plain = compare(trials)
        rows = with_rerun_spread(plain, store, machine, run)
    assert rows[1].speedup_reruns.tau == 0.0 and rows[1].speedup == plain[1].speedup
    assert rerun_lines(rows) == ["seed-rnn: 2 earlier runs of these configurations on this "
                                 "machine agree with this one within their CIs"]


def test_a_stored_run_read_back_shows_the_same_widened_figures(tmp_path: Path):
    from devicebench.results.run_report import build_report

    with ResultStore.open(tmp_path / "r.db") as store:
        machine, run, trials = _after_runs_that_moved(store)
        shown = with_rerun_spread(compare(trials), store, machine, run)
        report = build_report(store, run)
    w, = report.workloads
    assert w.notes[-1] == rerun_lines(shown)[0]
    jax = next(c for c in w.configs if c.label == "jax/cpu")
    assert jax.speedup == shown[1].speedup and jax.ci_low_s == shown[1].step_time.ci_low
