"""The search's time arithmetic, in one place: how the budget is shared between setting
candidates up, pruning them and the final comparison, what each untried candidate is
expected to cost (from costs measured so far in this search), and how fast it could at
best be (from evidence already in hand).

Every phase past the least a comparison needs (the first batch's set-up, then the
warm-up and three interleaved rounds) is planned from costs measured in this run and
is not started when it cannot end before the budget; :meth:`SearchBudget.cut` records
what was left out, :meth:`SearchBudget.report` says it (and where the time went)."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from devicebench.advisor.figures import DeviceFigures
from devicebench.trials.blocks import TARGET_BLOCK_SECONDS, WHOLE_EPOCH_SECONDS
from devicebench.trials.engine import RunOptions
from devicebench.trials.replication import replica_cost
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec

# Candidates are set up while their measured costs end before what the rungs and the
# final need (estimated from the blocks of the trials set up so far, at least
# MIN_RESERVE_SHARE of the budget); a pruning rung runs when, at its measured or
# estimated cost, it ends before what the final needs.
MIN_RESERVE_SHARE = 0.15
FINAL_MIN_ROUNDS = 6
FINAL_MAX_ROUNDS = 30  # the final's most rounds (also the regret bench's sweep's)
FINAL_TRIALS = 4  # the baseline, the headline's partner and two finalists
RUNG_ROUNDS = 4
# The most a knob flip (jit, precision, input pipeline, threads) on the same backend and
# device has been measured to win: TF jit=on 2.7x on seed-rnn (this project's CPU VM),
# torch.compile 2.0x and bf16 1.4x (H200, CPU VM). A flip is assumed to win at most this
# much until it is measured — the same factor the screen uses the other way.
KNOB_MAX_SPEEDUP = 4.0
UNMEASURED_BACKEND_FACTOR = 2.0  # see CostModel.setup_seconds
LEAST_ROUNDS = 3  # the least a CI needs: never cut
# An epoch under fit against the set-up steps' estimate of it (steps x step time): up to
# ~2x for TensorFlow's seed-rnn on the loaded 2-core VM (its fit adds the per-epoch
# iterator, shuffling and callbacks that synced train_on_batch steps do not pay).
FIT_EPOCH_FACTOR = 2.0
# A trial's warm-up (its first blocks, not samples) ends once two blocks agree or after
# MAX_WARMUP_S (group_options): see warmup_estimate.
MAX_WARMUP_S = 3.0
WARMUP_BLOCKS = 2
# What ends a search after its last round: finishing the live workers (their exits,
# ~0.15 s each since launch.child.exit_now, together), storing them, the reasons; at
# least this, else the dearest finish measured in this run.
TAIL_S = 0.5


@dataclass
class SearchBudget:
    """A search's budget on one clock (wall time, or a replay's virtual clock).

    Example:
        >>> b = SearchBudget(40.0, clock=lambda: 0.0)
        >>> b.setup_deadline(), b.block_timeout
        (34.0, 60.0)
    """

    total_s: float
    clock: Callable[[], float] = time.monotonic
    start: float = field(default=-1.0)
    phases: dict[str, float] = field(default_factory=dict)  # seconds spent in each
    cuts: list[str] = field(default_factory=list)  # what the budget left out, one line each
    finish_s: float = 0.0  # the dearest group.finish measured so far
    # The final's blocks: whole epochs when all are short (0: K steps, when whole
    # epochs would not leave the least a comparison needs within the budget).
    final_whole_epoch_s: float = WHOLE_EPOCH_SECONDS

    def __post_init__(self) -> None:
        if self.start < 0:
            self.start = self.clock()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Count the time spent inside the block towards ``phases[name]``."""
        t0 = self.clock()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + self.clock() - t0

    def finished(self, group: Any, specs: list[TrialSpec] | None = None) -> None:
        """``group.finish(specs)``, its cost measured (what the search's end will cost)."""
        if specs is not None and not specs:
            return
        t0 = self.clock()
        group.finish(specs)
        self.finish_s = max(self.finish_s, self.clock() - t0)

    def cut(self, line: str) -> None:
        """Record something the budget left out (said in the output)."""
        self.cuts.append(line)

    @property
    def tail_s(self) -> float:
        """What the search's end (finishing the live workers, the reasons) is expected
        to cost: TAIL_S, or more where a finish in this run cost more."""
        return max(TAIL_S, self.finish_s)

    def rounds_left(self) -> float:
        """Seconds left for rounds: the budget less the search's end."""
        return self.left() - self.tail_s

    def overrun_notes(self) -> list[str]:
        """A line when the search took more than the budget and 10%: only the least a
        comparison needs is never cut, so it says what that cost here and the budget
        that would hold it."""
        spent = self.elapsed()
        if spent <= 1.1 * self.total_s:
            return []
        least = self.phases.get("least set-up", 0.0) + self.phases.get("least rounds", 0.0)
        fits = 10 * math.ceil(1.25 * max(least, spent - self.phases.get("final", 0.0)) / 10)
        return [f"took {spent:.0f} s of a {self.total_s:.0f} s budget: setting up the "
                f"baseline and its first comparison ({self.phases.get('least set-up', 0):.0f} "
                f"s) and three interleaved rounds with their warm-up "
                f"({self.phases.get('least rounds', 0):.0f} s) — the least a CI needs, "
                f"never cut — cost more than the budget here; raise --budget (to about "
                f"{fits} s)"]

    def report(self) -> dict[str, Any]:
        """Where the time went and what the budget cut (the advice's ``budget``)."""
        return {"budget_s": self.total_s, "elapsed_s": round(self.elapsed(), 3),
                "phases_s": {k: round(v, 3) for k, v in self.phases.items()},
                "limited": bool(self.cuts), "cuts": list(self.cuts)}

    def elapsed(self) -> float:
        return self.clock() - self.start

    def left(self) -> float:
        return self.total_s - self.elapsed()

    def setup_deadline(self, results: dict[TrialSpec, TrialResult] | None = None,
                       contenders: int = 0) -> float:
        """When setting candidates up must end: the budget less what the final (and,
        with more than two contenders, the rungs) will take at the block lengths of the
        trials measured so far."""
        return self.start + self.total_s - self.reserve(results or {}, contenders)

    def reserve(self, results: dict[TrialSpec, TrialResult], contenders: int = 0) -> float:
        """What must stay for after the set-ups: the least final (LEAST_ROUNDS rounds of
        the baseline, its first comparison and up to two contenders, each with its
        warm-up), the rungs (with more than two contenders) and the search's end, at the
        block lengths of the trials measured so far; at least MIN_RESERVE_SHARE. The
        final's further rounds and processes are planned on what its least rounds cost,
        from what is left then."""
        block = block_estimate(results.values())
        trials = min(FINAL_TRIALS, 2 + contenders)
        need = trials * (LEAST_ROUNDS * block + warmup_estimate(block)) + self.tail_s
        if contenders > 2:
            need += RUNG_ROUNDS * contenders * block + contenders * warmup_estimate(block)
        return max(MIN_RESERVE_SHARE * self.total_s, need)

    @property
    def block_timeout(self) -> float:
        """Seconds one round's block of one trial may take. At least 60 s: TensorFlow's
        autotuned input pipeline, resumed after its trial waited for the others' blocks,
        stalls (CPU idle) for up to ~25 s on a busy machine; a stall is not a hang."""
        return max(60.0, min(120.0, self.total_s * 0.5))

    @property
    def setup_timeout(self) -> float:
        return max(60.0, self.total_s)

    @property
    def equivalence_seconds(self) -> float:
        """Cap on one candidate's equivalence steps: a candidate 50x slower than the
        baseline is checked on fewer steps (at least 10)."""
        return max(2.0, self.total_s * 0.02)

    def group_options(self, equivalence_steps: int) -> RunOptions:
        return RunOptions(equivalence_steps=equivalence_steps,
                          setup_timeout=self.setup_timeout, max_warmup_seconds=MAX_WARMUP_S)

    def rung_options(self) -> list[RunOptions]:
        """Two pruning rungs of two interleaved rounds each (rounds count in total), in
        short K-step blocks: a slow candidate's whole epoch is not worth waiting for."""
        short = dict(budget_seconds=self.total_s, block_timeout=self.block_timeout,
                     whole_epoch_seconds=0.0)
        return [RunOptions(min_rounds=2, max_rounds=2, **short),
                RunOptions(min_rounds=4, max_rounds=4, **short)]

    def least_final_options(self) -> RunOptions:
        """The least a comparison needs, never cut: LEAST_ROUNDS interleaved rounds in
        all (none when the rungs already measured them, cut the same way)."""
        return RunOptions(min_rounds=LEAST_ROUNDS, max_rounds=LEAST_ROUNDS,
                          budget_seconds=max(1.0, self.rounds_left()),
                          block_timeout=self.block_timeout,
                          whole_epoch_seconds=self.final_whole_epoch_s)

    def more_final_options(self, least: int) -> RunOptions:
        """More rounds of the final, at least ``least`` in all (rounds a new process
        needs, already paid for), at most FINAL_MAX_ROUNDS; each further one only while a round like
        the last ends before the budget less the search's end."""
        return RunOptions(min_rounds=least, max_rounds=max(FINAL_MAX_ROUNDS, least),
                          budget_seconds=max(0.0, self.rounds_left()),
                          block_timeout=self.block_timeout,
                          whole_epoch_seconds=self.final_whole_epoch_s)

    def least_in_epochs(self, live: Iterable[TrialResult]) -> float | None:
        """What the least rounds cost in whole-epoch blocks (each trial's warm-up of
        WARMUP_BLOCKS epochs, then LEAST_ROUNDS rounds), at FIT_EPOCH_FACTOR times the
        epoch the set-up steps give; None when the blocks would be K steps anyway."""
        live = list(live)
        epochs = [FIT_EPOCH_FACTOR * (r.setup_step_seconds or 0.0) * max(r.steps_per_epoch, 1)
                  for r in live if r.status == "ok"]
        if not epochs or any(r.setup_step_seconds is None for r in live) or (
                max(epochs) / FIT_EPOCH_FACTOR > WHOLE_EPOCH_SECONDS):
            return None
        blocks = [max(TARGET_BLOCK_SECONDS, e) for e in epochs]
        return sum(warmup_estimate(b) for b in blocks) + LEAST_ROUNDS * sum(blocks)

    def round_seconds(self, live: Iterable[TrialResult],
                      processes: dict[TrialSpec, int] | None = None) -> float:
        """One interleaved round of ``live``, each trial's times its ``processes``:
        at their measured median blocks where there are, else as estimated."""
        n = processes or {}
        return sum(measured_block(r) * max(1, n.get(r.spec, 1)) for r in live)

    def rung_cost(self, live: Iterable[TrialResult], rounds: int) -> float:
        """A pruning rung of ``rounds`` interleaved rounds of ``live`` in K-step blocks:
        the warm-up of those not warmed up yet, then the rounds (measured K-step blocks
        where there are, else about TARGET_BLOCK_SECONDS or one set-up step)."""
        live = list(live)

        def block(r: TrialResult) -> float:
            if r.block_seconds and r.blocks_cut == "steps":
                return statistics.median(r.block_seconds)
            return max(TARGET_BLOCK_SECONDS, r.setup_step_seconds or 0.0)

        warm = sum(warmup_estimate(block(r)) for r in live if r.warmup_seconds is None)
        return warm + rounds * sum(block(r) for r in live)

    def rungs_fit(self, live: Iterable[TrialResult], rounds: int,
                  results: dict[TrialSpec, TrialResult]) -> bool:
        """Whether a rung of ``rounds`` rounds ends before what the final needs."""
        end = self.start + self.total_s - self.reserve(results)
        return self.clock() + self.rung_cost(live, rounds) <= end

    def replication_cost(self, live: Iterable[TrialResult], processes: dict[TrialSpec, int],
                         new: list[TrialResult], rounds: int = 3) -> float:
        """Seconds that measuring ``live`` with ``processes[spec]`` worker processes
        each costs from here: starting the ``new`` processes (one result per new process:
        its trial's import, set-up and warm-up), the warm-up of trials not warmed up yet,
        and ``rounds`` rounds at their block lengths (measured ones where there are)."""
        live = list(live)

        def block(r: TrialResult) -> float:
            return max(block_estimate([r]), max(r.block_seconds, default=0.0))

        warm = sum(r.warmup_seconds if r.warmup_seconds is not None
                   else warmup_estimate(block(r)) for r in new)
        warm += sum(warmup_estimate(block(r)) for r in live if r.warmup_seconds is None)
        round_s = sum(block(r) * processes.get(r.spec, 1) for r in live)
        return replica_cost(new) + warm + rounds * round_s


