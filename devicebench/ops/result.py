"""Raw results of the op sweep: one :class:`OpsPoint` per (op, mode, size), one
:class:`OpsWorkerResult` per backend and device (one worker process)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from devicebench.measure.stats import Summary, summarize


@dataclass(frozen=True)
class OpsPoint:
    """The timed blocks of one op, mode and size.

    Attributes:
        op, mode, size: what was measured (size n: n×n tensors).
        status: ``ok``, ``skipped`` (``reason`` says why) or ``error`` (``reason``: the error).
        calls_per_block: calls in each timed block (adaptive: blocks last ≥ a few ms).
        chain: ops per call (1, or N in ``in-graph`` mode).
        block_seconds: wall time of each timed block; every block but ``naive`` ones ends
            with a device sync.
        first_call_seconds: the first call (tracing / compilation included), apart.
    """

    op: str
    mode: str
    size: int
    status: str = "ok"
    reason: str = ""
    calls_per_block: int = 0
    chain: int = 1
    block_seconds: tuple[float, ...] = ()
    first_call_seconds: float | None = None

    @property
    def call_seconds(self) -> list[float]:
        """Seconds per call, one value per block."""
        if self.calls_per_block <= 0:
            return []
        return [s / self.calls_per_block for s in self.block_seconds]

    def summary(self) -> Summary | None:
        """Median, IQR and CI of the seconds per call; None without samples."""
        samples = self.call_seconds
        return summarize(samples) if samples else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["block_seconds"] = list(self.block_seconds)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OpsPoint:
        d = dict(data)
        d["block_seconds"] = tuple(float(s) for s in d.get("block_seconds", ()))
        return cls(**d)


@dataclass
class OpsWorkerResult:
    """What one worker (one backend on one device) measured.

    Attributes:
        backend, device: where it ran.
        status: ``ok``; ``unavailable`` (the backend cannot use the device: ``error`` says
            why); ``error`` / ``crashed`` / ``timeout`` (the process failed).
        info: versions, threads, how ``compiled`` was done, import seconds, notes.
        points: the measured (and skipped) points.
    """

    backend: str
    device: str
    status: str = "ok"
    error: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    points: list[OpsPoint] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.backend}/{self.device}"

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "device": self.device, "status": self.status,
                "error": self.error, "info": self.info,
                "points": [p.to_dict() for p in self.points]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OpsWorkerResult:
        return cls(backend=data["backend"], device=data["device"],
                   status=data.get("status", "ok"), error=data.get("error", ""),
                   info=dict(data.get("info", {})),
                   points=[OpsPoint.from_dict(p) for p in data.get("points", [])])
