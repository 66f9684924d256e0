"""What the advisor's rules reason from: the measured results and the machine's facts
(:class:`Evidence`), the :class:`Reason` a rule gives, and the pairing of two trials'
step times measured the same way."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from devicebench.advisor.figures import DeviceFigures
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec


@dataclass(frozen=True)
class Reason:
    id: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Evidence:
    """What the rules may use: measured results (one per spec) and machine facts."""

    baseline: TrialResult
    results: dict[TrialSpec, TrialResult]
    device_gflops: float | None = None  # measured matmul rate of the baseline's device
    device_rate_source: str = "numpy matmul, measured now"
    figures: DeviceFigures | None = None  # the baseline device's stored `ops` figures
    cpu_flags: tuple[str, ...] = ()
    workload_tags: tuple[str, ...] = ()
    device_figures: dict[str, DeviceFigures] = field(default_factory=dict)  # every device's
    timesteps: int | None = None  # a recurrent workload's loop length
    gpu_compute_capability: str = ""  # NVIDIA GPU 0's, "" elsewhere
    epochs: int = 10  # the training one-time costs are weighed against


def median_step_of(r: TrialResult | None) -> float | None:
    if r is None or r.status != "ok" or r.step_time is None:
        return None
    return r.step_time.median


class Pair(NamedTuple):
    a: float  # median step time of the first trial
    b: float  # ... and of the second, from steps measured the same way
    cut: str  # epochs | steps | "" | setup

    @property
    def source(self) -> str:
        """Where the two figures come from, when it is not the interleaved rounds."""
        return (" — from their set-up steps, timed one trial after the other, not "
                "interleaved" if self.cut == "setup" else "")


def paired_steps(a: TrialResult | None, b: TrialResult | None) -> Pair | None:
    """Median step times of ``a`` and ``b`` from blocks cut the same way (whole epochs
    first): a candidate pruned on K-step blocks is compared with the baseline's K-step
    blocks, never with its whole epochs; one screened out before any timed round is
    compared on both trials' set-up steps."""
    if a is None or b is None:
        return None
    for cut in ("epochs", "steps", "", "setup"):
        x, y = a.median_step(cut), b.median_step(cut)
        if x and y:
            return Pair(x, y, cut)
    return None


def find_trial(ev: Evidence, base: TrialSpec, **changes: Any) -> TrialResult | None:
    return ev.results.get(base.with_(**changes))
