"""Where should this model train? One row per machine from its advice: its fastest
configuration, step and epoch time with their CIs, its accelerator verdict, and how
much faster than the user's machine — from the same figures live or stored."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from devicebench.measure.stats import Ratio, ratio_of_medians
from devicebench.trials.result import TrialResult

# The machines' runs are separate processes on separate machines, never interleaved:
# their ratio is of independent samples.
INDEPENDENT_NOTE = (
    "ratios across machines come from independent samples (each machine's own blocks, "
    "resampled separately; the runs were not interleaved), so their CIs are wider than "
    "an interleaved ratio's on one machine, and they cover only the noise within each "
    "run: a rerun on the same machine can differ by more (DESIGN: the process is the "
    "unit of replication)")


@dataclass(frozen=True)
class MachineFacts:
    """What the answer needs of one machine: who, how it ended, its advice as a dict
    (``AdviceResult.to_dict()``, live or stored) and its trials."""

    name: str
    label: str
    fingerprint: str
    status: str
    reason: str
    is_user: bool
    advice: dict[str, Any] | None
    trials: list[TrialResult] = field(default_factory=list)


@dataclass(frozen=True)
class MachineAnswer:
    """One machine's row of the answer."""

    facts: MachineFacts
    best: str = ""  # the recommended configuration's label
    step_s: float | None = None
    step_ci: tuple[float, float] | None = None
    epoch_s: float | None = None
    epoch_ci: tuple[float, float] | None = None
    accelerator: str = ""  # the headline: does its accelerator speed this up
    accelerator_short: str = ""  # the same in a few words, for a table cell
    verdict: str = ""
    vs_user: Ratio | None = None  # the user's epoch / this one (>1: faster than yours)
    is_reference: bool = False  # the machine the ratios are against
    epoch_samples: tuple[float, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        f = self.facts
        r = self.vs_user
        return {"node": f.name, "machine": f.label, "fingerprint": f.fingerprint,
                "status": f.status, "reason": f.reason, "user_machine": f.is_user,
                "trials": len(f.trials), "best": self.best, "step_s": self.step_s,
                "step_ci95": list(self.step_ci) if self.step_ci else None,
                "epoch_s": self.epoch_s,
                "epoch_ci95": list(self.epoch_ci) if self.epoch_ci else None,
                "accelerator": self.accelerator, "is_reference": self.is_reference,
                "accelerator_short": self.accelerator_short, "verdict": self.verdict,
                "vs_user": ({"value": r.value, "ci95": [r.ci_low, r.ci_high],
                             "samples": "independent"} if r else None)}


def _row(advice: dict[str, Any]) -> dict[str, Any] | None:
    rec = advice.get("recommended")
    return next((r for r in advice.get("final", []) if r.get("spec") == rec), None)


def _epoch_samples(facts: MachineFacts, spec: dict[str, Any] | None) -> tuple[float, ...]:
    """Per-block training-pass epochs (step samples x steps per epoch) of the newest ok
    trial of ``spec`` on this machine."""
    hits = [t for t in facts.trials if t.status == "ok" and t.spec.to_dict() == spec
            and t.step_samples]
    if not hits:
        return ()
    t = hits[-1]
    return tuple(s * max(t.steps_per_epoch, 1) for s in t.step_samples)


def short_verdict(head: dict[str, Any]) -> str:
    """``gpu:0 5.0x slower than the cpu [4.2–7.7x]`` from a headline's dict."""
    acc = head.get("accelerator") or ""
    if not acc:
        return "no accelerator"
    r = head.get("speedup_over_cpu")
    if not r:
        return f"{acc}: not measured against the cpu"
    v, (lo, hi) = r["value"], r["ci95"]
    if v >= 1:
        return f"{acc} {v:.2g}x faster than the cpu [{lo:.2g}–{hi:.2g}x]"
    return f"{acc} {1 / v:.2g}x slower than the cpu [{1 / hi:.2g}–{1 / lo:.2g}x]"


def _answer(f: MachineFacts) -> MachineAnswer:
    if f.status != "ok" or not f.advice:
        return MachineAnswer(f)
    a = f.advice
    row = _row(a) or {}
    st = row.get("step_time_s") or {}
    fit = row.get("fit") or {}
    head = a.get("headline") or {}
    return MachineAnswer(
        f, best=row.get("label", ""), step_s=st.get("median"),
        step_ci=tuple(st["ci95"]) if st.get("ci95") else None,
        epoch_s=fit.get("epoch_s"),
        epoch_ci=tuple(fit["epoch_ci95"]) if fit.get("epoch_ci95") else None,
        accelerator=head.get("text", ""), accelerator_short=short_verdict(head),
        verdict=a.get("verdict", ""),
        epoch_samples=_epoch_samples(f, a.get("recommended")))


def where_to_train(machines: list[MachineFacts]) -> list[MachineAnswer]:
    """The answer, fastest machine first (by its best epoch), machines without an
    answer (lost, failed, cancelled) last. ``vs_user`` compares each with the user's
    machine when it answered, else with the fastest (then the first row says so by
    being 1.0x).

    Example:
        >>> where_to_train([])
        []
    """
    rows = [_answer(f) for f in machines]
    done = sorted((r for r in rows if r.epoch_s is not None), key=lambda r: r.epoch_s)
    rest = [r for r in rows if r.epoch_s is None]
    ref = next((r for r in done if r.facts.is_user), done[0] if done else None)
    out = []
    for r in done:
        # The reference itself gets no ratio: resampling one sample against itself
        # would print a CI around 1x that measures nothing.
        ratio = (ratio_of_medians(ref.epoch_samples, r.epoch_samples)
                 if ref is not None and r is not ref and ref.epoch_samples
                 and r.epoch_samples else None)
        out.append(MachineAnswer(**{**r.__dict__, "vs_user": ratio,
                                    "is_reference": r is ref}))
    return out + rest


def reference_name(answers: list[MachineAnswer]) -> str:
    """The machine the ratios are against: the user's when it answered, else the fastest."""
    done = [a for a in answers if a.epoch_s is not None]
    ref = next((a for a in done if a.facts.is_user), done[0] if done else None)
    return "" if ref is None else ref.facts.name + ("" if ref.facts.is_user else
                                                    " (the fastest: yours gave no answer)")
