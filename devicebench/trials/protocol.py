"""The trial worker's protocol: one typed request and one typed reply per command, used
by both sides (the engine and profile replay in the parent, :mod:`devicebench.trials.worker`
in the child).

On the wire each message stays one JSON object over the launcher's pipe
(:mod:`devicebench.launch`): a request is ``{"cmd": NAME, **fields}``, a reply
``{"ok": true, **fields}`` (a failure: ``{"ok": false, "status", "error", "traceback"}``,
read by :class:`devicebench.launch.WorkerProcess`). Readers ignore keys they do not know
and fill absent ones with the field's default, so a fake worker (tests) may answer with
only the keys it cares about.

Commands, in order: ``prepare`` (device, threads, framework import), ``setup`` (build,
compile, equivalence steps, step estimate), ``measure`` (one timed block per request,
from inside one long ``fit``), ``finish`` (memory, final loss; the worker exits).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

from devicebench.trials.blocks import MIN_EQUIVALENCE_STEPS, SCREEN_MIN_STEPS
from devicebench.trials.spec import TrialSpec

T = TypeVar("T")


def _read(cls: type[T], msg: dict[str, Any], **override: Any) -> T:
    """``cls`` from a wire message: known keys only, defaults for absent ones."""
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    kwargs = {k: v for k, v in msg.items() if k in known}
    kwargs.update(override)
    return cls(**kwargs)


class _Reply:
    """A reply's wire form: ``{"ok": true, **fields}``."""

    def to_message(self) -> dict[str, Any]:
        return {"ok": True, **asdict(self)}  # type: ignore[call-overload]

    @classmethod
    def from_message(cls: type[T], msg: dict[str, Any]) -> T:
        return _read(cls, msg)


# -- requests -------------------------------------------------------------------------
@dataclass(frozen=True)
class PrepareRequest:
    """Set the device and threads and import the framework (timed)."""

    spec: TrialSpec

    def to_message(self) -> dict[str, Any]:
        return {"cmd": "prepare", "spec": self.spec.to_dict()}

    @classmethod
    def from_message(cls, msg: dict[str, Any]) -> PrepareRequest:
        return cls(TrialSpec.from_dict(msg["spec"]))


@dataclass(frozen=True)
class SetupRequest:
    """Build, compile, run the equivalence steps and estimate the step time.

    Attributes:
        spec: the trial.
        weights_in: load the initial weights from this ``.npz`` (every trial but the first).
        weights_out: save the initial weights here (the first trial: the reference).
        equivalence_steps: steps from the shared weights whose losses are compared.
        equivalence_seconds: cap on those steps by time (None: all run).
        min_equivalence_steps: fewest equivalence steps the time cap may leave.
        max_warmup_seconds: warm-up stops after this long even if not settled.
        screen_step_seconds: a trial whose steps already take this long stops its
            equivalence steps after ``screen_min_steps`` (the parent will not time it).
        screen_min_steps: see ``screen_step_seconds``.
    """

    spec: TrialSpec
    weights_in: str | None = None
    weights_out: str | None = None
    equivalence_steps: int = 50
    equivalence_seconds: float | None = None
    min_equivalence_steps: int = MIN_EQUIVALENCE_STEPS
    max_warmup_seconds: float = 60.0
    screen_step_seconds: float | None = None
    screen_min_steps: int = SCREEN_MIN_STEPS

    def to_message(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        return {"cmd": "setup", **d, "spec": self.spec.to_dict()}

    @classmethod
    def from_message(cls, msg: dict[str, Any], spec: TrialSpec | None = None) -> SetupRequest:
        """The request in ``msg``; ``spec`` stands in for the message's own (a replayed
        worker knows its trial)."""
        return _read(cls, msg, spec=spec or TrialSpec.from_dict(msg["spec"]))


@dataclass(frozen=True)
class MeasureRequest:
    """Time the next block: whole epochs (``whole_epochs``) or K full batches.

    ``steps_per_block``: cut blocks of exactly this many steps — the plan the trial's
    first process made — instead of planning them from this process's own step estimate
    (None). Every process of one trial then times the same blocks, so their step times
    mean the same thing (a trial's blocks share one ``steps_per_block``)."""

    whole_epochs: bool = True
    steps_per_block: int | None = None

    def to_message(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"cmd": "measure", "whole_epochs": self.whole_epochs}
        if self.steps_per_block:
            msg["steps_per_block"] = self.steps_per_block
        return msg

    @classmethod
    def from_message(cls, msg: dict[str, Any]) -> MeasureRequest:
        k = msg.get("steps_per_block")
        return cls(bool(msg.get("whole_epochs", True)), int(k) if k else None)


FINISH = {"cmd": "finish"}


# -- replies --------------------------------------------------------------------------
@dataclass(frozen=True)
class PrepareReply(_Reply):
    import_seconds: float | None = None


@dataclass(frozen=True)
class SetupReply(_Reply):
    """What the set-up measured. Every field but ``epoch_estimate_seconds`` is a
    :class:`~devicebench.trials.result.TrialResult` field of the same name and default."""

    import_seconds: float | None = None
    setup_seconds: float | None = None
    first_step_seconds: float | None = None
    equivalence_losses: list[float] = field(default_factory=list)
    loss_checkpoints: dict[str, float] = field(default_factory=dict)
    jit_resolved: bool | None = None
    data_note: str = ""
    batch_size: int = 0
    steps_per_epoch: int = 0
    flops_per_step: float | None = None
    placement: dict[str, Any] = field(default_factory=dict)
    input_seconds_per_batch: float | None = None
    setup_step_seconds: float | None = None
    setup_steps: int = 0
    setup_step_method: str = ""
    validation_samples: int = 0
    workload_epochs: int | None = None
    epoch_estimate_seconds: float | None = None  # None: unknown (blocks cut in K steps)

    def result_fields(self) -> dict[str, Any]:
        """The fields a trial's result takes from this reply."""
        d = asdict(self)
        d.pop("epoch_estimate_seconds")
        return d


@dataclass(frozen=True)
class BlockReply(_Reply):
    """One timed block (``block_seconds`` holds one entry), the warm-up figures with the
    first block after it settled."""

    block_seconds: list[float] = field(default_factory=list)
    steps_per_block: int | None = None
    loss: float | None = None
    warmup_seconds: float | None = None
    warmup_blocks: int | None = None
    # The validation pass fit runs at each epoch end, timed once per block (workloads
    # that validate); its first, compiling pass apart.
    validation_seconds: list[float] = field(default_factory=list)
    validation_first_seconds: float | None = None


@dataclass(frozen=True)
class FinishReply(_Reply):
    peak_device_memory_bytes: int | None = None
    peak_rss_bytes: int | None = None
    final_loss: float | None = None