def share_of_total(total_s: float, spent_s: float, jobs_left: int, cap_s: float,
                   floor_s: float = 10.0, end_s: float = 2.0) -> float:
    """The budget of the next of ``jobs_left`` searches in a job of ``total_s`` seconds
    that has spent ``spent_s``: an even share of what is left (less ``end_s`` for the
    job's own end), at most ``cap_s``, at least ``floor_s`` (advise's least budget).
    Recomputed before each search, so one that ended early or late moves the next.

    Example:
        >>> share_of_total(90, 16, 2, 40)
        36.0
    """
    left = total_s - spent_s - end_s
    return max(floor_s, min(cap_s, left / max(jobs_left, 1)))


def warmup_estimate(block: float) -> float:
    """A trial's warm-up at ``block`` seconds a block, as planned: WARMUP_BLOCKS blocks
    that agree, or MAX_WARMUP_S if that is sooner. On a busy machine it runs to the cap
    (mnist-cnn on the loaded 2-core VM: 4.1 s for the warm-up and the first 0.25 s
    block); the final measures its least rounds before anything that depends on their
    cost, so a longer warm-up than planned costs those rounds only."""
    return min(MAX_WARMUP_S, WARMUP_BLOCKS * block)


def measured_block(r: TrialResult) -> float:
    """``r``'s block: the median of those timed (in the current cut), else the estimate."""
    if r.block_seconds:
        return statistics.median(r.block_seconds)
    return block_estimate([r])


