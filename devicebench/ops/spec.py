"""What ``devicebench ops`` measures: ops, modes, sizes, and the work each op does.

No framework is imported here: the parent validates the command line with this module
and hands each worker an :class:`OpsConfig` as JSON.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from devicebench.errors import SpecError

OPS: tuple[str, ...] = ("multiply", "add", "matmul", "conv2d", "reduce_sum", "softmax")
MODES: tuple[str, ...] = ("naive", "eager", "compiled", "in-graph")
OPS_BACKENDS: tuple[str, ...] = ("tensorflow", "jax", "torch", "numpy")

# numpy is synchronous and has no compiler: its one path is the plain call.
NUMPY_MODES: tuple[str, ...] = ("eager",)
# numpy has no 2-D convolution of its own.
NUMPY_OPS: tuple[str, ...] = ("multiply", "add", "matmul", "reduce_sum", "softmax")

CONV_CHANNELS = 8  # conv2d: (1, n, n, 8) input, 3x3 kernel, 8 output channels, SAME
CONV_KERNEL = 3
BYTES_PER_ELEMENT = 4  # float32 throughout

# The unit each op's throughput is quoted in: arithmetic-bound ops in FLOP/s,
# memory-bound ones in bytes/s.
WORK_UNIT: dict[str, str] = {
    "multiply": "bytes", "add": "bytes", "matmul": "flops", "conv2d": "flops",
    "reduce_sum": "bytes", "softmax": "bytes",
}

DEFAULT_SIZES: tuple[int, ...] = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
MAX_SIZE = 65536

OP_DESCRIPTIONS: dict[str, str] = {
    "multiply": "x * y, both n×n (tf.multiply, as a typical CPU-vs-GPU benchmark calls it)",
    "add": "x + y, both n×n",
    "matmul": "x @ y, both n×n",
    "conv2d": f"3×3 convolution, 1×n×n×{CONV_CHANNELS} → {CONV_CHANNELS} channels, SAME",
    "reduce_sum": "sum over the last axis of an n×n tensor",
    "softmax": "softmax over the last axis of an n×n tensor",
}


def op_flops(op: str, n: float) -> float:
    """Floating-point operations of one call on size ``n`` (a multiply-add counts 2).

    Example:
        >>> op_flops("matmul", 4)
        128.0
    """
    e = float(n) * float(n)
    if op in ("multiply", "add", "reduce_sum"):
        return e
    if op == "matmul":
        return 2.0 * float(n) ** 3
    if op == "conv2d":
        return 2.0 * e * CONV_KERNEL * CONV_KERNEL * CONV_CHANNELS * CONV_CHANNELS
    if op == "softmax":
        return 5.0 * e  # max, subtract, exp, sum, divide
    raise SpecError(f"unknown op {op!r}", fix=f"use one of: {', '.join(OPS)}")


def op_bytes(op: str, n: float) -> float:
    """Bytes one call must move at least once (inputs read, output written), float32.

    Example:
        >>> op_bytes("multiply", 2)
        48.0
    """
    e = float(n) * float(n)
    b = BYTES_PER_ELEMENT
    if op in ("multiply", "add", "matmul"):
        return 3.0 * e * b
    if op == "conv2d":
        weights = CONV_KERNEL * CONV_KERNEL * CONV_CHANNELS * CONV_CHANNELS
        return (2.0 * e * CONV_CHANNELS + weights) * b
    if op == "reduce_sum":
        return (e + float(n)) * b
    if op == "softmax":
        return 2.0 * e * b
    raise SpecError(f"unknown op {op!r}", fix=f"use one of: {', '.join(OPS)}")


def op_work(op: str, n: float) -> float:
    """The op's work in its own unit (:data:`WORK_UNIT`): FLOPs or bytes."""
    return op_flops(op, n) if WORK_UNIT[op] == "flops" else op_bytes(op, n)


def op_elements(op: str, n: int) -> int:
    """Elements of the op's (first) input: what "size" means to a user."""
    return n * n * (CONV_CHANNELS if op == "conv2d" else 1)


def parse_sizes(text: str) -> tuple[int, ...]:
    """``"2,8,32"`` (a list), ``"2..4096"`` (powers of 2) or ``"2..4096:4"`` (×4 steps).

    Raises:
        SpecError: not integers, not positive, above 65536, or an empty/invalid range.

    Example:
        >>> parse_sizes("2..32:4")
        (2, 8, 32)
    """
    fix = "e.g. --sizes 2,64,1024 or --sizes 2..4096 or --sizes 2..4096:4"
    text = text.strip()
    if ".." in text:
        lo_s, _, rest = text.partition("..")
        hi_s, _, step_s = rest.partition(":")
        try:
            lo, hi, step = int(lo_s), int(hi_s), int(step_s or 2)
        except ValueError:
            raise SpecError(f"bad --sizes range {text!r}", fix=fix) from None
        if lo < 1 or hi < lo or step < 2:
            raise SpecError(f"bad --sizes range {text!r}: need 1 <= low <= high and a "
                            "step of 2 or more", fix=fix)
        sizes, n = [], lo
        while n <= hi:
            sizes.append(n)
            n *= step
        if sizes[-1] != hi:
            sizes.append(hi)
    else:
        sizes = []
        for item in (s.strip() for s in text.split(",")):
            if not item:
                continue
            try:
                sizes.append(int(item))
            except ValueError:
                raise SpecError(f"--sizes must be integers, got {item!r}", fix=fix) from None
    if not sizes:
        raise SpecError("--sizes is empty", fix=fix)
    for s in sizes:
        if s < 1 or s > MAX_SIZE:
            raise SpecError(f"size {s} is out of range (1..{MAX_SIZE})", fix=fix)
    return tuple(sorted(set(sizes)))


