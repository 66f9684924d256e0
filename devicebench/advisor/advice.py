"""``advise``: measure candidate configurations of a workload, pick the fastest safe one,
explain why, and give the code that applies it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from devicebench.advisor.candidates import candidate_space, fit_to_budget, is_compute_heavy
from devicebench.advisor.explain import Evidence, Reason, explain, snippet
from devicebench.advisor.search import (
    CandidateOutcome,
    Measure,
    default_rungs,
    engine_measure,
    rejection,
    successive_halving,
)
from devicebench.env.snapshot import EnvSnapshot
from devicebench.errors import SpecError
from devicebench.measure.peak import cpu_matmul_gflops
from devicebench.trials.engine import RunOptions
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec
from devicebench.trials.summary import ComparisonRow, compare

DEFAULT_BUDGET_S = 120.0


@dataclass
class AdviceResult:
    """Everything ``advise`` found; the CLI renders it, ``to_dict`` is the JSON."""

    workload: str
    baseline: TrialSpec
    budget_s: float
    elapsed_s: float = 0.0
    rows: list[ComparisonRow] = field(default_factory=list)  # final, interleaved
    outcomes: list[CandidateOutcome] = field(default_factory=list)
    recommended: TrialSpec | None = None
    reasons: list[Reason] = field(default_factory=list)
    code: str = ""
    verdict: str = ""
    notes: list[str] = field(default_factory=list)
    data_note: str = ""

    @property
    def recommended_row(self) -> ComparisonRow | None:
        return next((r for r in self.rows if r.result.spec == self.recommended), None)

    @property
    def baseline_row(self) -> ComparisonRow | None:
        return next((r for r in self.rows if r.result.spec == self.baseline), None)

    def to_dict(self) -> dict[str, Any]:
        rec = self.recommended_row
        return {
            "workload": self.workload,
            "baseline": self.baseline.to_dict(),
            "budget_s": self.budget_s,
            "elapsed_s": self.elapsed_s,
            "verdict": self.verdict,
            "recommended": self.recommended.to_dict() if self.recommended else None,
            "speedup_vs_baseline": rec.to_dict().get("speedup_vs_reference") if rec else None,
            "changes_math": self.recommended.math_changes(self.baseline)
            if self.recommended else [],
            "reasons": [r.to_dict() for r in self.reasons],
            "code": self.code,
            "final": [r.to_dict() for r in self.rows],
            "candidates": [o.to_dict() for o in self.outcomes],
            "notes": self.notes,
            "data_note": self.data_note,
        }


def parse_baseline(text: str | None, workload: str, default_backend: str) -> TrialSpec:
    """``backend=tensorflow,device=gpu:0,jit=on,...`` -> TrialSpec (defaults elsewhere)."""
    fields: dict[str, Any] = {"backend": default_backend}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in ("backend", "device", "precision", "jit", "batch_size",
                                  "pipeline", "threads", "steps_per_execution", "seed"):
            raise SpecError(f"bad --baseline item {item.strip()!r}",
                            fix="use key=value pairs, e.g. backend=tensorflow,device=cpu,jit=auto")
        value = value.strip()
        if key in ("batch_size", "threads", "steps_per_execution", "seed"):
            try:
                fields[key] = int(value)
            except ValueError:
                raise SpecError(f"--baseline {key} must be an integer, got {value!r}") from None
        else:
            fields[key] = value
    return TrialSpec(workload, **fields)


def _setup_estimate(r: TrialResult | None, equivalence_steps: int) -> float:
    """Seconds a trial takes before its first timed block, from a pruning-rung result."""
    if r is None or r.status != "ok":
        return 10.0
    step = r.step_time.median if r.step_time else 0.0
    return ((r.import_seconds or 0) + (r.setup_seconds or 0) + (r.first_step_seconds or 0)
            + equivalence_steps * step * 1.5 + (r.warmup_seconds or 0) + 1.0)


def _device_rate(spec: TrialSpec) -> float | None:
    # The CPU's rate is measured here with numpy; accelerators need `devicebench ops`.
    return cpu_matmul_gflops() if spec.device == "cpu" else None


def advise_workload(
    workload: str,
    snapshot: EnvSnapshot,
    *,
    baseline: TrialSpec,
    budget_s: float = DEFAULT_BUDGET_S,
    allow_batch_change: bool = False,
    workload_batch_size: int | None = None,
    workload_tags: tuple[str, ...] = (),
    workload_flops_per_step: float | None = None,
    equivalence_steps: int = 50,
    measure: Measure | None = None,
    on_result: Callable[[TrialResult], None] | None = None,
    on_event=None,
    clock: Callable[[], float] = time.monotonic,
) -> AdviceResult:
    """Search, compare the finalists with the baseline, explain, and write the code.

    Args:
        workload: a workload reference (built-in name, ``file.py:func``, ``model.keras``).
        snapshot: the machine (host layer is enough).
        baseline: the user's current configuration.
        budget_s: total time for the search and the final comparison (approximate: a
            trial that is already running is not cut short).
        equivalence_steps: steps whose losses the final comparison checks against the
            baseline's (from the same initial weights).
        measure: seam for tests; default runs real worker processes.
    """
    start = clock()
    measure = measure or engine_measure(on_result=on_result, on_event=on_event)
    result = AdviceResult(workload=workload, baseline=baseline, budget_s=budget_s)
    candidates = candidate_space(
        baseline, snapshot, allow_batch_change=allow_batch_change,
        workload_batch_size=workload_batch_size,
        compute_heavy=is_compute_heavy(workload_flops_per_step, workload_tags))
    first, skipped = fit_to_budget(candidates, budget_s)
    if skipped:
        result.notes.append(
            f"budget {budget_s:.0f} s: measured {len(first)} of {len(candidates)} candidates; "
            f"not tried: {', '.join(s.label for s in skipped)} (raise --budget to include them)")
    finalists, outcomes, last = successive_halving(
        baseline, first, measure, rung_options=default_rungs(budget_s),
        deadline=start + budget_s * 0.55, clock=clock)
    result.outcomes = list(outcomes.values())

    # The final: setting up its trials (import, build, compile, equivalence steps,
    # warm-up) costs what the pruning rung measured for them plus the longer equivalence
    # check; the interleaved rounds get what is left of the budget (at least 5 rounds).
    setup_est = sum(_setup_estimate(last.get(s), equivalence_steps)
                    for s in [baseline, *finalists])
    rounds_s = max(5.0, budget_s - (clock() - start) - setup_est)
    final_results = measure([baseline, *finalists], RunOptions(
        min_rounds=5, max_rounds=30, budget_seconds=rounds_s,
        equivalence_steps=equivalence_steps, max_warmup_seconds=max(3.0, rounds_s * 0.1)))
    rows = compare(final_results)
    result.rows = rows
    by_spec = {r.result.spec: r for r in rows}
    base_row = by_spec.get(baseline)
    for spec in finalists:
        r = by_spec[spec].result
        outcomes[spec].rejected = rejection(r, baseline)
        outcomes[spec].final = True
        if r.step_time is not None:
            outcomes[spec].median_step_s = r.step_time.median
    if base_row is None or base_row.result.status != "ok":
        result.verdict = ("the baseline itself failed: "
                          + (base_row.result.error.splitlines()[0] if base_row and
                             base_row.result.error else "no result"))
    else:
        faster = [r for r in rows if r.speedup is not None and r.speedup.ci_low > 1
                  and not outcomes[r.result.spec].rejected]
        faster.sort(key=lambda r: -r.speedup.value)
        if faster:
            best = faster[0]
            result.recommended = best.result.spec
            s = best.speedup
            math = best.result.spec.math_changes(baseline)
            label = (f" (changes the math: {', '.join(math)}; loss equivalence passed, "
                     f"{best.result.loss_detail})" if math else "")
            result.verdict = (f"use {best.result.spec.label}: {s.value:.1f}x faster than "
                              f"{baseline.label} [95% CI {s.ci_low:.1f}-{s.ci_high:.1f}], "
                              f"loss {best.result.loss_verdict}{label}")
            result.code = snippet(best.result.spec, baseline, best.result.batch_size)
        else:
            measured = [f"{r.result.spec.label} {r.speedup.value:.2f}x "
                        f"[{r.speedup.ci_low:.2f}-{r.speedup.ci_high:.2f}]"
                        for r in rows if r.speedup is not None]
            rejected = [f"{o.spec.label} ({o.rejected})" for o in outcomes.values()
                        if o.rejected]
            result.verdict = (f"keep {baseline.label}: no safe candidate was significantly "
                              "faster" + (f"; measured speed-ups: {', '.join(measured)}"
                                          if measured else "")
                              + (f"; rejected: {'; '.join(rejected)}" if rejected else ""))
    # Evidence: the freshest result per spec (final rows override the pruning rungs).
    merged = dict(last)
    merged.update({r.result.spec: r.result for r in rows})
    if base_row is not None:
        result.data_note = base_row.result.data_note
        result.reasons = explain(Evidence(
            baseline=base_row.result, results=merged,
            device_gflops=_device_rate(baseline),
            cpu_flags=tuple(snapshot.host.cpu_flags), workload_tags=workload_tags))
    result.elapsed_s = clock() - start
    return result