def block_estimate(results: Iterable[TrialResult]) -> float:
    """The longest timed block expected among ``results`` (from their set-up steps):
    whole epochs when all of them are short, else K steps of about TARGET_BLOCK_SECONDS (at
    least one step)."""
    ok = [r for r in results if r.status == "ok" and r.setup_step_seconds]
    if not ok:
        return TARGET_BLOCK_SECONDS
    epochs = [r.setup_step_seconds * max(r.steps_per_epoch, 1) for r in ok]
    if max(epochs) <= WHOLE_EPOCH_SECONDS:
        return max(TARGET_BLOCK_SECONDS, max(epochs))
    return max(TARGET_BLOCK_SECONDS, max(r.setup_step_seconds for r in ok))


def setup_cost(r: TrialResult) -> float | None:
    """What setting ``r`` up cost (import excluded): build and compile, the first step,
    the equivalence steps."""
    if r.setup_seconds is None:
        return None
    steps = (r.setup_step_seconds or 0.0) * r.setup_steps
    return r.setup_seconds + (r.first_step_seconds or 0.0) + steps


@dataclass
class CostModel:
    """Expected cost of setting candidates up, from what this search measured so far:
    a backend's import (workers of one batch import at once, so a batch pays the
    slowest import), and the set-up of the same backend and device (else the same
    backend, else the dearest measured)."""

    results: dict[TrialSpec, TrialResult]

    def _pick(self, spec: TrialSpec, value: Callable[[TrialResult], float | None]
              ) -> float | None:
        done = [(s, v) for s, r in self.results.items() if (v := value(r)) is not None]
        for same in (lambda s: s.backend == spec.backend and s.device == spec.device,
                     lambda s: s.backend == spec.backend, lambda s: True):
            vals = [v for s, v in done if same(s)]
            if vals:
                return max(vals)
        return None

    def import_seconds(self, spec: TrialSpec) -> float:
        return self._pick(spec, lambda r: r.import_seconds) or 0.0

    def setup_seconds(self, spec: TrialSpec) -> float:
        """A backend measured here: its dearest set-up (same device first). A backend not
        measured yet: twice the dearest set-up of any (live: mnist-cnn's JAX and torch
        set-ups took 2-3x TensorFlow's here, and one set-up cannot be cut short)."""
        cost = self._pick(spec, setup_cost) or 0.0
        if not any(s.backend == spec.backend and setup_cost(r) is not None
                   for s, r in self.results.items()):
            cost *= UNMEASURED_BACKEND_FACTOR
        return cost

    def batch_cost(self, specs: list[TrialSpec]) -> float:
        if not specs:
            return 0.0
        return (max(self.import_seconds(s) for s in specs)
                + sum(self.setup_seconds(s) for s in specs))


