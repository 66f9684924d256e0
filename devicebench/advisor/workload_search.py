"""advise's measuring: search the candidate space within the budget, then compare the
finalists with the baseline, interleaved, until the answer is decided. Returns data
(:class:`SearchOutcome`); :mod:`devicebench.advisor.wording` words it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from devicebench.advisor.budget import SearchBudget
from devicebench.advisor.candidates import candidate_space, headline_partner, is_compute_heavy
from devicebench.advisor.facts import WorkloadFacts
from devicebench.advisor.figures import DeviceFigures
from devicebench.advisor.final import final_comparison
from devicebench.advisor.search import (
    CandidateOutcome,
    StartGroup,
    note_timing,
    rejection,
    search,
    speedups,
)
from devicebench.env.snapshot import EnvSnapshot
from devicebench.trials.replication import Replication
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec
from devicebench.trials.summary import ComparisonRow, compare

DECIDED_CI = 0.25  # the final may stop once the winner's CI is within ±25% of its value
DECISIVE = 2.0  # ... or once even its CI's lower end is a speed-up this large


def decided(baseline: TrialSpec, finalists: list[TrialSpec]
            ) -> Callable[[dict[TrialSpec, TrialResult]], bool]:
    """When the final comparison has answered the question: the fastest finalist's
    speed-up CI lies above 1 and above every other finalist's, and is within ±25% of its
    value (a figure worth quoting) or already at least 2x at its lower end (more rounds
    would narrow the figure, not change the advice: seed-rnn's 20x on JAX varies ±25%
    round to round here and needs 20+ rounds for ±25%); or no finalist's CI reaches 1
    (nothing is faster). Until then, rounds go on (to the budget)."""

    def enough(results: dict[TrialSpec, TrialResult]) -> bool:
        ratios = [q for q, _ in speedups(baseline, results, finalists)]
        if not ratios:
            return True
        best = max(ratios, key=lambda q: q.value)
        if best.ci_high < 1:
            return True
        precise = (best.ci_high - best.ci_low) / 2 <= DECIDED_CI * best.value
        return (best.ci_low > 1 and (precise or best.ci_low >= DECISIVE)
                and all(q.ci_high < best.ci_low for q in ratios if q is not best))

    return enough


@dataclass(frozen=True)
class SearchOutcome:
    """What the search and the final comparison measured, as data (no words yet).

    Attributes:
        baseline, partner: the user's configuration and its accelerator/CPU partner
            (the headline's other side; None when there is none).
        finalists: the candidates measured in the final against the baseline.
        outcomes: what happened to each candidate (rejections of the finalists set).
        rows: the final's comparison over the planned ``epochs``.
        results: every trial's result, by spec.
        stop_reason: why the search stopped.
        replication: the processes per configuration the figures rest on.
        started_at: the budget clock's reading when the search began.
        budget: the search's budget (its phases, what it cut), read once the advice
            is worded (:meth:`SearchBudget.report`, :meth:`SearchBudget.overrun_notes`).
    """

    baseline: TrialSpec
    partner: TrialSpec | None
    finalists: list[TrialSpec]
    outcomes: dict[TrialSpec, CandidateOutcome]
    rows: list[ComparisonRow]
    results: dict[TrialSpec, TrialResult]
    stop_reason: str
    replication: Replication | None
    epochs: int
    started_at: float
    budget: SearchBudget

    @property
    def baseline_row(self) -> ComparisonRow | None:
        return next((r for r in self.rows if r.result.spec == self.baseline), None)


def search_workload(
    snapshot: EnvSnapshot,
    *,
    baseline: TrialSpec,
    budget_s: float,
    equivalence_steps: int,
    facts: WorkloadFacts,
    epochs: int,
    allow_batch_change: bool = False,
    device_figures: dict[str, DeviceFigures] | None = None,
    start_group: StartGroup,
    clock: Callable[[], float] = time.monotonic,
    replicate: bool = True,
) -> SearchOutcome:
    """Search the candidate space within ``budget_s`` (one group of workers, pruned by
    successive halving), then measure the finalists interleaved with the baseline until
    the answer is decided or the budget ends: the figures, not yet the words.
    ``replicate=False``: the final measures each configuration in one worker process
    (what replication costs; see :func:`devicebench.advisor.final.final_comparison`)."""
    budget = SearchBudget(budget_s, clock=clock)
    candidates = candidate_space(
        baseline, snapshot, allow_batch_change=allow_batch_change,
        workload_batch_size=facts.batch_size,
        compute_heavy=is_compute_heavy(facts.flops_per_step, facts.tags))
    partner = headline_partner(baseline, snapshot)
    if partner is not None and partner not in candidates:
        candidates.insert(0, partner)
    # One group of workers for the whole search: set up once, pruned by finishing the
    # slower ones, the survivors measured on into the final comparison.
    group = start_group(baseline, budget.group_options(equivalence_steps),
                        budget.equivalence_seconds)
    try:
        found = search(baseline, candidates, group, budget,
                       protected=[partner] if partner else [], figures=device_figures or {},
                       flops_per_step=facts.flops_per_step)
        finalists, outcomes = found.finalists, found.outcomes
        # The final: more interleaved rounds for the baseline and the finalists (whole
        # epochs, as the user's fit runs them, when all of theirs are short), until
        # the answer is decided or the budget ends; the least first, then the baseline,
        # the headline's partner and the winner so far in two or more processes, as
        # the budget holds them (advisor.final).
        winner = min((s for s in finalists if s != partner),
                     key=lambda s: outcomes[s].median_step_s or float("inf"), default=None)
        replication = final_comparison(
            group, budget, [baseline, *([partner] if partner else []),
                            *([winner] if winner else [])], decided(baseline, finalists),
            replicate=replicate)
        budget.finished(group)
    finally:
        group.close()  # an interrupted search leaves no worker behind
    rows = compare([group.results[s] for s in [baseline, *finalists]], epochs)
    by_spec = {r.result.spec: r for r in rows}
    for spec in finalists:
        r = by_spec[spec].result
        outcomes[spec].rejected = rejection(r, baseline)
        outcomes[spec].final = True
        note_timing(outcomes[spec], r, group.results.get(baseline))
    return SearchOutcome(baseline, partner, list(finalists), outcomes, rows,
                         dict(group.results), found.stop_reason, replication, epochs,
                         budget.start, budget)
