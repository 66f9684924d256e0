"""The monitor's bookkeeping, free of any framework: blocks of steps, epochs, alerts.

:class:`MonitorLog` is fed with timed blocks (each ended by a device sync in the
callback) and turns them into per-epoch summaries, a steady step time with its spread
(:func:`devicebench.measure.stats.summarize`), stall alerts and the end-of-training line.
Tests feed it recorded block times directly.

Example:
    >>> log = MonitorLog(batch_size=32)
    >>> for i in range(6):
    ...     _ = log.add_block(Block(epoch=0, first_step=i * 10, steps=10, seconds=0.01))
    >>> round(log.steady().median * 1e3, 3)
    1.0
"""

from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from devicebench.fmt import fmt_duration
from devicebench.measure.stats import Summary, summarize

# A block is a stall when its time per step exceeds this multiple of the running median.
STALL_FACTOR = 3.0
# ... and only once this many earlier steady blocks make the median meaningful.
STALL_MIN_BLOCKS = 5
# An epoch is marked as warm-up when its steps took this much longer than steady ones.
WARMUP_EXCESS_FRACTION = 0.10
# Each epoch's steady reference rate: from at most this many latest blocks.
REFERENCE_WINDOW = 32
# The steady figure's CI: bootstrapped from at most this many blocks (evenly thinned).
MAX_BOOTSTRAP_BLOCKS = 1000
# A steady figure whose 95% CI is wider than this (relative half-width) gets a caution:
# reruns of one configuration here agree to ±3-10%, so ±25% means the blocks disagree.
SPREAD_CAUTION = 0.25

FIRST = "first"  # the block holding the fit's first execution: tracing and compilation
BLOCK = "block"  # a full block of steps
TAIL = "tail"  # the rest of an epoch, closed at validation or at the epoch's end


@dataclass(frozen=True)
class Block:
    """One timed run of consecutive training steps, ended by a device sync.

    Attributes:
        epoch: the epoch (0-based) the steps belong to.
        first_step: index of the first step within the epoch.
        steps: optimizer steps in the block (``steps_per_execution`` counted).
        seconds: wall time from the sync before the block to the sync after it.
        kind: ``"first"`` (compilation inside), ``"block"`` or ``"tail"``.
        memory_current, memory_peak: bytes after the block; None = unknown.
        gpu_busy: NVML utilisation averaged over the block (0..1); None = not sampled.
        loss: the running mean loss of the epoch after the block; None = not read.
    """

    epoch: int
    first_step: int
    steps: int
    seconds: float
    kind: str = BLOCK
    memory_current: int | None = None
    memory_peak: int | None = None
    gpu_busy: float | None = None
    loss: float | None = None

    @property
    def step_seconds(self) -> float:
        return self.seconds / self.steps if self.steps else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Alert:
    """Something the user should act on: ``kind`` is ``"nan"`` or ``"stall"``."""

    kind: str
    epoch: int
    step: int
    message: str


