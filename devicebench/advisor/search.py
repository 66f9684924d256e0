"""Find the fastest safe configuration: batches set up by promise, screening, successive
halving, an interleaved final.

Candidates are set up in batches beside the baseline — first the headline's
accelerator-vs-CPU partner (to learn what a trial costs), then, most promising first,
those that could still win and whose measured costs fit the budget; one whose set-up
steps were already SCREEN_FACTOR times slower than the fastest trial's is dropped untimed
(screened); each rung gives the live ones two more interleaved rounds and keeps the
faster half; the finalists' workers go on into the final comparison (more rounds) until
the answer is decided or the budget ends.
Unsafe candidates (crashed, NaN, or a different loss) are rejected with the reason as
soon as it is known.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from devicebench.advisor.budget import (
    CostModel,
    SearchBudget,
    fastest_safe_step,
    step_lower_bound,
)
from devicebench.advisor.equivalence import loss_check
from devicebench.advisor.figures import DeviceFigures
from devicebench.measure.stats import Ratio, paired_ratio
from devicebench.trials.engine import RunOptions, TrialGroup
from devicebench.trials.result import TrialResult, fastest_setup_step
from devicebench.trials.spec import TrialSpec

# A candidate whose set-up steps took this many times the fastest trial's is not timed.
# Those steps (synced train_on_batch calls; short fits on JAX, whose train_on_batch has
# its own overhead) are timed one trial after another, not interleaved;
# bench/advisor_regret.py prints them beside the interleaved figures.
SCREEN_FACTOR = 4.0


@dataclass
class CandidateOutcome:
    """What happened to one candidate during the search."""

    spec: TrialSpec
    rung: int  # the last rung it was measured in
    median_step_s: float | None = None
    # What median_step_s comes from: blocks of K steps | whole epochs | the set-up's steps
    blocks_cut: str = ""  # steps | epochs | setup
    speedup: float | None = None  # vs the baseline in the same rounds (>1: faster)
    rejected: str = ""  # why it can never be recommended ("" = safe so far)
    pruned: bool = False  # slower than the survivors of its rung
    screened: bool = False  # pruned before any timed round, on its set-up steps
    final: bool = False  # measured in the final, interleaved comparison
    untried: str = ""  # why it was never set up ("" = it was)

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec.to_dict(), "label": self.spec.label, "rung": self.rung,
                "median_step_s": self.median_step_s, "blocks_cut": self.blocks_cut,
                "speedup_vs_baseline": self.speedup, "rejected": self.rejected,
                "pruned": self.pruned, "screened": self.screened, "final": self.final,
                "untried": self.untried}


def rejection(result: TrialResult, baseline: TrialSpec) -> str:
    """Why a measured candidate is unsafe to recommend, or ""."""
    if result.status != "ok":
        first = result.error.strip().splitlines()[0] if result.error.strip() else ""
        return f"{result.status}: {first}".rstrip(": ")
    if result.loss_verdict in ("nan", "differs"):
        return f"loss {result.loss_verdict} from the baseline's: {result.loss_detail}"
    if result.spec.math_changes(baseline) and result.loss_verdict not in ("same", "reference"):
        return (f"changes the math ({', '.join(result.spec.math_changes(baseline))}) and the "
                f"loss equivalence could not confirm it ({result.loss_verdict})")
    return ""


def speedups(baseline: TrialSpec, results: dict[TrialSpec, TrialResult],
             specs: list[TrialSpec]) -> list[tuple[Ratio, TrialSpec]]:
    """Each of ``specs`` measured ``ok`` with timed blocks, with its speed-up over the
    baseline in the rounds both were measured in ([] when the baseline is not ok)."""
    base = results.get(baseline)
    if base is None or base.status != "ok":
        return []
    return [(q, s) for s in specs if (r := results.get(s)) is not None and r.status == "ok"
            and r.block_seconds
            and (q := paired_ratio(base.round_step_times, r.round_step_times))]


class Group(Protocol):
    """Live trials measured together (:class:`devicebench.trials.engine.TrialGroup`)."""

    results: dict[TrialSpec, TrialResult]

    @property
    def live(self) -> list[TrialSpec]: ...
    @property
    def rounds_done(self) -> int: ...
    def add(self, specs: list[TrialSpec], start_by: dict[TrialSpec, float] | None = None,
            end_by: dict[TrialSpec, float] | None = None) -> None: ...
    def measure(self, options: RunOptions,
                enough: Callable[[dict[TrialSpec, TrialResult]], bool] | None = None
                ) -> int: ...
    def finish(self, specs: list[TrialSpec] | None = None) -> None: ...
    def close(self) -> None: ...
    def processes(self, spec: TrialSpec) -> int: ...
    def replicate(self, counts: dict[TrialSpec, int]) -> dict[TrialSpec, int]: ...


StartGroup = Callable[[TrialSpec, RunOptions, float | None], Group]


def note_timing(out: CandidateOutcome, r: TrialResult, base: TrialResult | None) -> None:
    """Record a candidate's latest median step time and its speed-up over the baseline
    in the rounds both were measured in."""
    out.median_step_s = r.step_time.median if r.step_time else None
    out.blocks_cut = r.blocks_cut
    ratio = (paired_ratio(base.round_step_times, r.round_step_times)
             if base is not None and r.block_seconds and base.block_seconds else None)
    out.speedup = ratio.value if ratio else None


def screen(baseline: TrialSpec, candidates: list[TrialSpec],
           results: dict[TrialSpec, TrialResult], outcomes: dict[TrialSpec, CandidateOutcome],
           factor: float = SCREEN_FACTOR) -> list[TrialSpec]:
    """The candidates whose set-up steps took at least ``factor`` times the fastest
    trial's (the baseline included): marked screened, with their set-up figures (the
    only ones they will have); the caller finishes them."""
    fastest = fastest_setup_step(results[s] for s in [baseline, *candidates] if s in results)
    if fastest is None:
        return []
    base = results[baseline].setup_step_seconds if baseline in results else None
    out = []
    for spec in candidates:
        step = results[spec].setup_step_seconds if spec in results else None
        if step and step >= factor * fastest:
            o = outcomes[spec]
            o.pruned = o.screened = True
            o.median_step_s, o.blocks_cut = step, "setup"
            o.speedup = base / step if base else None
            out.append(spec)
    return out


def _defaults(spec: TrialSpec) -> TrialSpec:
    """``spec``'s backend and device with every knob at its default."""
    return spec.with_(jit="auto", precision="float32", pipeline="arrays", threads=None,
                      steps_per_execution=1)


