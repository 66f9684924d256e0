"""The one accelerator answer: does this machine's accelerator speed this workload's
training up? The same configuration on the accelerator and on the CPU, measured
interleaved. ``advise``, the main job and ``report`` all answer through :func:`headline`
(a report of an advise run shows the headline that run stored)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devicebench.fmt import fmt_time
from devicebench.measure.stats import Ratio, paired_ratio
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec

ANSWERS = ("yes", "no", "unclear", "not-measured")


@dataclass(frozen=True)
class Headline:
    """Does this machine's accelerator speed this workload's training up?

    Attributes:
        backend: the framework both trials ran on.
        accelerator: gpu:N | mps, or "" when the machine has none.
        ratio: CPU step time / accelerator step time with its CI (>1: the accelerator is
            faster); None when one side did not measure.
        text: the answer in one sentence.
        answer: yes | no | unclear | not-measured.
        accelerator_label, cpu_label: the two configurations compared ("" if none).
    """

    backend: str
    accelerator: str
    ratio: Ratio | None
    text: str
    accelerator_step_s: float | None = None
    cpu_step_s: float | None = None
    answer: str = "not-measured"
    accelerator_label: str = ""
    cpu_label: str = ""

    def to_dict(self) -> dict[str, Any]:
        r = self.ratio
        return {"backend": self.backend, "accelerator": self.accelerator,
                "answer": self.answer, "accelerator_label": self.accelerator_label,
                "cpu_label": self.cpu_label,
                "speedup_over_cpu": ({"value": r.value, "ci95": [r.ci_low, r.ci_high],
                                      "rounds": r.n_rounds, "interleaved": r.interleaved,
                                      "processes": list(r.processes)}
                                     if r else None),
                "accelerator_step_s": self.accelerator_step_s,
                "cpu_step_s": self.cpu_step_s, "text": self.text}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Headline:
        """The headline a run stored (:meth:`to_dict`; older runs lack the labels and the
        answer, which are then derived from the ratio)."""
        s = d.get("speedup_over_cpu")
        ratio = None
        if isinstance(s, dict) and s.get("value") is not None:
            lo, hi = s.get("ci95") or (s["value"], s["value"])
            procs = s.get("processes") or (1, 1)
            ratio = Ratio(float(s["value"]), float(lo), float(hi), int(s.get("rounds") or 0),
                          bool(s.get("interleaved", True)),
                          (int(procs[0]), int(procs[1])))
        answer = d.get("answer") or _answer(ratio)
        return cls(str(d.get("backend", "")), str(d.get("accelerator", "")), ratio,
                   str(d.get("text", "")), d.get("accelerator_step_s"), d.get("cpu_step_s"),
                   answer if answer in ANSWERS else "not-measured",
                   str(d.get("accelerator_label", "")), str(d.get("cpu_label", "")))


def _answer(q: Ratio | None) -> str:
    if q is None:
        return "not-measured"
    return "yes" if q.ci_low > 1 else "no" if q.ci_high < 1 else "unclear"


def headline(baseline: TrialSpec, partner: TrialSpec | None,
             results: dict[TrialSpec, TrialResult],
             has_accelerator: bool = False) -> Headline:
    """The accelerator question answered from one interleaved group's rounds:
    ``baseline`` against ``partner`` (the same configuration on the other device; None
    when there is none). ``has_accelerator``: the machine has one (so a missing partner
    means "not measured here", not "no accelerator")."""
    w = baseline.workload
    if partner is None:
        if has_accelerator:
            return Headline(baseline.backend, "", None, (
                f"Accelerator: not measured — this run has no {baseline.label} on the other "
                f"device to compare with (devicebench advise {w} measures both)"))
        return Headline(baseline.backend, "", None, (
            f"No accelerator: this machine has no NVIDIA GPU (nvidia-smi) and is not an "
            f"Apple Silicon Mac, so {w} was compared across backends and settings on the "
            "CPU instead"))
    acc_spec, cpu_spec = (baseline, partner) if partner.device == "cpu" else (partner,
                                                                              baseline)
    labels = {"accelerator_label": acc_spec.label, "cpu_label": cpu_spec.label}
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
            f"Accelerator: could not compare {dev} with the CPU for {w} on {be}: {what}"),
            **labels)
    q = paired_ratio(cpu.round_step_times, acc.round_step_times)  # >1: accelerator faster
    a_s, c_s = acc.step_time.median, cpu.step_time.median
    steps = f"{fmt_time(a_s)} vs {fmt_time(c_s)} per step"
    if q is None:
        return Headline(be, dev, None, f"Accelerator: {dev} {steps} on the CPU (not "
                        "measured in the same rounds: no ratio)", a_s, c_s, **labels)
    rounds = f"{q.n_rounds} interleaved rounds"
    if q.processes != (1, 1):
        rounds += f" in {q.processes[1]} and {q.processes[0]} processes"
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
    return Headline(be, dev, q, text, a_s, c_s, _answer(q), **labels)


def device_partner(baseline: TrialSpec, measured: list[TrialSpec]) -> TrialSpec | None:
    """Among ``measured``, the baseline's configuration on the other side of the
    accelerator/CPU line (the CPU for an accelerator baseline; else the first
    accelerator), or None."""
    for spec in measured:
        if spec == baseline or spec.with_(device=baseline.device) != baseline:
            continue
        if (spec.device == "cpu") != (baseline.device == "cpu"):
            return spec
    return None
