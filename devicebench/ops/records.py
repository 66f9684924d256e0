"""What the op-sweep analysis returns: per-point statistics, paths, peaks and ops (data
only). :mod:`devicebench.ops.analysis` computes them, :mod:`devicebench.ops.verdict`
words them; both import this module, neither imports the other's caller."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from devicebench.measure.stats import Ratio
from devicebench.ops.fit import CostFit
from devicebench.ops.result import OpsWorkerResult

NOISY_IQR = 0.5


@dataclass(frozen=True)
class PointStat:
    """One size of one path. Seconds are per call — per op for ``in-graph``, where the
    compiled call's own cost is subtracted: (t_chain − t_compiled) / (N − 1)."""

    size: int
    median: float
    q1: float
    q3: float
    ci_low: float
    ci_high: float
    samples: tuple[float, ...]
    calls_per_block: int
    first_call: float | None
    work: float
    flops: float
    resolved: bool = True  # False: in-graph per-op cost lost in the noise (CI reaches 0)

    @property
    def usable(self) -> bool:
        return self.resolved and self.median > 0

    @property
    def noisy(self) -> bool:
        """The blocks spread by more than half the median (a busy machine)."""
        return self.median > 0 and (self.q3 - self.q1) > NOISY_IQR * self.median

    def to_dict(self) -> dict[str, Any]:
        return {"size": self.size, "median_s": self.median, "q1_s": self.q1, "q3_s": self.q3,
                "iqr_s": self.q3 - self.q1, "ci95_s": [self.ci_low, self.ci_high],
                "samples_s": list(self.samples), "calls_per_block": self.calls_per_block,
                "first_call_s": self.first_call, "work": self.work, "flops": self.flops,
                "resolved": self.resolved, "noisy": self.noisy}


@dataclass
class PathStat:
    """One backend, device and mode for one op: its points, fit and comparison."""

    backend: str
    device: str
    mode: str
    points: list[PointStat] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)
    fit: CostFit | None = None
    pct_of_peak: float | None = None
    dispatch_bound_below: float | None = None  # size n below which overhead > work
    ref: str | None = None
    speedups: list[tuple[int, Ratio | None]] = field(default_factory=list)
    crossover: int | None = None
    # The fitted rate is above the device's measured peak (not a naive path): the fixed
    # cost overlaps the work there (asynchronous dispatch), so t = overhead + work/rate
    # does not hold; the rate at the largest size (work / time) is shown instead.
    fit_above_peak: bool = False
    largest_rate: float | None = None  # work / median at the largest usable size
    largest_pct_of_peak: float | None = None

    @property
    def label(self) -> str:
        return f"{self.backend}/{self.device} {self.mode}"

    def at(self, size: int) -> PointStat | None:
        return next((p for p in self.points if p.size == size), None)

    def to_dict(self) -> dict[str, Any]:
        fit = None
        if self.fit is not None:
            f = self.fit
            fit = {"overhead_s": f.overhead, "rate_per_s": f.rate if f.rate != float("inf")
                   else None, "n_points": f.n_points, "rel_residual": f.rel_residual,
                   "pct_of_matmul_peak": self.pct_of_peak,
                   "above_matmul_peak": self.fit_above_peak,
                   "rate_at_largest_size_per_s": self.largest_rate,
                   "pct_of_matmul_peak_at_largest_size": self.largest_pct_of_peak,
                   "dispatch_bound_below_size": self.dispatch_bound_below}
        return {
            "label": self.label, "backend": self.backend, "device": self.device,
            "mode": self.mode, "points": [p.to_dict() for p in self.points],
            "skipped": [{"size": s, "reason": r} for s, r in self.skipped],
            "errors": [{"size": s, "error": r} for s, r in self.errors],
            "fit": fit, "reference": self.ref, "crossover_size": self.crossover,
            "speedup_vs_reference": [
                {"size": s, "value": r.value, "ci95": [r.ci_low, r.ci_high]}
                for s, r in self.speedups if r is not None],
        }


@dataclass(frozen=True)
class Peak:
    """The fastest matmul measured on a device: the practical peak others are held to."""

    flops_per_s: float
    label: str
    size: int
    math: str = ""  # how its float32 matmul computed: "TF32" | "float32" | "" (unknown)


@dataclass
class OpAnalysis:
    op: str
    unit: str  # "flops" or "bytes": what the fitted rate counts
    paths: list[PathStat]
    verdict: list[str] = field(default_factory=list)

    def path(self, backend: str, device: str, mode: str) -> PathStat | None:
        return next((p for p in self.paths if (p.backend, p.device, p.mode)
                     == (backend, device, mode)), None)

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "rate_unit": f"{self.unit}/s", "verdict": self.verdict,
                "paths": [p.to_dict() for p in self.paths]}


@dataclass
class OpsAnalysis:
    ops: list[OpAnalysis]
    peaks: dict[str, Peak]
    accelerators: list[str]
    workers: list[OpsWorkerResult]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "accelerators": self.accelerators,
            "matmul_peak": {d: {"flops_per_s": p.flops_per_s, "path": p.label, "size": p.size,
                                "math": p.math} for d, p in self.peaks.items()},
            "notes": self.notes,
            "workers": [{"backend": w.backend, "device": w.device, "status": w.status,
                         "error": w.error, "info": w.info} for w in self.workers],
            "ops": [o.to_dict() for o in self.ops],
        }
