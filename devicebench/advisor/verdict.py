"""The verdict from the final comparison: which candidate pays back over the planned
training, and which one to recommend (the accelerator answer itself is
:func:`devicebench.trials.headline.headline`)."""

from __future__ import annotations

from dataclasses import dataclass

from devicebench.advisor.search import CandidateOutcome
from devicebench.measure.stats import paired_ratio
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec
from devicebench.trials.summary import ComparisonRow


def _one_time(r: TrialResult) -> float:
    """What a trial pays once, before its steady steps: the first step (tracing and
    compilation) and the warm-up after it."""
    return (r.first_step_seconds or 0.0) + (r.warmup_seconds or 0.0)


@dataclass(frozen=True)
class Payback:
    """Whether a faster step pays its extra one-time cost back within the planned
    training: ``epochs_needed`` is from how many epochs on it does (inf: never)."""

    extra_s: float
    saving_per_step_s: float
    epochs_needed: float
    pays_back: bool


def payback(candidate: TrialResult, baseline: TrialResult, epochs: int) -> Payback | None:
    """Weigh ``candidate``'s extra one-time cost against its saving over ``epochs``
    epochs of the baseline's steps (None without step times)."""
    if candidate.step_time is None or baseline.step_time is None:
        return None
    saving = baseline.step_time.median - candidate.step_time.median
    extra = _one_time(candidate) - _one_time(baseline)
    spe = max(baseline.steps_per_epoch, 1)
    if extra <= 0:
        return Payback(extra, saving, 0.0, saving > 0)
    needed = extra / saving / spe if saving > 0 else float("inf")
    return Payback(extra, saving, needed, needed <= epochs)


def _epochs(n: float) -> str:
    return "never" if n == float("inf") else f"{n:,.1f}"


def choose(rows: list[ComparisonRow], baseline: TrialSpec, outcomes: dict[TrialSpec,
           CandidateOutcome], epochs: int) -> tuple[ComparisonRow | None, list[str]]:
    """The recommendation among the final's rows, and notes on the ones passed over.

    A candidate qualifies when its per-step speed-up's CI lies above 1, it is safe,
    and its extra one-time cost (compilation, warm-up) pays back within ``epochs``
    epochs. Among those, the one with the shortest planned training (one-time cost +
    ``epochs`` epochs of steps) wins — unless it changes the math and a candidate that
    does not is not significantly slower than it (their ratio's CI includes 1): then
    the one that keeps the math wins.
    """
    by_spec = {r.result.spec: r for r in rows}
    base = by_spec.get(baseline)
    notes: list[str] = []
    if base is None or base.result.status != "ok":
        return None, notes
    ok = []
    for r in rows:
        if r.speedup is None or r.speedup.ci_low <= 1 or outcomes[r.result.spec].rejected:
            continue
        p = payback(r.result, base.result, epochs)
        if p is not None and not p.pays_back:
            notes.append(
                f"{r.result.spec.label} is {r.speedup.value:.1f}x faster per step but costs "
                f"{p.extra_s:.1f} s more up front (compilation, warm-up): over the "
                f"{epochs} epochs planned it does not pay back; it would from "
                f"{_epochs(p.epochs_needed)} epochs on (--epochs)")
            continue
        ok.append(r)
    if not ok:
        return None, notes
    spe = max(base.result.steps_per_epoch, 1)

    def planned(r: ComparisonRow) -> float:
        return _one_time(r.result) + epochs * spe * r.result.step_time.median

    ok.sort(key=planned)
    best = ok[0]
    if best.result.spec.math_changes(baseline):
        for r in ok[1:]:
            if r.result.spec.math_changes(baseline):
                continue
            q = paired_ratio(r.result.round_step_times, best.result.round_step_times)
            if q is not None and q.ci_low <= 1:
                notes.append(
                    f"{best.result.spec.label} is not significantly faster than "
                    f"{r.result.spec.label} ({q.value:.2f}x [95% CI {q.ci_low:.2f}-"
                    f"{q.ci_high:.2f}]) and changes the math: {r.result.spec.label}, "
                    "which keeps it, is the recommendation")
                return r, notes
    return best, notes
