"""Find the fastest safe configuration: successive halving, then an interleaved final.

Rung 0 measures many candidates briefly (two rounds, few equivalence steps); each rung
keeps the faster half; the finalists are measured interleaved against the baseline
until their CIs are tight or the budget ends. Unsafe candidates (crashed, NaN, or a
different loss) are rejected with the reason at the rung where they fail.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from devicebench.trials.engine import RunOptions, run_workload_group
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec

Measure = Callable[[list[TrialSpec], RunOptions], list[TrialResult]]


@dataclass
class CandidateOutcome:
    """What happened to one candidate during the search."""

    spec: TrialSpec
    rung: int  # the last rung it was measured in
    median_step_s: float | None = None
    rejected: str = ""  # why it can never be recommended ("" = safe so far)
    pruned: bool = False  # slower than the survivors of its rung
    final: bool = False  # measured in the final, interleaved comparison

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec.to_dict(), "label": self.spec.label, "rung": self.rung,
                "median_step_s": self.median_step_s, "rejected": self.rejected,
                "pruned": self.pruned, "final": self.final}


def rejection(result: TrialResult, baseline: TrialSpec) -> str:
    """Why a measured candidate is unsafe to recommend, or ""."""
    if result.status != "ok":
        first = result.error.strip().splitlines()[0] if result.error.strip() else ""
        return f"{result.status}: {first}".rstrip(": ")
    if result.loss_verdict in ("nan", "differs"):
        return f"loss {result.loss_verdict} from the baseline's: {result.loss_detail}"
    if result.spec.math_changes(baseline) and result.loss_verdict not in ("same", "reference"):
        return (f"changes the math ({', '.join(result.spec.math_changes(baseline))}) and the "
                f"loss equivalence could not confirm it ({result.loss_verdict})")
    return ""


def successive_halving(
    baseline: TrialSpec,
    candidates: list[TrialSpec],
    measure: Measure,
    *,
    rung_options: list[RunOptions],
    eta: int = 2,
    keep_final: int = 2,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[list[TrialSpec], dict[TrialSpec, CandidateOutcome], dict[TrialSpec, TrialResult]]:
    """Prune ``candidates`` rung by rung, always measuring the baseline alongside.

    A rung after the first runs only if, at the previous rung's cost per trial, it ends
    before ``deadline``.

    Returns:
        (finalists — at most ``keep_final`` safe candidates, fastest first;
         outcome per candidate; the last result per spec, baseline included).
    """
    outcomes = {c: CandidateOutcome(c, rung=0) for c in candidates}
    last: dict[TrialSpec, TrialResult] = {}
    alive = list(candidates)
    per_trial_s = 0.0
    for rung, options in enumerate(rung_options):
        if len(alive) <= keep_final:
            break  # few enough already: the final comparison measures them
        if deadline is not None and rung > 0:
            # The next rung costs about what the last one did per trial.
            if clock() + per_trial_s * (len(alive) + 1) > deadline:
                break
        rung_start = clock()
        results = measure([baseline, *alive], options)
        per_trial_s = (clock() - rung_start) / (len(alive) + 1)
        for r in results:
            last[r.spec] = r
        ranked: list[tuple[float, TrialSpec]] = []
        for spec in alive:
            out = outcomes[spec]
            r = last.get(spec)
            if r is None:
                out.rejected = "no result came back"
                continue
            out.rung = rung
            out.median_step_s = r.step_time.median if r.step_time else None
            out.rejected = rejection(r, baseline)
            if not out.rejected and out.median_step_s is not None:
                ranked.append((out.median_step_s, spec))
        ranked.sort(key=lambda t: t[0])
        keep = max(keep_final, math.ceil(len(ranked) / eta))
        for _, spec in ranked[keep:]:
            outcomes[spec].pruned = True
        alive = [spec for _, spec in ranked[:keep]]
    for spec in alive[keep_final:]:
        outcomes[spec].pruned = True  # no rung left to tell them apart: the fastest go on
    return alive[:keep_final], outcomes, last


def default_rungs(budget_s: float) -> list[RunOptions]:
    """Short pruning rungs: two rounds of ~0.25 s blocks, ten equivalence steps, warm-up
    and setup capped by the budget."""
    cap = max(20.0, min(90.0, budget_s * 0.3))
    short = dict(equivalence_steps=10, setup_timeout=cap, block_timeout=cap,
                 budget_seconds=budget_s, whole_epoch_seconds=0.0, max_warmup_seconds=3.0)
    return [RunOptions(min_rounds=2, max_rounds=2, **short),
            RunOptions(min_rounds=3, max_rounds=3, **short)]


def engine_measure(on_result: Callable[[TrialResult], None] | None = None,
                   on_event=None) -> Measure:
    """A Measure that runs real worker processes through the trial engine."""

    def measure(specs: list[TrialSpec], options: RunOptions) -> list[TrialResult]:
        return run_workload_group(specs, options, reference=specs[0], on_result=on_result,
                                  on_event=on_event)

    return measure

