"""The least a comparison costs on this machine, from what earlier runs measured here, and
the refusal of a budget below it (issue 27, item 15: ``advise --budget 10`` spent 20 s).

``advise`` never cuts the least a comparison needs: the baseline and its first
comparison set up (imports, builds, compiles), then their warm-up and three interleaved
rounds (the least a CI needs). Everything past that is planned within the budget
(:mod:`devicebench.advisor.budget`). So a budget below the least cannot be kept, and the
careful answer is to say so before anything runs, with the measured figure and the
budget that holds it — not to spend twice the budget, and not to stop at the budget with
no answer. The figure is a floor, taken from the newest stored trials of the same
configurations on this machine (same fingerprint): the first run on a machine, with
nothing stored, cannot know it, runs, and says afterwards what the least cost.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from devicebench.advisor.budget import LEAST_ROUNDS
from devicebench.advisor.candidates import candidate_space, headline_partner, is_compute_heavy
from devicebench.advisor.facts import WorkloadFacts
from devicebench.env.snapshot import EnvSnapshot
from devicebench.errors import InputError
from devicebench.trials.blocks import TARGET_BLOCK_SECONDS
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec

SLACK = 1.1  # a budget is kept when the search ends within it and 10%


@dataclass(frozen=True)
class LeastCost:
    """The least a comparison of ``specs`` costs here (a floor), by part, and the runs
    of the stored trials it comes from."""

    specs: tuple[TrialSpec, ...]
    imports_s: float
    setups_s: float
    warmup_s: float
    rounds_s: float
    runs: tuple[int, ...]

    @property
    def seconds(self) -> float:
        return self.imports_s + self.setups_s + self.warmup_s + self.rounds_s

    @property
    def budget_that_fits(self) -> int:
        """A budget (whole tens of seconds) that holds the least with room to search."""
        return int(10 * math.ceil(1.25 * self.seconds / 10))


def first_batch(baseline: TrialSpec, snapshot: EnvSnapshot, *,
                allow_batch_change: bool = False, facts: WorkloadFacts | None = None
                ) -> list[TrialSpec]:
    """What advise sets up first (never cut): the baseline and the headline's partner,
    else the first candidate — as
    :func:`devicebench.advisor.workload_search.search_workload` orders them."""
    facts = facts or WorkloadFacts()
    candidates = candidate_space(
        baseline, snapshot, allow_batch_change=allow_batch_change,
        workload_batch_size=facts.batch_size,
        compute_heavy=is_compute_heavy(facts.flops_per_step, facts.tags))
    partner = headline_partner(baseline, snapshot)
    return [baseline, *([partner] if partner is not None else candidates[:1])]


def least_cost(specs: list[TrialSpec], stored: dict[TrialSpec, TrialResult],
               equivalence_steps: int) -> LeastCost | None:
    """The floor of what setting ``specs`` up and measuring them for LEAST_ROUNDS rounds
    costs, from their ``stored`` trials (those missing count nothing: still a floor):
    the slowest import (workers import together), each set-up (build, compile, the first
    step, ``equivalence_steps`` steps), each warm-up, and the rounds at blocks no longer
    than TARGET_BLOCK_SECONDS (the final may cut shorter blocks than were stored)."""
    done = [stored[s] for s in specs if s in stored and stored[s].status == "ok"]
    if not done:
        return None

    def setup(r: TrialResult) -> float:
        steps = min(r.setup_steps, equivalence_steps) * (r.setup_step_seconds or 0.0)
        return (r.setup_seconds or 0.0) + (r.first_step_seconds or 0.0) + steps

    def block(r: TrialResult) -> float:
        return min(statistics.median(r.block_seconds), TARGET_BLOCK_SECONDS) \
            if r.block_seconds else 0.0

    return LeastCost(
        specs=tuple(r.spec for r in done),
        imports_s=max(r.import_seconds or 0.0 for r in done),
        setups_s=sum(setup(r) for r in done),
        warmup_s=sum(r.warmup_seconds or 0.0 for r in done),
        rounds_s=LEAST_ROUNDS * sum(block(r) for r in done),
        runs=tuple(sorted({r.run_id for r in done if r.run_id is not None})))


def stored_trials(db: str | Path | None, snapshot: EnvSnapshot, specs: list[TrialSpec]
                  ) -> dict[TrialSpec, TrialResult]:
    """The newest ``ok`` trial of each of ``specs`` stored for this machine in ``db``
    (none when there is no such file: nothing is created)."""
    from devicebench.store import ResultStore
    from devicebench.store.db import default_db_path
    from devicebench.store.fingerprint import machine_fingerprint

    path = Path(db) if db is not None else default_db_path()
    if str(path) == ":memory:" or not path.is_file():
        return {}
    fingerprint, _ = machine_fingerprint(snapshot)
    with ResultStore.open(path, read_only=True) as store:
        row = store.connection.execute("SELECT id FROM machines WHERE fingerprint = ?",
                                       (fingerprint,)).fetchone()
        if row is None:
            return {}
        found = {s: store.latest_result(int(row[0]), s.key) for s in specs}
    return {s: r for s, r in found.items() if r is not None}


def check_budget_floor(budget: float, least: LeastCost | None) -> None:
    """Refuse ``budget`` when even the floor of the least comparison measured here is
    over it and 10%.

    Raises:
        InputError: one line: the measured floor by part, why it cannot be cut, and the
            budget that holds it.
    """
    if least is None or least.seconds <= SLACK * budget:
        return
    labels = " and ".join(s.label for s in least.specs)
    runs = ", ".join(f"#{r}" for r in least.runs) or "earlier runs"
    raise InputError(
        f"--budget {budget:g} s is below the least a comparison costs on this machine: "
        f"at least {least.seconds:.0f} s for {labels} (imports {least.imports_s:.0f} s, "
        f"set-ups {least.setups_s:.0f} s, warm-up {least.warmup_s:.0f} s, three "
        f"interleaved rounds {least.rounds_s:.0f} s; measured here in run {runs})",
        why="advise always sets up the baseline and its first comparison and measures "
            "three rounds (the least a CI needs), so it would take longer than asked",
        fix=f"--budget {least.budget_that_fits} (or more)")


def refuse_short_budget(db: str | Path | None, snapshot: EnvSnapshot, baseline: TrialSpec,
                        budget: float, equivalence_steps: int, facts: WorkloadFacts,
                        allow_batch_change: bool = False) -> None:
    """:func:`check_budget_floor` on the first batch advise would set up for
    ``baseline`` (``facts``: :func:`devicebench.advisor.facts.workload_facts`), from this
    machine's stored trials in ``db``.

    Raises:
        InputError: the budget is below the measured floor.
    """
    specs = first_batch(baseline, snapshot, allow_batch_change=allow_batch_change,
                        facts=facts)
    check_budget_floor(budget, least_cost(specs, stored_trials(db, snapshot, specs),
                                          equivalence_steps))
