"""The device figures ``devicebench ops`` measured, as the advisor's reasons use them.

``ops`` fits t(n) = overhead + work / rate per op, mode and backend. Two of its figures
explain a training step: the device's matmul rate (what the step's FLOPs could run at)
and the cost of one op inside a compiled graph (``in-graph`` mode: what each op of a
TensorFlow training step costs to dispatch, whatever it computes).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from devicebench.ops.analysis import analyse
from devicebench.ops.result import OpsWorkerResult

# In-graph points up to this size (n x n) cost dispatch, not arithmetic: 16 x 16 is 256
# elements, a 16 x 16 matmul 8 kFLOP (nanoseconds at GFLOP/s rates).
DISPATCH_SIZE = 16
# The op whose chain stays one kernel per op on every backend (XLA fuses element-wise
# chains into one kernel; a matmul is its own kernel or library call).
UNFUSED_OP = "matmul"
FUSING_BACKENDS = ("jax",)


@dataclass(frozen=True)
class DeviceFigures:
    """Figures of one device from one stored ``ops`` run.

    Attributes:
        source: where they come from, e.g. ``devicebench ops run #3``.
        device: cpu | gpu:N | mps.
        peak_gflops: the fastest matmul measured on the device (any backend), GFLOP/s.
        peak_label: which path reached it, e.g. ``tensorflow/cpu compiled at 2048``.
        per_op_seconds: backend -> seconds per op inside a compiled graph: the cheapest
            op measured at a small size (up to :data:`DISPATCH_SIZE`) whose per-op cost
            was resolved. Ops that do more (softmax is several kernels, conv2d computes)
            cost more at any size; the cheapest is the closest to dispatch alone.
        per_op_labels: backend -> which op and size that is, e.g. ``reduce_sum at 2×2``.
        call_seconds: backend -> seconds for one call of a compiled function at the
            smallest size measured (the cheapest op): the fixed cost of a round trip
            from Python to the device and back, whatever the work (a host sync included).
        call_labels: backend -> which op and size that is.
        peak_precision: the math the peak was measured in, when it is not plain float32
            (e.g. "TF32 tensor cores (jax's default float32 matmul precision)").
    """

    source: str
    device: str
    peak_gflops: float | None = None
    peak_label: str = ""
    per_op_seconds: dict[str, float] = field(default_factory=dict)
    per_op_labels: dict[str, str] = field(default_factory=dict)
    call_seconds: dict[str, float] = field(default_factory=dict)
    call_labels: dict[str, str] = field(default_factory=dict)
    peak_precision: str = ""


def cheapest_dispatch(points: Iterable[tuple[str, str, str, int, float, bool]]
                      ) -> tuple[dict[str, tuple[float, str]], dict[str, tuple[float, str]]]:
    """Per backend, the cheapest op inside a compiled graph (``in-graph`` mode; for jax
    the matmul's when it was measured: XLA fuses element-wise chains into one kernel,
    a matmul stays its own) and the cheapest
    compiled call (``compiled`` mode), each at a size up to DISPATCH_SIZE:
    ``{backend: (seconds, "op at n×n")}`` twice. ``points`` are (backend, mode, op,
    size, median seconds, usable) of one device."""
    per_op: dict[str, tuple[float, str]] = {}
    per_call: dict[str, tuple[float, str]] = {}
    unfused: dict[str, tuple[float, str]] = {}
    for backend, mode, op, size, median, usable in points:
        if mode not in ("in-graph", "compiled") or not usable or size > DISPATCH_SIZE:
            continue
        cheapest = per_op if mode == "in-graph" else per_call
        fused = backend in FUSING_BACKENDS and mode == "in-graph" and op == UNFUSED_OP
        for table in (cheapest, unfused) if fused else (cheapest,):
            if backend not in table or median < table[backend][0]:
                table[backend] = (median, f"{op} at {size}×{size}")
    # Under XLA a chain of element-wise ops is one fused kernel (jax: 4 ns per multiply
    # here), not one kernel per op: where jax's matmul chain was measured, its per-op
    # cost is the cost of a kernel. (TensorFlow's graphs and torch's traced ones run
    # each op as its own kernel: their cheapest op stands.)
    per_op.update(unfused)
    return per_op, per_call


def device_figures(run_id: int, workers: list[OpsWorkerResult], device: str
                   ) -> DeviceFigures | None:
    """What an ``ops`` run measured on ``device``; None if it measured nothing there.

    Example:
        >>> device_figures(1, [], "cpu") is None
        True
    """
    mine = [w for w in workers if w.device == device and w.points]
    if not mine:
        return None
    analysis = analyse(mine)
    peak = analysis.peaks.get(device)
    per_op, per_call = cheapest_dispatch(
        (path.backend, path.mode, op.op, p.size, p.median, p.usable)
        for op in analysis.ops for path in op.paths if path.device == device
        for p in path.points)
    return DeviceFigures(
        source=f"devicebench ops run #{run_id}", device=device,
        peak_gflops=peak.flops_per_s / 1e9 if peak else None,
        peak_label=f"{peak.label} at {peak.size}" if peak else "",
        per_op_seconds={b: v[0] for b, v in per_op.items()},
        per_op_labels={b: v[1] for b, v in per_op.items()},
        call_seconds={b: v[0] for b, v in per_call.items()},
        call_labels={b: v[1] for b, v in per_call.items()})
