"""`TrialResult`: what one trial measured, with raw samples — an immutable record that
carries the run and the group it was measured in; statistics computed once, on first use."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from typing import Any

from devicebench.measure.stats import (
    RoundTimes,
    Summary,
    between_process_spread,
    hierarchical_summary,
    summarize,
)
from devicebench.trials.spec import TrialSpec

WIDE_SPREAD = 0.10  # a CI half-width above this: say so instead of trusting the figure


# Raw sequences held as tuples (the record is immutable all the way to its samples).
_TUPLES = ("block_seconds", "block_rounds", "block_replicas", "equivalence_losses",
           "validation_seconds", "validation_rounds")


@dataclass(frozen=True)
class TrialResult:
    """One trial's outcome, frozen: the engine builds a new record (``dataclasses.replace``)
    at each step rather than filling one in.

    Raw data: ``block_seconds[i]`` is the wall time of block i of ``steps_per_block``
    steps, measured in round ``block_rounds[i]`` of group ``group_id``, each block ending
    with a device sync. Everything else (median step time, CI, samples/s, epoch estimate)
    derives from it, computed once per record. Round indices mean something only inside
    one group: results of different groups are never paired by round.

    ``run_id`` (the store's run) and ``group_id`` (the engine's interleaved group) say where
    the result was measured; neither takes part in equality (two records of the same
    measurement are equal wherever they were loaded from).
    """

    spec: TrialSpec
    status: str = "ok"
    error: str = ""  # exception text, signal, or why skipped
    traceback_tail: str = ""
    stderr_tail: str = ""
    import_seconds: float | None = None
    setup_seconds: float | None = None  # data + model build + compile call
    first_step_seconds: float | None = None  # the first train step: tracing/compilation
    warmup_seconds: float | None = None  # after the first step, until step time settled
    warmup_blocks: int = 0
    steps_per_block: int = 0
    batch_size: int = 0
    steps_per_epoch: int = 0
    block_seconds: tuple[float, ...] = ()
    block_rounds: tuple[int, ...] = ()
    # The worker process (replica 0, 1, ...) that measured each block; empty: all by
    # one process (replica 0). A trial measured in several processes (a verdict rests
    # on it) has its CI computed across processes and rounds.
    block_replicas: tuple[int, ...] = ()
    flops_per_step: float | None = None
    peak_device_memory_bytes: int | None = None  # None = the backend cannot tell
    peak_rss_bytes: int | None = None
    loss_checkpoints: dict[str, float] = field(default_factory=dict)  # step -> loss
    equivalence_losses: tuple[float, ...] = ()
    final_loss: float | None = None
    nonfinite: bool = False
    jit_resolved: bool | None = None
    data_note: str = ""
    placement: dict[str, Any] = field(default_factory=dict)  # TF: ops per device, step 1
    input_seconds_per_batch: float | None = None  # the input pipeline alone, per batch
    # The set-up's step time, timed one trial after another, not interleaved (a
    # screening figure): the median of its equivalence steps after the first (synced
    # train_on_batch calls), or, where those carry their own overhead (JAX), short fits.
    setup_step_seconds: float | None = None
    setup_steps: int = 0  # equivalence steps timed (the first excluded)
    setup_step_method: str = ""  # train_on_batch | fit
    blocks_cut: str = ""  # "epochs" (whole epochs per block) | "steps" (K full batches)
    # Blocks cut the other way before a search switched (raw, as block_seconds/rounds
    # with their "cut" and "steps_per_block"): comparisons with trials pruned then.
    earlier_blocks: dict[str, Any] = field(default_factory=dict)
    # The validation pass fit runs at each epoch end (workloads that validate): its size,
    # the first pass (tracing/compilation of the test function), and one timed pass in
    # each of the trial's first measured rounds (``validation_rounds[i]``; the worker's
    # VALIDATION_TIMINGS), each ending with a device sync.
    validation_samples: int = 0
    validation_first_seconds: float | None = None
    validation_seconds: list[float] = field(default_factory=list)
    validation_rounds: list[int] = field(default_factory=list)
    workload_epochs: int | None = None  # epochs the workload's script trains (None: unknown)
    loss_verdict: str = "n/a"
    loss_detail: str = ""
    run_id: int | None = field(default=None, compare=False)  # the store's run, once stored
    group_id: str = field(default="", compare=False)  # the interleaved group ("": unknown)

    def __post_init__(self) -> None:
        for name in _TUPLES:
            value = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))

    # -- derived (computed once: the record never changes) -----------------------------
    @cached_property
    def step_samples(self) -> list[float]:
        k = max(self.steps_per_block, 1)
        return [t / k for t in self.block_seconds]

    def replica_of(self, i: int) -> int:
        """The replica (worker process) that measured block ``i`` (0 when untagged)."""
        return self.block_replicas[i] if i < len(self.block_replicas) else 0

    @cached_property
    def samples_by_process(self) -> dict[int, list[float]]:
        """Replica -> its step samples, in block order."""
        out: dict[int, list[float]] = {}
        for i, s in enumerate(self.step_samples):
            out.setdefault(self.replica_of(i), []).append(s)
        return out

    @property
    def processes(self) -> int:
        """How many worker processes measured this trial's blocks (0: no blocks)."""
        return len(self.samples_by_process)

    @cached_property
    def process_spread(self) -> float:
        """(max - min) of the processes' median step times relative to their median
        (0 with one process)."""
        return between_process_spread(self.samples_by_process)

    @cached_property
    def step_time(self) -> Summary | None:
        """Median step time with its bootstrap CI (one bootstrap per record); across
        processes and rounds (hierarchical) when more than one process measured it."""
        if not self.block_seconds:
            return None
        if self.processes > 1:
            return hierarchical_summary(self.samples_by_process)
        return summarize(self.step_samples)

    def median_step(self, cut: str) -> float | None:
        """Median step time from blocks cut ``cut`` way (current or earlier blocks);
        ``cut="setup"``: the set-up's own step time (not interleaved)."""
        if self.status != "ok":
            return None
        if cut == "setup":
            return self.setup_step_seconds
        if self.block_seconds and self.blocks_cut == cut:
            return self.step_time.median
        e = self.earlier_blocks
        if e.get("cut") == cut and e.get("block_seconds"):
            k = max(int(e.get("steps_per_block") or 1), 1)
            return summarize([t / k for t in e["block_seconds"]]).median
        return None

    @cached_property
    def round_step_times(self) -> RoundTimes:
        """Round index -> median step time in that round (for paired ratios), tagged with
        this result's group: :func:`~devicebench.measure.stats.paired_ratio` refuses to
        pair rounds of two different groups."""
        by_round: dict[int, list[float]] = {}
        per: dict[int, dict[int, list[float]]] = {}
        for i, (r, s) in enumerate(zip(self.block_rounds, self.step_samples, strict=False)):
            by_round.setdefault(r, []).append(s)
            per.setdefault(self.replica_of(i), {}).setdefault(r, []).append(s)
        by_process = ({k: {r: sorted(v)[len(v) // 2] for r, v in rounds.items()}
                       for k, rounds in per.items()} if len(per) > 1 else None)
        pick = (statistics.median if by_process  # across processes: the true median
                else (lambda v: sorted(v)[len(v) // 2]))
        return RoundTimes({r: pick(v) for r, v in by_round.items()},
                          group=self.group_id, by_process=by_process)

    @property
    def samples_per_second(self) -> float | None:
        st = self.step_time
        return self.batch_size / st.median if st and st.median > 0 else None

    @property
    def train_epoch_seconds(self) -> float | None:
        """One epoch's training pass: median step time x steps per epoch."""
        st = self.step_time
        return st.median * self.steps_per_epoch if st else None

    @property
    def validation_pass_seconds(self) -> float | None:
        """The median validation pass (None: the workload does not validate)."""
        return summarize(self.validation_seconds).median if self.validation_seconds else None

    @property
    def epoch_seconds(self) -> float | None:
        """One epoch as Keras' log shows it: training pass + validation pass."""
        train = self.train_epoch_seconds
        if train is None:
            return None
        return train + (self.validation_pass_seconds or 0.0)

    @property
    def achieved_flops(self) -> float | None:
        st = self.step_time
        if st is None or not self.flops_per_step or st.median <= 0:
            return None
        return self.flops_per_step / st.median

    @property
    def spread_warning(self) -> str:
        st = self.step_time
        if st is None or st.rel_ci_halfwidth <= WIDE_SPREAD:
            return ""
        where = (f"{st.n} blocks in {self.processes} processes" if self.processes > 1
                 else f"{st.n} blocks")
        return (f"spread too wide: 95% CI is ±{st.rel_ci_halfwidth:.0%} of the median "
                f"over {where}; measure more rounds (run --rounds N; advise --budget) "
                "or quiet the machine")

    # -- serialisation ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["spec"] = self.spec.to_dict()
        for name in _TUPLES:
            d[name] = list(d[name])
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialResult:
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["spec"] = TrialSpec.from_dict(data["spec"])
        return cls(**kwargs)


def fastest_setup_step(results: Iterable[TrialResult]) -> float | None:
    """The shortest set-up step time among ``results`` (None when none has one): what
    a search screens the others against."""
    return min((r.setup_step_seconds for r in results if r.setup_step_seconds), default=None)

