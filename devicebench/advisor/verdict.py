"""The verdict from the final comparison: does the accelerator speed training up (the
headline), which candidate pays back over the planned training, and which one to
recommend."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devicebench.advisor.search import CandidateOutcome
from devicebench.fmt import fmt_time
from devicebench.measure.stats import Ratio, paired_ratio
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec
from devicebench.trials.summary import ComparisonRow


@dataclass(frozen=True)
class Headline:
    """Does this machine's accelerator speed this workload's training up? The same
    configuration on the accelerator and on the CPU, measured interleaved.

    Attributes:
        backend: the framework both trials ran on.
        accelerator: gpu:N | mps, or "" when the machine has none.
        ratio: CPU step time / accelerator step time with its CI (>1: the accelerator is
            faster); None when one side did not measure.
        text: the answer in one sentence.
    """

    backend: str
    accelerator: str
    ratio: Ratio | None
    text: str
    accelerator_step_s: float | None = None
    cpu_step_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        r = self.ratio
        return {"backend": self.backend, "accelerator": self.accelerator,
                "speedup_over_cpu": ({"value": r.value, "ci95": [r.ci_low, r.ci_high],
                                      "rounds": r.n_rounds} if r else None),
                "accelerator_step_s": self.accelerator_step_s,
                "cpu_step_s": self.cpu_step_s, "text": self.text}


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


def headline(baseline: TrialSpec, partner: TrialSpec | None,
             results: dict[TrialSpec, TrialResult]) -> Headline:
    """The accelerator question answered from the final's interleaved rounds."""
    w = baseline.workload
    if partner is None:
        return Headline(baseline.backend, "", None, (
            f"No accelerator: this machine has no NVIDIA GPU (nvidia-smi) and is not an "
            f"Apple Silicon Mac, so {w} was compared across backends and settings on the "
            "CPU instead"))
    acc_spec, cpu_spec = (baseline, partner) if partner.device == "cpu" else (partner,
                                                                              baseline)
    acc, cpu = results.get(acc_spec), results.get(cpu_spec)
    dev, be = acc_spec.device, baseline.backend
    failed = [r for r in (acc, cpu) if r is None or r.status != "ok" or not r.block_seconds]
    if failed:
        what = "; ".join(
            f"{s.label}: " + ("not measured" if r is None else
                              f"{r.status}" + (f" ({r.error.splitlines()[0]})"
                                               if r.error.strip() else ""))
            for s, r in ((acc_spec, acc), (cpu_spec, cpu)) if r in failed)
        return Headline(be, dev, None, (
            f"Accelerator: could not compare {dev} with the CPU for {w} on {be}: {what}"))
    q = paired_ratio(cpu.round_step_times, acc.round_step_times)  # >1: accelerator faster
    a_s, c_s = acc.step_time.median, cpu.step_time.median
    steps = f"{fmt_time(a_s)} vs {fmt_time(c_s)} per step"
    if q is None:
        return Headline(be, dev, None, f"Accelerator: {dev} {steps} on the CPU (not "
                        "measured in the same rounds: no ratio)", a_s, c_s)
    rounds = f"{q.n_rounds} interleaved rounds"
    ci = f"[95% CI {q.ci_low:.2g}-{q.ci_high:.2g}x, {rounds}]"
    if q.ci_high < 1:
        ci = f"[95% CI {1 / q.ci_high:.2g}-{1 / q.ci_low:.2g}x slower, {rounds}]"
    if q.ci_low > 1:
        text = (f"Accelerator: yes — {dev} trains {w} {q.value:.1f}x faster than the CPU "
                f"on {be} ({steps}) {ci}")
    elif q.ci_high < 1:
        text = (f"Accelerator: no — {dev} is {1 / q.value:.1f}x SLOWER than the CPU for "
                f"{w} on {be} ({steps}) {ci}; this model trains faster on the CPU")
    else:
        text = (f"Accelerator: no measurable difference — {dev} vs the CPU for {w} on "
                f"{be}: {q.value:.2f}x ({steps}) {ci}")
    return Headline(be, dev, q, text, a_s, c_s)


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
