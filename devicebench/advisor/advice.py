"""``advise``: measure candidate configurations of a workload, pick the fastest safe one,
explain why, and give the code that applies it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from devicebench.advisor.explain import Reason
from devicebench.advisor.facts import WorkloadFacts
from devicebench.advisor.figures import DeviceFigures
from devicebench.advisor.search import CandidateOutcome, StartGroup, engine_group
from devicebench.advisor.workload_search import (  # noqa: F401  (decided: re-exported)
    SearchOutcome,
    decided,
    search_workload,
)
from devicebench.env.snapshot import EnvSnapshot
from devicebench.errors import SpecError
from devicebench.measure.peak import cpu_matmul_gflops
from devicebench.schema import envelope
from devicebench.trials.headline import Headline, headline
from devicebench.trials.plan import installed_backends, machine_devices
from devicebench.trials.replication import Replication
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec
from devicebench.trials.summary import ComparisonRow

DEFAULT_EPOCHS = 10  # the training a one-time cost is weighed against, when the
# workload does not say how many epochs it trains


@dataclass(frozen=True)
class AdviceResult:
    """Everything ``advise`` found, built once at the end (a change is a
    ``dataclasses.replace``); the CLI renders it, ``to_dict`` is the JSON."""

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
    budget: dict[str, Any] = field(default_factory=dict)  # SearchBudget.report()

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
            "budget": self.budget,
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
    budget_s: float,
    equivalence_steps: int,
    facts: WorkloadFacts | None = None,
    epochs: int | None = None,
    allow_batch_change: bool = False,
    figures: DeviceFigures | None = None,
    device_figures: dict[str, DeviceFigures] | None = None,
    baseline_reason: str = "",
    start_group: StartGroup | None = None,
    on_result: Callable[[TrialResult], None] | None = None,
    on_event=None,
    clock: Callable[[], float] = time.monotonic,
    cpu_rate: Callable[[], float] | None = cpu_matmul_gflops,
    replicate: bool = True,
) -> AdviceResult:
    """Answer the accelerator question, search, compare the finalists with the baseline
    (:func:`search_workload`), then word the verdict, the reasons and the code
    (:func:`devicebench.advisor.wording.word_advice`).

    Args:
        workload: a workload reference (built-in name, ``file.py:func``, ``model.keras``).
        snapshot: the machine (host layer is enough).
        baseline: the user's current configuration.
        budget_s: total time for the search and the final comparison (a trial that is
            already running is not cut short; the search plans on measured costs).
        equivalence_steps: steps whose losses are checked against the baseline's (from
            the same initial weights); a slow candidate runs fewer (its time is capped,
            at least 10 run) and its verdict says how many were compared.
        facts: what is known of the workload before measuring it
            (:func:`devicebench.advisor.facts.workload_facts`).
        epochs: the training the user plans (default: the workload's own, else 10): a
            candidate whose extra compilation or warm-up does not pay back within it is
            not the verdict.
        figures: the baseline device's figures from a stored ``devicebench ops`` run
            (matmul rate, per-op dispatch cost), for the reasons; ``device_figures``:
            every device's, for the accelerator reasons and the search's bounds.
        start_group: seam: real worker processes by default, a replayed profile in
            :func:`devicebench.profiles.replay.replay_advise`.
        clock: the budget's clock (a replay's virtual clock).
        cpu_rate: measures the CPU's matmul rate when no figures say it (None: never).
        replicate: measure what the verdict rests on in two or more worker processes
            (the default); False: one each, to measure what replication costs.

    Raises:
        devicebench.errors.DevicebenchError: bad input.

    Example:
        >>> advice = advise_workload("seed-rnn", snapshot,  # doctest: +SKIP
        ...                          baseline=TrialSpec("seed-rnn"), budget_s=120)
        >>> advice.headline.text, advice.verdict  # doctest: +SKIP
    """
    from devicebench.advisor.wording import word_advice

    facts = facts or WorkloadFacts()
    epochs = epochs or facts.epochs or DEFAULT_EPOCHS
    device_figures = dict(device_figures or {})
    if figures is not None:
        device_figures.setdefault(figures.device, figures)
    figures = figures or device_figures.get(baseline.device)
    found = search_workload(
        snapshot, baseline=baseline, budget_s=budget_s, equivalence_steps=equivalence_steps,
        facts=facts, epochs=epochs, allow_batch_change=allow_batch_change,
        device_figures=device_figures, clock=clock, replicate=replicate,
        start_group=start_group or engine_group(on_result=on_result, on_event=on_event,
                                                clock=clock))
    words = word_advice(found, snapshot, facts=facts, figures=figures,
                        device_figures=device_figures, cpu_rate=cpu_rate)
    elapsed = clock() - found.started_at
    said = {*words.notes, f"budget was the limit: {found.stop_reason}"}
    budget_notes = [c for c in found.budget.cuts if c not in said]  # a rung, a set-up cut
    budget_notes += found.budget.overrun_notes()
    return AdviceResult(
        workload=workload, baseline=baseline, budget_s=budget_s, elapsed_s=elapsed,
        rows=found.rows, outcomes=list(found.outcomes.values()),
        recommended=words.recommended, reasons=words.reasons, code=words.code,
        verdict=words.verdict, notes=[*words.notes, *budget_notes], data_note=words.data_note,
        headline=headline(baseline, found.partner, found.results), epochs=epochs,
        baseline_reason=baseline_reason, stop_reason=found.stop_reason,
        replication=found.replication, budget=found.budget.report())