@dataclass(frozen=True)
class StepBound:
    """The fastest an untried candidate's step could be, and the evidence for it."""

    seconds: float
    why: str


def step_lower_bound(spec: TrialSpec, results: dict[TrialSpec, TrialResult],
                     figures: dict[str, DeviceFigures], flops_per_step: float | None
                     ) -> StepBound:
    """The tightest lower bound on ``spec``'s step time that the evidence gives: a knob
    flip of a measured backend and device wins at most KNOB_MAX_SPEEDUP; a float32 step
    cannot beat its FLOPs at the device's measured matmul peak. 0 when nothing bounds it
    (another backend or device not measured yet: it could win)."""
    bounds = [StepBound(0.0, "no evidence yet")]
    if spec.batch_size is None:
        same = [r.setup_step_seconds for s, r in results.items()
                if s.backend == spec.backend and s.device == spec.device
                and s.batch_size is None and r.status == "ok" and r.setup_step_seconds]
        if same:
            best = min(same)
            bounds.append(StepBound(best / KNOB_MAX_SPEEDUP, (
                f"at most {KNOB_MAX_SPEEDUP:.0f}x faster than {spec.backend}/{spec.device}'s "
                f"measured {best * 1e3:.3g} ms/step")))
    f = figures.get(spec.device)
    if (f is not None and f.peak_gflops and flops_per_step and spec.precision == "float32"):
        t = flops_per_step / (f.peak_gflops * 1e9)
        bounds.append(StepBound(t, (f"its {flops_per_step:,.0f} FLOPs at {spec.device}'s "
                                    f"measured peak ({f.peak_gflops:,.0f} GFLOP/s)")))
    return max(bounds, key=lambda b: b.seconds)


def fastest_safe_step(results: dict[TrialSpec, TrialResult], unsafe: set[TrialSpec]
                      ) -> float:
    """The fastest set-up step among trials that may still be recommended."""
    steps = [r.setup_step_seconds for s, r in results.items()
             if s not in unsafe and r.status == "ok" and r.setup_step_seconds]
    return min(steps, default=math.inf)