def _check_list(name: str, values: tuple[str, ...], allowed: tuple[str, ...]) -> None:
    if not values:
        raise SpecError(f"--{name} is empty", fix=f"use one or more of: {', '.join(allowed)}")
    for v in values:
        if v not in allowed:
            raise SpecError(f"unknown {name.rstrip('s')} {v!r}",
                            fix=f"use one or more of: {', '.join(allowed)}")


@dataclass(frozen=True)
class OpsConfig:
    """One worker's sweep: which ops, modes and sizes on one backend and device.

    Attributes:
        backend: tensorflow | jax | torch | numpy.
        device: cpu | gpu:N | mps.
        ops, modes, sizes: what to measure (validated against :data:`OPS`, :data:`MODES`).
        threads: intra-op threads; None = all cores.
        chain: ops chained inside one compiled function in ``in-graph`` mode.
        block_seconds: a timed block holds enough calls to last at least this long.
        blocks: timed blocks per point (fewer when one call exceeds a block).
        max_call_seconds: a point whose single call would take longer is skipped.
        torch_compile: use ``torch.compile`` for torch's compiled modes (default:
            ``torch.jit.trace``).

    Raises:
        SpecError: an unknown op, mode, backend or device, or a number out of range.
    """

    backend: str
    device: str = "cpu"
    ops: tuple[str, ...] = OPS
    modes: tuple[str, ...] = MODES
    sizes: tuple[int, ...] = DEFAULT_SIZES
    threads: int | None = None
    chain: int = 16
    block_seconds: float = 0.005
    blocks: int = 5
    max_call_seconds: float = 0.25
    torch_compile: bool = False

    def __post_init__(self) -> None:
        _check_list("backends", (self.backend,), OPS_BACKENDS)
        _check_list("ops", self.ops, OPS)
        _check_list("modes", self.modes, MODES)
        if not (self.device == "cpu" or self.device == "mps"
                or (self.device.startswith("gpu:") and self.device[4:].isdigit())):
            raise SpecError(f"unknown device {self.device!r}", fix="use cpu, gpu:N or mps")
        if not self.sizes or any(not isinstance(s, int) or s < 1 for s in self.sizes):
            raise SpecError(f"bad sizes {self.sizes!r}", fix="use positive integers")
        if self.threads is not None and self.threads < 1:
            raise SpecError(f"threads must be a positive integer, got {self.threads}",
                            fix="pass --threads 1 or more")
        if self.chain < 2:
            raise SpecError(f"chain must be 2 or more, got {self.chain}", fix="e.g. --chain 16")
        if self.blocks < 2:
            raise SpecError(f"blocks must be 2 or more, got {self.blocks}",
                            fix="e.g. --blocks 5")
        if not 0 < self.block_seconds <= 10 or not 0 < self.max_call_seconds <= 600:
            raise SpecError("block and per-call time limits must be positive",
                            fix="e.g. --block-ms 5 --max-call 0.25")

    @property
    def label(self) -> str:
        return f"{self.backend}/{self.device}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OpsConfig:
        d = dict(data)
        for k in ("ops", "modes", "sizes"):
            if k in d:
                d[k] = tuple(d[k])
        return cls(**d)


def modes_for(backend: str, modes: tuple[str, ...]) -> tuple[str, ...]:
    """The requested modes this backend has (numpy: eager only)."""
    if backend == "numpy":
        return tuple(m for m in modes if m in NUMPY_MODES)
    return modes


def ops_for(backend: str, ops: tuple[str, ...]) -> tuple[str, ...]:
    """The requested ops this backend has (numpy: no conv2d)."""
    if backend == "numpy":
        return tuple(o for o in ops if o in NUMPY_OPS)
    return ops


def side_for_work(op: str, work: float) -> float:
    """The (fractional) size n at which ``op_work(op, n) == work`` (bisection)."""
    if work <= op_work(op, 1):
        return 1.0
    lo, hi = 1.0, 2.0
    while op_work(op, hi) < work:
        hi *= 2
        if hi > 1e9:
            return math.inf
    for _ in range(60):
        mid = (lo + hi) / 2
        if op_work(op, mid) < work:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def fmt_size(op: str, n: float) -> str:
    """``64×64`` (``64×64×8`` for conv2d's channels)."""
    side = f"{n:.0f}×{n:.0f}"
    return f"{side}×{CONV_CHANNELS}" if op == "conv2d" else side