@dataclass
class SearchResult:
    """What the search decided: the finalists (still live in the group: the protected
    first, then the fastest), every candidate's outcome, and why it stopped adding
    candidates."""

    finalists: list[TrialSpec]
    outcomes: dict[TrialSpec, CandidateOutcome]
    stop_reason: str = ""


def search(
    baseline: TrialSpec,
    candidates: list[TrialSpec],
    group: Group,
    budget: SearchBudget,
    *,
    protected: list[TrialSpec] | None = None,
    figures: dict[str, DeviceFigures] | None = None,
    flops_per_step: float | None = None,
    rung_options: list[RunOptions] | None = None,
    eta: int = 2,
    keep_final: int = 2,
) -> SearchResult:
    """Set candidates up in batches, most promising first, while the budget allows and
    one of them could still win; then prune them rung by rung.

    The first batch (the baseline and ``protected``, else the first candidate) measures
    what a trial costs. After each batch the unsafe are dropped and the far slower
    screened out (set-up steps SCREEN_FACTOR times the fastest). A knob flip waits until
    its backend and device were measured at their defaults. The next batch takes, in
    order of their lower
    bound on step time (:func:`devicebench.advisor.budget.step_lower_bound`), the
    untried candidates whose bound is below the fastest safe step measured — the ones
    that could still win — as many as the measured costs fit before the set-up deadline.
    The search stops adding when no untried candidate could win (and says so) or none
    fits the budget (and says which). ``protected`` candidates are never screened or
    pruned: they go to the final whatever their speed (the headline compares them).
    Each rung gives the live contenders more interleaved rounds and finishes the slower
    half; survivors keep their workers into the final comparison.
    """
    protected = [p for p in (protected or []) if p in candidates]
    figures = figures or {}
    outcomes = {c: CandidateOutcome(c, rung=0) for c in candidates}
    unsafe: set[TrialSpec] = set()
    alive: list[TrialSpec] = []
    tried: list[TrialSpec] = []
    costs = CostModel(group.results)

    def set_up(batch: list[TrialSpec], deadline: float | None = None) -> None:
        # Each set-up starts only if, at its measured cost, it ends by the deadline, and
        # is stopped there if it has not (a compile dearer than any measured so far).
        start_by = ({s: deadline - costs.setup_seconds(s) for s in batch}
                    if deadline is not None else None)
        end_by = {s: deadline for s in batch} if deadline is not None else None
        group.add(([baseline] if baseline not in group.results else []) + batch,
                  start_by=start_by, end_by=end_by)
        tried.extend(batch)
        for spec in batch:
            out = outcomes[spec]
            r = group.results.get(spec)
            if r is not None and r.status == "skipped" and r.error.startswith("budget"):
                out.untried = r.error  # the batch ran past the set-up deadline
                budget.cut(f"budget was the limit: {spec.label}: {r.error.split(': ', 1)[1]}")
                continue
            if r is None:
                out.rejected = "no result came back"
            else:
                note_timing(out, r, group.results.get(baseline))
                out.rejected = rejection(r, baseline)
            if out.rejected:
                unsafe.add(spec)
                group.finish([spec])
            else:
                alive.append(spec)
        # Far slower already in its set-up steps: not worth a timed round.
        screened = screen(baseline, [s for s in alive if s not in protected],
                          group.results, outcomes)
        budget.finished(group, screened)
        alive[:] = [s for s in alive if s not in screened]

    # First the baseline and the protected (the headline's pair) — or, on a machine
    # without one, the most promising candidate: their imports and set-ups are the
    # measured costs the rest of the search is planned on.
    t_setup = budget.clock()
    set_up(list(protected) or candidates[:1])
    budget.phases["least set-up"] = budget.clock() - t_setup
    stop = ""
    while True:
        untried = [c for c in candidates if c not in tried]
        if not untried:
            stop = f"all {len(candidates)} candidates were set up"
            break
        best = fastest_safe_step(group.results, unsafe)
        bounds = {c: step_lower_bound(c, group.results, figures, flops_per_step)
                  for c in untried}
        hopeless = [c for c in untried if bounds[c].seconds >= best]
        for c in hopeless:
            outcomes[c].untried = (f"could not win: {bounds[c].why} gives at best "
                                   f"{bounds[c].seconds * 1e3:.3g} ms/step, no faster "
                                   f"than the best measured ({best * 1e3:.3g} ms)")
        hopeful = sorted((c for c in untried if c not in hopeless),
                         key=lambda c: bounds[c].seconds)
        if not hopeful:
            stop = (f"stopped adding candidates: none of the {len(untried)} untried could "
                    "still win")
            break
        batch: list[TrialSpec] = []
        contenders = len([s for s in alive if s not in protected])
        deadline = budget.setup_deadline(group.results, contenders)
        for c in hopeful:
            if _defaults(c) != c and _defaults(c) in hopeful:
                continue  # its own backend and device at their defaults first: a bound
            deadline = budget.setup_deadline(group.results, contenders + len(batch) + 1)
            if budget.clock() + costs.batch_cost(batch + [c]) <= deadline:
                batch.append(c)
        if not batch:
            for c in hopeful:
                outcomes[c].untried = (f"budget: setting it up would take about "
                                       f"{costs.batch_cost([c]):.0f} s more")
            stop = (f"budget {budget.total_s:.0f} s: not tried "
                    f"{', '.join(c.label for c in hopeful)} (raise --budget to include them)")
            break
        set_up(batch, deadline)
    budget.phases["set-up"] = budget.clock() - t_setup - budget.phases["least set-up"]
    if stop.startswith("budget"):
        budget.cut(f"budget was the limit: {stop}")
    rung_s = 0.0
    contenders = [s for s in alive if s not in protected]
    for rung, options in enumerate(rung_options or budget.rung_options()):
        if len(contenders) <= keep_final:
            break  # few enough already: the final comparison measures them
        # The rung must end before what the final needs: its cost as measured so far
        # (the last rung's, at least), else estimated from the set-up steps.
        live = [group.results[s] for s in group.live]
        cost = max(rung_s, budget.rung_cost(live, max(1, options.max_rounds
                                                      - group.rounds_done)))
        if budget.clock() + cost > budget.start + budget.total_s - budget.reserve(
                group.results):
            budget.cut(f"budget was the limit: pruning rung {rung + 1} (about {cost:.0f} s) "
                       f"skipped; {len(contenders)} contenders were ranked on "
                       + ("their last rung" if rung else "their set-up steps"))
            break
        rung_start = budget.clock()
        group.measure(options)
        rung_s = budget.clock() - rung_start
        budget.phases["rungs"] = budget.phases.get("rungs", 0.0) + rung_s
        timed = []
        for spec in contenders:
            out, r = outcomes[spec], group.results[spec]
            out.rung = rung
            note_timing(out, r, group.results.get(baseline))
            out.rejected = rejection(r, baseline)
            if out.rejected:
                group.finish([spec])
            elif out.median_step_s is not None:
                timed.append(spec)
        timed.sort(key=lambda s: outcomes[s].median_step_s)
        keep = max(keep_final, math.ceil(len(timed) / eta))
        for spec in timed[keep:]:
            outcomes[spec].pruned = True
        budget.finished(group, timed[keep:])
        contenders = timed[:keep]
    # No rung left to tell them apart: the fastest (in set-up steps, if never timed) go on.
    contenders.sort(key=lambda s: outcomes[s].median_step_s or math.inf)
    for spec in contenders[keep_final:]:
        outcomes[spec].pruned = True
    budget.finished(group, contenders[keep_final:])
    finalists = [p for p in protected if p in alive] + contenders[:keep_final]
    return SearchResult(finalists, outcomes, stop)


def engine_group(on_result: Callable[[TrialResult], None] | None = None,
                 on_event=None, start_worker=None,
                 clock: Callable[[], float] = time.monotonic) -> StartGroup:
    """A StartGroup that runs trials through the trial engine: real worker processes by
    default, or ``start_worker`` (a replayed profile) on ``clock``."""

    def start(reference: TrialSpec, options: RunOptions,
              equivalence_seconds: float | None) -> Group:
        return TrialGroup(reference, options, equivalence_seconds=equivalence_seconds,
                          screen_factor=SCREEN_FACTOR, on_result=on_result,
                          on_event=on_event, clock=clock, start_worker=start_worker,
                          loss_check=loss_check)

    return start
