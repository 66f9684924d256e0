"""Find the fastest safe configuration: screening, successive halving, an interleaved final.

Every candidate is set up once beside the baseline; one whose set-up steps were already
SCREEN_FACTOR times slower than the fastest trial's is dropped untimed (screened); each
rung gives the live ones two more interleaved rounds and keeps the faster half; the
finalists' workers go on into the final comparison (more rounds) until their CIs are
tight or the budget ends.
Unsafe candidates (crashed, NaN, or a different loss) are rejected with the reason as
soon as it is known.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from devicebench.measure.stats import paired_ratio
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

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec.to_dict(), "label": self.spec.label, "rung": self.rung,
                "median_step_s": self.median_step_s, "blocks_cut": self.blocks_cut,
                "speedup_vs_baseline": self.speedup, "rejected": self.rejected,
                "pruned": self.pruned, "screened": self.screened, "final": self.final}


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


class Group(Protocol):
    """Live trials measured together (:class:`devicebench.trials.engine.TrialGroup`)."""

    results: dict[TrialSpec, TrialResult]

    @property
    def live(self) -> list[TrialSpec]: ...
    @property
    def rounds_done(self) -> int: ...
    def add(self, specs: list[TrialSpec]) -> None: ...
    def measure(self, options: RunOptions,
                enough: Callable[[dict[TrialSpec, TrialResult]], bool] | None = None
                ) -> int: ...
    def finish(self, specs: list[TrialSpec] | None = None) -> None: ...
    def close(self) -> None: ...


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


def successive_halving(
    baseline: TrialSpec,
    candidates: list[TrialSpec],
    group: Group,
    *,
    rung_options: list[RunOptions],
    eta: int = 2,
    keep_final: int = 2,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[list[TrialSpec], dict[TrialSpec, CandidateOutcome]]:
    """Prune ``candidates`` rung by rung; the baseline is measured in every round.

    Every candidate is set up once (in ``group``, beside the baseline); one already
    SCREEN_FACTOR times slower than the fastest in its set-up steps is finished untimed;
    a rung gives the live ones more interleaved rounds, ranks them on all their rounds so far, and
    finishes (stops) the slower ones and the unsafe ones. Survivors keep their workers:
    the final comparison is more rounds of the same processes, never a second set-up.
    A candidate whose loss already differs after the equivalence steps is dropped before
    it is timed. A rung after the first runs only if, at the last rung's cost, it ends
    before ``deadline``.

    Returns:
        (finalists — at most ``keep_final`` safe candidates, fastest first, still live in
         ``group``; outcome per candidate).
    """
    outcomes = {c: CandidateOutcome(c, rung=0) for c in candidates}
    group.add([baseline, *candidates])

    def drop_unsafe(specs: list[TrialSpec], rung: int) -> list[TrialSpec]:
        safe = []
        for spec in specs:
            out = outcomes[spec]
            r = group.results.get(spec)
            out.rung = rung
            if r is None:
                out.rejected = "no result came back"
                continue
            note_timing(out, r, group.results.get(baseline))
            out.rejected = rejection(r, baseline)
            if out.rejected:
                group.finish([spec])
            else:
                safe.append(spec)
        return safe

    alive = drop_unsafe(list(candidates), 0)
    # Far slower already in its set-up steps: not worth a timed round.
    screened = screen(baseline, alive, group.results, outcomes)
    group.finish(screened)
    alive = [s for s in alive if s not in screened]
    rung_s = 0.0
    for rung, options in enumerate(rung_options):
        if len(alive) <= keep_final:
            break  # few enough already: the final comparison measures them
        if deadline is not None and rung > 0 and clock() + rung_s > deadline:
            break  # the next rung costs about what the last one did
        rung_start = clock()
        group.measure(options)
        rung_s = clock() - rung_start
        timed = [s for s in drop_unsafe(alive, rung)
                 if outcomes[s].median_step_s is not None]
        timed.sort(key=lambda s: outcomes[s].median_step_s)
        keep = max(keep_final, math.ceil(len(timed) / eta))
        for spec in timed[keep:]:
            outcomes[spec].pruned = True
        group.finish(timed[keep:])
        alive = timed[:keep]
    # No rung left to tell them apart: the fastest go on.
    for spec in alive[keep_final:]:
        outcomes[spec].pruned = True
    group.finish(alive[keep_final:])
    return alive[:keep_final], outcomes


def block_timeout(budget_s: float) -> float:
    """Seconds one round's block of one trial may take in a search of ``budget_s``. At
    least 60 s: TensorFlow's autotuned input pipeline, resumed after its trial waited
    for the others' blocks, stalls (CPU idle) for up to ~25 s here; a stall is not a hang."""
    return max(60.0, min(120.0, budget_s * 0.5))


def default_rungs(budget_s: float) -> list[RunOptions]:
    """Two pruning rungs of two interleaved rounds each (rounds count in total), in
    short K-step blocks: a slow candidate's whole epoch is not worth waiting for."""
    short = dict(budget_seconds=budget_s, block_timeout=block_timeout(budget_s),
                 whole_epoch_seconds=0.0)
    return [RunOptions(min_rounds=2, max_rounds=2, **short),
            RunOptions(min_rounds=4, max_rounds=4, **short)]


def engine_group(on_result: Callable[[TrialResult], None] | None = None,
                 on_event=None) -> StartGroup:
    """A StartGroup that runs real worker processes through the trial engine."""

    def start(reference: TrialSpec, options: RunOptions,
              equivalence_seconds: float | None) -> Group:
        return TrialGroup(reference, options, equivalence_seconds=equivalence_seconds,
                          screen_factor=SCREEN_FACTOR,
                          on_result=on_result, on_event=on_event)

    return start
