"""``advise``: measure candidate configurations of a workload, pick the fastest safe one,
explain why, and give the code that applies it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from devicebench.advisor.budget import SearchBudget
from devicebench.advisor.candidates import (
    candidate_space,
    headline_partner,
    is_compute_heavy,
)
from devicebench.advisor.explain import Evidence, Reason, explain
from devicebench.advisor.figures import DeviceFigures
from devicebench.advisor.search import (
    CandidateOutcome,
    StartGroup,
    engine_group,
    note_timing,
    rejection,
    search,
)
from devicebench.advisor.snippet import snippet
from devicebench.advisor.verdict import choose
from devicebench.env.snapshot import EnvSnapshot
from devicebench.errors import SpecError
from devicebench.measure.peak import cpu_matmul_gflops
from devicebench.measure.stats import paired_ratio
from devicebench.schema import envelope
from devicebench.trials.headline import Headline, headline
from devicebench.trials.plan import installed_backends, machine_devices
from devicebench.trials.replication import Replication, replicate_keys
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec
from devicebench.trials.summary import ComparisonRow, compare

DEFAULT_BUDGET_S = 120.0
DEFAULT_EPOCHS = 10  # the training a one-time cost is weighed against, when the
# workload does not say how many epochs it trains
DECIDED_CI = 0.25  # the final may stop once the winner's CI is within ±25% of its value
DECISIVE = 2.0  # ... or once even its CI's lower end is a speed-up this large


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
    headline: Headline | None = None
    epochs: int = DEFAULT_EPOCHS
    baseline_reason: str = ""
    stop_reason: str = ""
    replication: Replication | None = None  # processes per configuration the verdict rests on
    # Set by the live job (jobs.advise): stability findings and the machine's load.
    stability: list[Any] = field(default_factory=list)
    load: dict[str, Any] = field(default_factory=dict)

    @property
    def recommended_row(self) -> ComparisonRow | None:
        return next((r for r in self.rows if r.result.spec == self.recommended), None)

    @property
    def baseline_row(self) -> ComparisonRow | None:
        return next((r for r in self.rows if r.result.spec == self.baseline), None)

    def to_dict(self) -> dict[str, Any]:
        rec = self.recommended_row
        return envelope("advise", {
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
            "headline": self.headline.to_dict() if self.headline else None,
            "epochs": self.epochs,
            "baseline_reason": self.baseline_reason,
            "search_stop": self.stop_reason,
            "replication": self.replication.to_dict() if self.replication else None,
            "stability": [f.to_dict() for f in self.stability],
            "load": self.load,
        })


def parse_baseline(text: str | None, workload: str, default_backend: str) -> TrialSpec:
    """``backend=tensorflow,device=gpu:0,jit=on,...`` -> TrialSpec (defaults elsewhere)."""
    fields: dict[str, Any] = {"backend": default_backend}
    given: set[str] = set()
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
        if key in given:  # `backend=jax,backend=tensorflow`: which one is meant?
            raise SpecError(f"--baseline gives {key} twice ({text!r})",
                            why="a baseline is one configuration",
                            fix=f"keep one {key}=..., e.g. backend=tensorflow,device=cpu")
        given.add(key)
        if key in ("batch_size", "threads", "steps_per_execution", "seed"):
            try:
                fields[key] = int(value)
            except ValueError:
                raise SpecError(f"--baseline {key} must be an integer, got {value!r}") from None
        else:
            fields[key] = value
    return TrialSpec(workload, **fields)


def decided(baseline: TrialSpec, finalists: list[TrialSpec]
            ) -> Callable[[dict[TrialSpec, TrialResult]], bool]:
    """When the final comparison has answered the question: the fastest finalist's
    speed-up CI lies above 1 and above every other finalist's, and is within ±25% of its
    value (a figure worth quoting) or already at least 2x at its lower end (more rounds
    would narrow the figure, not change the advice: seed-rnn's 20x on JAX varies ±25%
    round to round here and needs 20+ rounds for ±25%); or no finalist's CI reaches 1
    (nothing is faster). Until then, rounds go on (to the budget)."""

    def enough(results: dict[TrialSpec, TrialResult]) -> bool:
        base = results.get(baseline)
        if base is None or base.status != "ok":
            return True
        ratios = [q for s in finalists if (r := results.get(s)) is not None
                  and r.status == "ok" and r.block_seconds
                  and (q := paired_ratio(base.round_step_times, r.round_step_times))]
        if not ratios:
            return True
        best = max(ratios, key=lambda q: q.value)
        if best.ci_high < 1:
            return True
        precise = (best.ci_high - best.ci_low) / 2 <= DECIDED_CI * best.value
        return (best.ci_low > 1 and (precise or best.ci_low >= DECISIVE)
                and all(q.ci_high < best.ci_low for q in ratios if q is not best))

    return enough


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


def default_baseline(snapshot: EnvSnapshot, workload: str) -> tuple[TrialSpec, str]:
    """The configuration a user of this machine most likely trains with, and why: the
    Keras backend they selected (KERAS_BACKEND, else keras.json, else Keras' default,
    tensorflow) when it is installed, else the first installed one; on the accelerator
    that backend would use, else the CPU."""
    have = installed_backends(snapshot)
    chosen = snapshot.keras_backend
    where = ("KERAS_BACKEND" if snapshot.env_vars.get("KERAS_BACKEND") else
             "~/.keras/keras.json" if snapshot.keras_config_backend else "Keras' default")
    if chosen in have:
        backend, why = chosen, f"the Keras backend {where} selects ({chosen})"
    else:
        backend = (have or ["tensorflow"])[0]
        why = (f"{where} selects {chosen}, which is not installed here, so the first "
               f"installed backend ({backend})")
    devices = machine_devices(snapshot)
    if backend == "torch" and "mps" in devices:
        device = "mps"
    else:
        device = "gpu:0" if "gpu:0" in devices else "cpu"
    where_dev = "on the CPU (no accelerator here)" if device == "cpu" else \
        f"on {device}, where it trains by default"
    return TrialSpec(workload, backend=backend, device=device), f"{why}, {where_dev}"


def advise_workload(
    workload: str,
    snapshot: EnvSnapshot,
    *,
    baseline: TrialSpec,
    budget_s: float = DEFAULT_BUDGET_S,
    epochs: int | None = None,
    allow_batch_change: bool = False,
    workload_batch_size: int | None = None,
    workload_tags: tuple[str, ...] = (),
    workload_flops_per_step: float | None = None,
    workload_epochs: int | None = None,
    workload_timesteps: int | None = None,
    equivalence_steps: int = 50,
    figures: DeviceFigures | None = None,
    device_figures: dict[str, DeviceFigures] | None = None,
    baseline_reason: str = "",
    start_group: StartGroup | None = None,
    on_result: Callable[[TrialResult], None] | None = None,
    on_event=None,
    clock: Callable[[], float] = time.monotonic,
    cpu_rate: Callable[[], float] | None = cpu_matmul_gflops,
) -> AdviceResult:
    """Answer the accelerator question, search, compare the finalists with the baseline,
    explain, and write the code.

    Args:
        workload: a workload reference (built-in name, ``file.py:func``, ``model.keras``).
        snapshot: the machine (host layer is enough).
        baseline: the user's current configuration.
        budget_s: total time for the search and the final comparison (a trial that is
            already running is not cut short; the search plans on measured costs).
        epochs: the training the user plans (default: the workload's own, else 10): a
            candidate whose extra compilation or warm-up does not pay back within it is
            not the verdict.
        equivalence_steps: steps whose losses are checked against the baseline's (from
            the same initial weights); a slow candidate runs fewer (its time is capped,
            at least 10 run) and its verdict says how many were compared.
        figures: the baseline device's figures from a stored ``devicebench ops`` run
            (matmul rate, per-op dispatch cost), for the reasons; ``device_figures``:
            every device's, for the accelerator reasons and the search's bounds.
        start_group: seam: real worker processes by default, a replayed profile in
            :func:`devicebench.profiles.replay.replay_advise`.
        clock: the budget's clock (a replay's virtual clock).
        cpu_rate: measures the CPU's matmul rate when no figures say it (None: never).

    Raises:
        devicebench.errors.DevicebenchError: bad input.

    Example:
        >>> advice = advise_workload("seed-rnn", snapshot, baseline=TrialSpec("seed-rnn"))
        >>> advice.headline.text, advice.verdict
    """
    budget = SearchBudget(budget_s, clock=clock)
    epochs = epochs or workload_epochs or DEFAULT_EPOCHS
    device_figures = dict(device_figures or {})
    if figures is not None:
        device_figures.setdefault(figures.device, figures)
    figures = figures or device_figures.get(baseline.device)
    start_group = start_group or engine_group(on_result=on_result, on_event=on_event,
                                              clock=clock)
    result = AdviceResult(workload=workload, baseline=baseline, budget_s=budget_s,
                          epochs=epochs, baseline_reason=baseline_reason)
    candidates = candidate_space(
        baseline, snapshot, allow_batch_change=allow_batch_change,
        workload_batch_size=workload_batch_size,
        compute_heavy=is_compute_heavy(workload_flops_per_step, workload_tags))
    partner = headline_partner(baseline, snapshot)
    if partner is not None and partner not in candidates:
        candidates.insert(0, partner)
    # One group of workers for the whole search: set up once, pruned by finishing the
    # slower ones, the survivors measured on into the final comparison.
    group = start_group(baseline, budget.group_options(equivalence_steps),
                        budget.equivalence_seconds)
    try:
        found = search(baseline, candidates, group, budget,
                       protected=[partner] if partner else [], figures=device_figures,
                       flops_per_step=workload_flops_per_step)
        finalists, outcomes = found.finalists, found.outcomes
        result.outcomes = list(outcomes.values())
        result.stop_reason = found.stop_reason
        # The final: more interleaved rounds for the baseline and the finalists (whole
        # epochs, as the user's fit runs them, when all of theirs are short), until
        # the answer is decided or the budget ends; at least 6 rounds in all. The
        # baseline, the headline's partner and the winner so far are measured in two or
        # more processes (more where they disagree), as the budget holds them.
        winner = min((s for s in finalists if s != partner),
                     key=lambda s: outcomes[s].median_step_s or float("inf"), default=None)

        def final_rounds() -> None:
            live = [group.results[s] for s in group.live]
            n = {s: group.processes(s) for s in group.live}
            group.measure(budget.final_options(live, n, group.rounds_done),
                          enough=decided(baseline, finalists))

        result.replication = replicate_keys(
            group, [baseline, *([partner] if partner else []), *([winner] if winner else [])],
            left=budget.left, measure=final_rounds,
            cost=lambda n, new: budget.replication_cost(
                [group.results[s] for s in group.live], n, new))
        result.notes.extend(result.replication.notes)
        group.finish()
    finally:
        group.close()  # an interrupted search leaves no worker behind
    final_results = [group.results[s] for s in [baseline, *finalists]]
    rows = compare(final_results, epochs)  # a fit of the planned epochs
    result.rows = rows
    by_spec = {r.result.spec: r for r in rows}
    base_row = by_spec.get(baseline)
    for spec in finalists:
        r = by_spec[spec].result
        outcomes[spec].rejected = rejection(r, baseline)
        outcomes[spec].final = True
        note_timing(outcomes[spec], r, group.results.get(baseline))
    if found.stop_reason and not found.stop_reason.startswith("all "):
        result.notes.append(f"search: {found.stop_reason}")
    result.headline = headline(baseline, partner, group.results)
    if base_row is None or base_row.result.status != "ok":
        result.verdict = ("the baseline itself failed: "
                          + (base_row.result.error.splitlines()[0] if base_row and
                             base_row.result.error else "no result"))
    else:
        best, passed_over = choose(rows, baseline, outcomes, epochs)
        result.notes.extend(passed_over)
        if best is not None:
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
                        if o.rejected and not o.rejected.startswith("skipped")]
            result.verdict = (f"keep {baseline.label}: no safe candidate was significantly "
                              "faster over the planned training" +
                              (f"; measured speed-ups: {', '.join(measured)}"
                               if measured else "")
                              + (f"; rejected: {'; '.join(rejected)}" if rejected else ""))
    if base_row is not None:
        result.data_note = base_row.result.data_note
        rate, rate_source = _device_rate(baseline, figures, cpu_rate)
        result.reasons = explain(Evidence(
            baseline=base_row.result, results=group.results, device_gflops=rate,
            device_rate_source=rate_source, figures=figures,
            cpu_flags=tuple(snapshot.host.cpu_flags), workload_tags=workload_tags,
            device_figures=device_figures, timesteps=workload_timesteps,
            gpu_compute_capability=_compute_capability(snapshot), epochs=epochs))
        command = (f"`devicebench ops --backend {baseline.backend} --device "
                   f"{baseline.device}`")
        if figures is None:
            result.notes.append(
                f"no `devicebench ops` figures for {baseline.device} on this machine: run "
                f"{command} once, and advise also weighs ops per step against the "
                "measured per-op dispatch cost")
        elif baseline.backend == "tensorflow" and "tensorflow" not in figures.per_op_seconds:
            result.notes.append(
                f"{figures.source} did not resolve TensorFlow's per-op cost inside a graph "
                f"(in-graph mode; lost in the noise or not measured): run {command} on a "
                "quiet machine for the dispatch reason")
    result.elapsed_s = clock() - budget.start
    if result.elapsed_s > 1.1 * budget_s:
        result.notes.append(
            f"took {result.elapsed_s:.0f} s of a {budget_s:.0f} s budget: setting up the "
            "baseline and its first comparison and three interleaved rounds (the least a "
            "CI needs) cost more than the budget here; raise --budget")
    return result


def _compute_capability(snapshot: EnvSnapshot) -> str:
    smi = snapshot.nvidia_smi
    return smi.gpus[0].compute_capability if smi is not None and smi.gpus else ""
