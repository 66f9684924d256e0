"""The search's time arithmetic, in one place: how the budget is shared between setting
candidates up, pruning them and the final comparison, what each untried candidate is
expected to cost (from costs measured so far in this search), and how fast it could at
best be (from evidence already in hand)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from devicebench.advisor.figures import DeviceFigures
from devicebench.trials.blocks import TARGET_BLOCK_SECONDS, WHOLE_EPOCH_SECONDS
from devicebench.trials.engine import RunOptions
from devicebench.trials.replication import replica_cost
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec

# Candidates are set up while their measured costs end before what the rungs and the
# final need (estimated from the blocks of the trials set up so far, at least
# MIN_RESERVE_SHARE of the budget); pruning rungs run while they end before RUNG_SHARE.
MIN_RESERVE_SHARE = 0.15
RUNG_SHARE = 0.75
FINAL_MIN_ROUNDS = 6
FINAL_TRIALS = 4  # the baseline, the headline's partner and two finalists
RUNG_ROUNDS = 4
# The most a knob flip (jit, precision, input pipeline, threads) on the same backend and
# device has been measured to win: TF jit=on 2.7x on seed-rnn (this project's CPU VM),
# torch.compile 2.0x and bf16 1.4x (H200, CPU VM). A flip is assumed to win at most this
# much until it is measured — the same factor the screen uses the other way.
KNOB_MAX_SPEEDUP = 4.0
UNMEASURED_BACKEND_FACTOR = 2.0  # see CostModel.setup_seconds


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

    def __post_init__(self) -> None:
        if self.start < 0:
            self.start = self.clock()

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
        block = block_estimate(results.values())
        need = FINAL_MIN_ROUNDS * FINAL_TRIALS * block
        if contenders > 2:
            need += RUNG_ROUNDS * contenders * block
        return max(MIN_RESERVE_SHARE * self.total_s, need)

    @property
    def rung_deadline(self) -> float:
        return self.start + RUNG_SHARE * self.total_s

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
                          setup_timeout=self.setup_timeout, max_warmup_seconds=3.0)

    def rung_options(self) -> list[RunOptions]:
        """Two pruning rungs of two interleaved rounds each (rounds count in total), in
        short K-step blocks: a slow candidate's whole epoch is not worth waiting for."""
        short = dict(budget_seconds=self.total_s, block_timeout=self.block_timeout,
                     whole_epoch_seconds=0.0)
        return [RunOptions(min_rounds=2, max_rounds=2, **short),
                RunOptions(min_rounds=4, max_rounds=4, **short)]

    def final_options(self, live: Iterable[TrialResult] = (),
                      processes: dict[TrialSpec, int] | None = None,
                      rounds_done: int = 0) -> RunOptions:
        """The final comparison: at most 30 rounds, until every CI is within 3% or what
        remains of the budget has passed; at least FINAL_MIN_ROUNDS rounds in all — or
        as many as the rest of the budget holds at the live trials' block lengths, each
        trial's times its ``processes`` (never fewer than 3: a CI needs them; with
        replicated trials, never fewer than 3 beyond ``rounds_done``, so each new
        process has rounds of its own)."""
        live = list(live)
        n = processes or {}
        round_s = (sum(block_estimate([r]) * n.get(r.spec, 1) for r in live)
                   or TARGET_BLOCK_SECONDS)
        # A trial's first blocks are warm-up (about two blocks, not samples).
        warmup_s = sum(2 * block_estimate([r]) for r in live if r.warmup_seconds is None)
        fits = int((self.left() - warmup_s) // round_s)
        least = max(3, min(FINAL_MIN_ROUNDS, fits))
        if any(v > 1 for v in n.values()):
            least = max(least, rounds_done + 3)
        return RunOptions(min_rounds=least, max_rounds=max(30, least),
                          budget_seconds=max(1.0, self.left()),
                          block_timeout=self.block_timeout)

    def replication_cost(self, live: Iterable[TrialResult], processes: dict[TrialSpec, int],
                         new: list[TrialResult], rounds: int = 3) -> float:
        """Seconds that measuring ``live`` with ``processes[spec]`` worker processes
        each costs from here: starting the ``new`` processes (one result per new process:
        its trial's import, set-up and warm-up), the warm-up of trials not warmed up yet,
        and ``rounds`` rounds at their block lengths (measured ones where there are)."""
        live = list(live)

        def block(r: TrialResult) -> float:
            return max(block_estimate([r]), max(r.block_seconds, default=0.0))

        warm = sum(r.warmup_seconds if r.warmup_seconds is not None else 2 * block(r)
                   for r in new)
        warm += sum(2 * block(r) for r in live if r.warmup_seconds is None)
        round_s = sum(block(r) * processes.get(r.spec, 1) for r in live)
        return replica_cost(new) + warm + rounds * round_s


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
