"""`TrialSpec`: one configuration to measure, frozen and validated."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from devicebench.errors import SpecError

BACKENDS = ("tensorflow", "jax", "torch")
# tf32: float32 variables and math, matmuls and convolutions on TF32 tensor cores
# (NVIDIA compute capability >= 8.0); like the mixed policies it changes the math.
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16", "tf32")
# What turns TF32 on in a user's script, per backend (the worker runs the same through
# devicebench.backends.<name>.allow_tf32): advise's snippet and ops' notes quote it.
TF32_SWITCH: dict[str, tuple[str, ...]] = {
    "torch": ("torch.backends.cuda.matmul.allow_tf32 = True",
              "torch.backends.cudnn.allow_tf32 = True"),
    "jax": ('jax.config.update("jax_default_matmul_precision", "tensorfloat32")',),
    "tensorflow": ("tf.config.experimental.enable_tensor_float_32_execution(True)",),
}
JIT_MODES = ("auto", "on", "off")
PIPELINES = ("arrays", "tf.data")
_DEVICE_RE = re.compile(r"^(cpu|mps|gpu:\d+)$")

# Does changing this knob keep the math (same loss trajectory, up to float rounding)?
KEEPS_MATH: dict[str, bool] = {
    "device": True,
    "backend": True,
    "jit": True,
    "threads": True,
    "pipeline": True,
    "steps_per_execution": True,
    "precision": False,
    "batch_size": False,
}

# Knobs that are process-global: trials differing in them never share a process.
PROCESS_GLOBAL = ("backend", "device", "threads")


def _check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise SpecError(
            f"unknown {name} {value!r}", fix=f"use one of: {', '.join(allowed)}"
        )


@dataclass(frozen=True)
class TrialSpec:
    """A training configuration to measure.

    Attributes:
        workload: built-in workload name (``devicebench workloads``) or ``file.py:func``.
        backend: Keras backend: tensorflow | jax | torch.
        device: cpu | gpu:N (CUDA, or Metal on TensorFlow) | mps (torch on Apple GPUs).
        precision: float32 | mixed_float16 | mixed_bfloat16 | tf32 (float32 with
            matmuls and convolutions in TF32 on NVIDIA GPUs from Ampere on); all but
            float32 change the math.
        jit: auto (Keras decides) | on | off — ``jit_compile`` for ``model.compile``.
        batch_size: None = the workload's own (changing it changes the math).
        pipeline: arrays (NumPy arrays to ``fit``) | tf.data (batched, prefetched).
        threads: intra-op threads; None = all cores.
        steps_per_execution: ``model.compile(steps_per_execution=...)``.
        seed: data and weight seed; None = the workload's default.

    Raises:
        SpecError: a value outside its allowed set, naming the field and the choices.

    Example:
        >>> TrialSpec("seed-rnn", backend="jax").label
        'jax/cpu'
    """

    workload: str
    backend: str = "tensorflow"
    device: str = "cpu"
    precision: str = "float32"
    jit: str = "auto"
    batch_size: int | None = None
    pipeline: str = "arrays"
    threads: int | None = None
    steps_per_execution: int = 1
    seed: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.workload, str) or not self.workload.strip():
            raise SpecError("workload must be a non-empty name",
                            fix="see `devicebench workloads`")
        _check_choice("backend", self.backend, BACKENDS)
        if not isinstance(self.device, str) or not _DEVICE_RE.match(self.device):
            raise SpecError(f"unknown device {self.device!r}", fix="use cpu, gpu:N or mps")
        if self.device == "mps" and self.backend != "torch":
            raise SpecError(
                f"device 'mps' is PyTorch's Apple GPU device; backend {self.backend!r} "
                "cannot use it",
                fix="use --device gpu:0 for TensorFlow (tensorflow-metal) or --backend torch",
            )
        _check_choice("precision", self.precision, PRECISIONS)
        _check_choice("jit", self.jit, JIT_MODES)
        _check_choice("pipeline", self.pipeline, PIPELINES)
        for name in ("batch_size", "threads"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise SpecError(f"{name} must be a positive integer, got {value!r}",
                                fix=f"pass --{name.replace('_', '-')} 1 or more")
        if not isinstance(self.steps_per_execution, int) or self.steps_per_execution <= 0:
            raise SpecError(
                f"steps_per_execution must be a positive integer, got "
                f"{self.steps_per_execution!r}", fix="use 1 or more")

    # -- identity -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialSpec:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def key(self) -> str:
        """Stable hash of the whole spec (the ``--resume`` key together with the machine)."""
        canon = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(canon.encode()).hexdigest()[:16]

    @property
    def process_key(self) -> tuple[Any, ...]:
        """The process-global part: trials with different keys never share a process."""
        return tuple(getattr(self, k) for k in PROCESS_GLOBAL)

    def with_(self, **changes: Any) -> TrialSpec:
        return replace(self, **changes)

    def math_changes(self, reference: TrialSpec) -> list[str]:
        """The knobs in which this spec differs from ``reference`` that change the math."""
        return [k for k, keeps in KEEPS_MATH.items()
                if not keeps and getattr(self, k) != getattr(reference, k)]

    @property
    def label(self) -> str:
        """Short human label: backend/device plus the knobs that differ from defaults."""
        parts = [f"{self.backend}/{self.device}"]
        default = TrialSpec(self.workload)
        for name in ("precision", "jit", "batch_size", "pipeline", "threads",
                     "steps_per_execution", "seed"):
            value = getattr(self, name)
            if value != getattr(default, name):
                parts.append(f"{name.replace('_', '-')}={value}")
        return " ".join(parts)