@dataclass(frozen=True)
class EpochRecord:
    """Per-epoch summary. ``warmup``: the epoch paid for compilation or warm-up
    (``excess_seconds`` over what its steps take at the steady rate)."""

    epoch: int
    steps: int
    train_seconds: float  # sum of the epoch's blocks (validation excluded)
    wall_seconds: float  # on_epoch_begin -> on_epoch_end (validation included)
    step_seconds: float | None  # median over the epoch's full blocks; None without any
    samples_per_s: float | None
    excess_seconds: float
    warmup: bool
    memory_peak: int | None
    gpu_busy: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class MonitorLog:
    """Accumulates blocks and epochs; computes the figures. Pure, no framework.

    Args:
        batch_size: samples per step, for samples/s; None = unknown (no samples/s).
        stall_factor: a full block slower per step than this multiple of the running
            median of earlier full blocks raises a stall alert.
    """

    batch_size: int | None = None
    stall_factor: float = STALL_FACTOR
    blocks: list[Block] = field(default_factory=list)
    epochs: list[EpochRecord] = field(default_factory=list)
    alerts: list[Alert] = field(default_factory=list)
    memory_label: str = "unknown"
    overhead_seconds: float = 0.0  # in the monitor's per-block/epoch code, syncs excluded
    setup_seconds: float = 0.0  # once per fit: finding the memory API, NVML, opening sinks
    # Step times of the full blocks so far, kept sorted: the running median in O(log n)
    # per block, so a days-long fit does not pay a growing sort at every block.
    _full_sorted: list[float] = field(default_factory=list, repr=False)
    _epoch_start: int = field(default=0, repr=False)  # index of the open epoch's 1st block
    _nan_epochs: set[int] = field(default_factory=set, repr=False)

    # -- feeding -------------------------------------------------------------------------
    def add_block(self, block: Block) -> list[Alert]:
        """Record a block; returns the alerts it raises (also kept in :attr:`alerts`).

        One NaN alert per epoch at most: the loss stays NaN once it is.
        """
        new: list[Alert] = []
        if block.kind == BLOCK and block.steps > 0:
            history = self._full_sorted
            if len(history) >= STALL_MIN_BLOCKS:
                median = _sorted_median(history)
                if median > 0 and block.step_seconds > self.stall_factor * median:
                    ratio = block.step_seconds / median
                    new.append(Alert(
                        "stall", block.epoch, block.first_step,
                        f"stall: steps {block.first_step}-{block.first_step + block.steps - 1}"
                        f" of epoch {block.epoch + 1} took "
                        f"{fmt_duration(block.step_seconds)}/step, "
                        f"{ratio:.1f}x the running median {fmt_duration(median)} — training "
                        "is being held up (input pipeline, another process, swapping, thermal "
                        "throttling); check `top`/`nvidia-smi` and your data loading"))
            bisect.insort(history, block.step_seconds)
        if (block.loss is not None and not math.isfinite(block.loss)
                and block.epoch not in self._nan_epochs):
            self._nan_epochs.add(block.epoch)
            new.append(nan_alert(block.epoch, block.first_step + block.steps - 1, block.loss))
        self.blocks.append(block)
        self.alerts.extend(new)
        return new

    def add_alert(self, alert: Alert) -> bool:
        """Record an alert found outside a block (the epoch's logs); False = a NaN alert
        for that epoch is already recorded."""
        if alert.kind == "nan":
            if alert.epoch in self._nan_epochs:
                return False
            self._nan_epochs.add(alert.epoch)
        self.alerts.append(alert)
        return True

    def end_epoch(self, epoch: int, wall_seconds: float) -> EpochRecord:
        """Close ``epoch``: summarise its blocks against the current steady rate."""
        start = self._epoch_start
        if start > len(self.blocks) or any(b.epoch != epoch for b in self.blocks[start:]):
            start = 0  # fed out of order (tests): fall back to a scan
        mine = [b for b in self.blocks[start:] if b.epoch == epoch]
        self._epoch_start = len(self.blocks)
        steps = sum(b.steps for b in mine)
        train = sum(b.seconds for b in mine)
        full = [b.step_seconds for b in mine if b.kind == BLOCK]
        step_s = statistics.median(full) if full else (train / steps if steps else None)
        # A plain median here: the bootstrap CI of steady() is for the end, not per epoch.
        # Against the recent steady rate: a window, so an epoch's cost does not grow with
        # the number of blocks before it (thousands in a long run of short epochs).
        steady_steps = [b.step_seconds for b in self.steady_blocks(REFERENCE_WINDOW)]
        ref = statistics.median(steady_steps) if steady_steps else step_s
        excess = max(0.0, train - steps * ref) if ref else 0.0
        first = any(b.kind == FIRST for b in mine)
        warmup = first or (train > 0 and excess > WARMUP_EXCESS_FRACTION * train)
        peaks = [b.memory_peak for b in mine if b.memory_peak is not None]
        busy = _weighted_busy(mine)
        rec = EpochRecord(
            epoch=epoch, steps=steps, train_seconds=train, wall_seconds=wall_seconds,
            step_seconds=step_s,
            samples_per_s=(self.batch_size / step_s) if self.batch_size and step_s else None,
            excess_seconds=excess, warmup=warmup,
            memory_peak=max(peaks) if peaks else None, gpu_busy=busy)
        self.epochs.append(rec)
        return rec

    # -- figures -------------------------------------------------------------------------
    def steady_blocks(self, window: int | None = None) -> list[Block]:
        """Blocks outside warm-up: those of epochs after the first when there are at
        least 2 such, else all of them; never the first execution. An epoch's tail counts
        when it spans at least half the longest full block (on a fast model a whole epoch
        can be shorter than one block: then the epochs are the blocks). ``window``: look
        only at the last ``window`` blocks."""
        pool = self.blocks[-window:] if window else self.blocks
        longest = max((b.steps for b in pool if b.kind == BLOCK), default=0)
        full = [b for b in pool if b.steps > 0 and (
            b.kind == BLOCK or (b.kind == TAIL and b.steps >= longest / 2))]
        first_epoch = self.blocks[0].epoch if self.blocks else 0  # fed in order
        later = [b for b in full if b.epoch > first_epoch]
        return later if len(later) >= 2 else full

    def steady(self) -> Summary | None:
        """Median time per step over the steady blocks, with its 95% CI; None without any."""
        blocks = self.steady_blocks()
        if not blocks:
            return None
        times = [b.step_seconds for b in blocks]
        if len(times) <= MAX_BOOTSTRAP_BLOCKS:
            return summarize(times)
        # A long run (0.5 s blocks: 7,200 an hour): the bootstrap draws n x 2000 indices,
        # so its CI comes from an even thinning; the median and n from every block.
        step = math.ceil(len(times) / MAX_BOOTSTRAP_BLOCKS)
        thin = summarize(times[::step])
        return replace(thin, n=len(times), median=statistics.median(times))

    def compile_seconds(self) -> float | None:
        """What the first epoch took beyond its steps at the steady rate (compilation,
        tracing, warm-up); None before an epoch ended or without a steady rate."""
        steady = self.steady()
        if not self.blocks or steady is None:
            return None
        first_epoch = min(b.epoch for b in self.blocks)
        mine = [b for b in self.blocks if b.epoch == first_epoch]
        return max(0.0, sum(b.seconds for b in mine) - sum(b.steps for b in mine)
                   * steady.median)

    def peak_memory(self) -> int | None:
        peaks = [b.memory_peak for b in self.blocks if b.memory_peak is not None]
        return max(peaks) if peaks else None

    def gpu_busy(self) -> float | None:
        return _weighted_busy(self.steady_blocks())

    def train_seconds(self) -> float:
        return sum(b.seconds for b in self.blocks)

    def summary(self) -> dict[str, Any]:
        """Every figure as JSON-able data (the store keeps it with the run)."""
        steady = self.steady()
        train = self.train_seconds()
        return {
            "steady_step_seconds": steady.median if steady else None,
            "steady_ci": [steady.ci_low, steady.ci_high] if steady else None,
            "steady_blocks": steady.n if steady else 0,
            "spread_caution": self.spread_caution(),
            "samples_per_s": (self.batch_size / steady.median
                              if steady and self.batch_size and steady.median > 0 else None),
            "batch_size": self.batch_size,
            "compile_seconds": self.compile_seconds(),
            "peak_memory_bytes": self.peak_memory(),
            "memory_label": self.memory_label,
            "gpu_busy": self.gpu_busy(),
            "train_seconds": train,
            "steps": sum(b.steps for b in self.blocks),
            "monitor_overhead_seconds": self.overhead_seconds,
            "monitor_setup_seconds": self.setup_seconds,
            "monitor_overhead_fraction": self.overhead_seconds / train if train else None,
            "epochs": [e.to_dict() for e in self.epochs],
            "alerts": [asdict(a) for a in self.alerts],
        }

    def spread_caution(self) -> str:
        """What to do about a steady figure too spread to trust ("" when it is not)."""
        steady = self.steady()
        if steady is None or steady.rel_ci_halfwidth <= SPREAD_CAUTION:
            return ""
        few = steady.n < 10
        return (f"caution: the step time is uncertain (±{steady.rel_ci_halfwidth * 100:.0f}%"
                f" over {steady.n} blocks, above ±{SPREAD_CAUTION * 100:.0f}%): "
                + ("too few blocks for a firm figure — train longer (more epochs or steps) "
                   "before comparing it" if few else
                   "the blocks disagree — something else ran (other programs, the input "
                   "pipeline, throttling); rerun on a quiet machine before comparing it"))

    def final_line(self) -> str:
        """One line: steady step time ±spread (n blocks); compilation; memory; GPU busy.

        Example: ``steady 1.42 ms/step ±2% (n=40 blocks), 22535 samples/s; first epoch
        included 1.9 s of compilation; peak memory 312 MB (device)``.
        """
        steady = self.steady()
        if steady is None:
            if not self.blocks:
                return "monitor: no training step was timed"
            steps = sum(b.steps for b in self.blocks)
            return (f"monitor: {steps} steps in {self.train_seconds():.2f} s, too few for a "
                    "steady figure (each block is timed apart; train longer for one)")
        parts = [f"steady {fmt_duration(steady.median)}/step ±{steady.rel_ci_halfwidth * 100:.0f}% "
                 f"(n={steady.n} blocks)"]
        if self.batch_size and steady.median > 0:
            parts[0] += f", {self.batch_size / steady.median:,.0f} samples/s"
        comp = self.compile_seconds()
        if comp is not None:
            parts.append(f"first epoch included {comp:.1f} s of compilation and warm-up")
        peak = self.peak_memory()
        parts.append(f"peak memory {_mb(peak)} ({self.memory_label})" if peak is not None
                     else "peak memory unknown")
        busy = self.gpu_busy()
        if busy is not None:
            parts.append(f"GPU busy {busy * 100:.0f}% of the step")
        train = self.train_seconds()
        if train > 0:
            parts.append(f"monitor overhead {self.overhead_seconds / train * 100:.2f}%")
        caution = self.spread_caution()
        if caution:
            parts.append(caution)
        return "; ".join(parts)


