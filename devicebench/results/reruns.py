"""A run's figures against this machine's earlier runs of the same configurations: the
CIs widened by the run-to-run spread those runs show (:mod:`devicebench.measure.reruns`).

One home for `run` (as it finishes) and for a stored run read back: the earlier runs are
those before it on the same machine (fingerprint) that measured the same spec keys, and a
ratio's earlier values come from runs that measured both of its configurations in one
interleaved group.
"""

from __future__ import annotations

from dataclasses import replace

from devicebench.measure.reruns import RerunSpread, between_runs, widened
from devicebench.measure.stats import Summary, paired_ratio
from devicebench.store.db import ResultStore
from devicebench.store.runs import earlier_results
from devicebench.trials.result import TrialResult
from devicebench.trials.summary import ComparisonRow

# Earlier runs read per figure (the newest): enough for the between-run variance, few
# enough that a machine's speed of a year ago does not speak for today.
EARLIER_RUNS = 8


def _step(r: TrialResult) -> tuple[float, float, float] | None:
    st = r.step_time if r.status == "ok" else None
    return (st.median, st.ci_low, st.ci_high) if st is not None else None


def _ratio(ref: TrialResult, r: TrialResult) -> tuple[float, float, float] | None:
    if ref.group_id != r.group_id or not (ref.block_seconds and r.block_seconds):
        return None
    q = paired_ratio(ref.round_step_times, r.round_step_times)
    return (q.value, q.ci_low, q.ci_high) if q is not None else None


def with_rerun_spread(rows: list[ComparisonRow], store: ResultStore, machine_id: int,
                      run_id: int) -> list[ComparisonRow]:
    """``rows`` (one run's comparison) with each step time's and speed-up's run-to-run
    spread on this machine attached and, where at least
    :data:`~devicebench.measure.reruns.MIN_RUNS` runs (this one included) measured it,
    their CIs widened by it (the run's own CIs kept beside them)."""
    keys = {row.result.spec.key for row in rows if row.result.status == "ok"}
    earlier = earlier_results(store, machine_id, keys, run_id, limit=EARLIER_RUNS)
    if not earlier:
        return rows
    runs = list(reversed(earlier.values()))  # oldest first
    refs = {row.result.group_id: row.result for row in rows if row.is_reference}
    out: list[ComparisonRow] = []
    for row in rows:
        r = row.result
        now = _step(r)
        if now is None:
            out.append(row)
            continue
        key = r.spec.key
        steps = [f for f in (_step(run[key]) for run in runs if key in run) if f]
        step_spread = between_runs([*steps, now])
        speed_spread = None
        ref = refs.get(r.group_id)
        if row.speedup is not None and ref is not None:
            past = [_ratio(run[ref.spec.key], run[key]) for run in runs
                    if key in run and ref.spec.key in run]
            speed_spread = between_runs(
                [*(f for f in past if f), (row.speedup.value, row.speedup.ci_low,
                                           row.speedup.ci_high)])
        out.append(_widen(row, step_spread, speed_spread))
    return out


def _widen(row: ComparisonRow, step: RerunSpread | None, speed: RerunSpread | None
           ) -> ComparisonRow:
    st = row.result.step_time
    step_time = None
    if step is not None and st is not None:
        lo, hi = widened(st.median, st.ci_low, st.ci_high, step.tau)
        step_time = Summary(st.n, st.median, st.q1, st.q3, lo, hi)
    speedup, this_run = row.speedup, None
    if speed is not None and row.speedup is not None:
        s = row.speedup
        lo, hi = widened(s.value, s.ci_low, s.ci_high, speed.tau)
        speedup, this_run = replace(s, ci_low=lo, ci_high=hi), s
    return replace(row, speedup=speedup, speedup_this_run=this_run,
                   step_time_reruns=step_time, step_reruns=step, speedup_reruns=speed)


def rerun_lines(rows: list[ComparisonRow]) -> list[str]:
    """One line per workload whose CIs earlier runs widened: how far reruns moved."""
    lines: list[str] = []
    for workload in dict.fromkeys(row.result.spec.workload for row in rows):
        mine = [row for row in rows if row.result.spec.workload == workload]
        spreads = [s for row in mine for s in (row.step_reruns, row.speedup_reruns) if s]
        if not spreads:
            continue
        runs = max(s.runs for s in spreads) - 1
        worst = max(spreads, key=lambda s: s.tau)
        if worst.tau == 0:
            lines.append(f"{workload}: {runs} earlier runs of these configurations on this "
                         "machine agree with this one within their CIs")
            continue
        moved = ", ".join(
            f"{row.result.spec.label} {what} ±{s.percent:.0%}"
            for row in mine for what, s in (("step", row.step_reruns),
                                            ("speed-up", row.speedup_reruns))
            if s is not None and s.tau > 0)
        lines.append(f"{workload}: reruns on this machine move beyond a run's own CI "
                     f"({runs} earlier runs; 95% between-run range: {moved}); the CIs shown "
                     "include that spread (this run's own: --json ci95_this_run)")
    return lines

