"""The words of an advice: from what the search measured (:class:`SearchOutcome`) to
the verdict line, the reasons (each citing its figures), the notes and the code that
applies the recommendation. No measuring here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from devicebench.advisor.explain import Evidence, Reason, explain
from devicebench.advisor.facts import WorkloadFacts
from devicebench.advisor.figures import DeviceFigures
from devicebench.advisor.snippet import snippet
from devicebench.advisor.verdict import choose
from devicebench.advisor.workload_search import SearchOutcome
from devicebench.env.snapshot import EnvSnapshot
from devicebench.measure.peak import cpu_matmul_gflops
from devicebench.trials.spec import TrialSpec


@dataclass(frozen=True)
class AdviceWords:
    """What :func:`word_advice` says of a search."""

    verdict: str
    recommended: TrialSpec | None = None
    code: str = ""
    reasons: list[Reason] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data_note: str = ""


def word_advice(found: SearchOutcome, snapshot: EnvSnapshot, *, facts: WorkloadFacts,
                figures: DeviceFigures | None,
                device_figures: dict[str, DeviceFigures],
                cpu_rate: Callable[[], float] | None = cpu_matmul_gflops) -> AdviceWords:
    """The verdict (use X: N x faster [CI], or keep the baseline and why), the reasons
    from the measured evidence, the notes (processes, the search's stop, candidates
    passed over, figures missing) and the code."""
    baseline, rows, outcomes = found.baseline, found.rows, found.outcomes
    notes = list(found.replication.notes) if found.replication else []
    if found.stop_reason and not found.stop_reason.startswith("all "):
        notes.append(f"search: {found.stop_reason}")
    base_row = found.baseline_row
    recommended, code = None, ""
    if base_row is None or base_row.result.status != "ok":
        verdict = ("the baseline itself failed: "
                   + (base_row.result.error.splitlines()[0] if base_row and
                      base_row.result.error else "no result"))
    else:
        best, passed_over = choose(rows, baseline, outcomes, found.epochs)
        notes.extend(passed_over)
        if best is not None:
            recommended = best.result.spec
            s = best.speedup
            math = best.result.spec.math_changes(baseline)
            label = (f" (changes the math: {', '.join(math)}; loss equivalence passed, "
                     f"{best.result.loss_detail})" if math else "")
            verdict = (f"use {best.result.spec.label}: {s.value:.1f}x faster than "
                       f"{baseline.label} [95% CI {s.ci_low:.1f}-{s.ci_high:.1f}], "
                       f"loss {best.result.loss_verdict}{label}")
            code = snippet(best.result.spec, baseline, best.result.batch_size)
        else:
            measured = [f"{r.result.spec.label} {r.speedup.value:.2f}x "
                        f"[{r.speedup.ci_low:.2f}-{r.speedup.ci_high:.2f}]"
                        for r in rows if r.speedup is not None]
            rejected = [f"{o.spec.label} ({o.rejected})" for o in outcomes.values()
                        if o.rejected and not o.rejected.startswith("skipped")]
            verdict = (f"keep {baseline.label}: no safe candidate was significantly "
                       "faster over the planned training" +
                       (f"; measured speed-ups: {', '.join(measured)}" if measured else "")
                       + (f"; rejected: {'; '.join(rejected)}" if rejected else ""))
    if base_row is None:
        return AdviceWords(verdict, recommended, code, [], notes)
    rate, rate_source = _device_rate(baseline, figures, cpu_rate)
    reasons = explain(Evidence(
        baseline=base_row.result, results=found.results, device_gflops=rate,
        device_rate_source=rate_source, figures=figures,
        cpu_flags=tuple(snapshot.host.cpu_flags), workload_tags=facts.tags,
        device_figures=device_figures, timesteps=facts.timesteps,
        gpu_compute_capability=_compute_capability(snapshot), epochs=found.epochs))
    command = f"`devicebench ops --backend {baseline.backend} --device {baseline.device}`"
    if figures is None:
        notes.append(
            f"no `devicebench ops` figures for {baseline.device} on this machine: run "
            f"{command} once, and advise also weighs ops per step against the "
            "measured per-op dispatch cost")
    elif baseline.backend == "tensorflow" and "tensorflow" not in figures.per_op_seconds:
        notes.append(
            f"{figures.source} did not resolve TensorFlow's per-op cost inside a graph "
            f"(in-graph mode; lost in the noise or not measured): run {command} on a "
            "quiet machine for the dispatch reason")
    return AdviceWords(verdict, recommended, code, reasons, notes,
                       base_row.result.data_note)


def _device_rate(spec: TrialSpec, figures: DeviceFigures | None,
                 cpu_rate: Callable[[], float] | None = cpu_matmul_gflops
                 ) -> tuple[float | None, str]:
    """The baseline device's matmul rate (GFLOP/s) and where it comes from: the stored
    ``ops`` run when there is one, else (CPU only) numpy, measured now."""
    if figures is not None and figures.peak_gflops:
        return figures.peak_gflops, f"{figures.source}: {figures.peak_label}"
    if spec.device == "cpu" and cpu_rate is not None:
        return cpu_rate(), "numpy matmul, measured now"
    return None, ""


def _compute_capability(snapshot: EnvSnapshot) -> str:
    smi = snapshot.nvidia_smi
    return smi.gpus[0].compute_capability if smi is not None and smi.gpus else ""