def nan_alert(epoch: int, step: int, value: float) -> Alert:
    return Alert("nan", epoch, step,
                 f"loss is {value} by step {step} of epoch {epoch + 1} — training diverged "
                 "and every later step is wasted; lower the learning rate, clip gradients "
                 "(optimizer clipnorm=1.0) or check the inputs for NaN/Inf "
                 "(TrainingMonitor(stop_on_nan=True) stops the fit when this happens)")


def _sorted_median(values: list[float]) -> float:
    n = len(values)
    mid = n // 2
    return values[mid] if n % 2 else (values[mid - 1] + values[mid]) / 2


def _weighted_busy(blocks: list[Block]) -> float | None:
    pairs = [(b.gpu_busy, b.seconds) for b in blocks if b.gpu_busy is not None]
    total = sum(s for _, s in pairs)
    if not pairs or total <= 0:
        return None
    return sum(u * s for u, s in pairs) / total


def _mb(nbytes: int) -> str:
    return f"{nbytes / 1e9:.2f} GB" if nbytes >= 1e9 else f"{nbytes / 1e6:.0f} MB"


@dataclass
class BlockPlanner:
    """How many steps the next block spans.

    ``block_steps`` fixed, or auto (None): the fit's first execution is a block of its
    own (it holds compilation); then blocks grow (at most 8x at a time) until one lasts
    ``target_seconds``, so the one device sync per block costs a small, bounded fraction
    of the step time whatever the model.
    """

    block_steps: int | None = None
    target_seconds: float = 0.5
    size: int = 1

    def __post_init__(self) -> None:
        if self.block_steps is not None:
            if self.block_steps < 1:
                raise ValueError(f"block_steps must be >= 1, got {self.block_steps}")
            self.size = self.block_steps
        if self.target_seconds <= 0:
            raise ValueError(f"target_seconds must be > 0, got {self.target_seconds}")

    def after(self, block: Block) -> int:
        """The size of the block after ``block``."""
        if self.block_steps is not None or block.kind != BLOCK or block.steps <= 0:
            return self.size
        if block.seconds < self.target_seconds:
            per_step = block.seconds / block.steps
            want = math.ceil(self.target_seconds / per_step) if per_step > 0 else self.size * 8
            self.size = max(self.size + 1, min(self.size * 8, max(self.size * 2, want)))
        return self.size
