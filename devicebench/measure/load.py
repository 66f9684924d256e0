"""What else the machine was doing: the load average and CPU steal, read from /proc
(Linux) before and after a measurement. Facts only; :mod:`devicebench.trials.stability`
judges them."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from devicebench.measure.cpuspeed import CpuSpeed


@dataclass(frozen=True)
class LoadReading:
    """One reading: the 1-minute load average, the CPU time counters of ``/proc/stat``'s
    ``cpu`` line (ticks: all, steal), and the logical cores."""

    load1: float
    ticks_total: int
    ticks_steal: int
    cores: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LoadReading:
        return cls(float(d["load1"]), int(d["ticks_total"]), int(d["ticks_steal"]),
                   int(d["cores"]))


def read_load(proc: Path = Path("/proc")) -> LoadReading | None:
    """The machine's load now, or None where /proc does not say (macOS, Windows, a
    sandbox without it).

    Example:
        >>> r = read_load()
        >>> r is None or r.cores >= 1
        True
    """
    try:
        load1 = float((proc / "loadavg").read_text().split()[0])
        line = next(x for x in (proc / "stat").read_text().splitlines()
                    if x.startswith("cpu "))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    ticks = [int(v) for v in line.split()[1:]]
    # user nice system idle iowait irq softirq steal [guest guest_nice: inside user]
    total = sum(ticks[:8])
    steal = ticks[7] if len(ticks) > 7 else 0
    return LoadReading(load1, total, steal, os.cpu_count() or 1)


def steal_fraction(before: LoadReading, after: LoadReading) -> float | None:
    """The share of CPU time the hypervisor gave to other guests between two readings
    (None: no time passed)."""
    total = after.ticks_total - before.ticks_total
    if total <= 0:
        return None
    return max(0, after.ticks_steal - before.ticks_steal) / total


@dataclass(frozen=True)
class MachineLoad:
    """The machine around a measurement, as ``run`` and ``advise`` store it with the run
    (``load`` in the store and in ``--json``): the load readings before and after, and the
    CPU's own speed during it."""

    before: LoadReading | None = None
    after: LoadReading | None = None
    cpu_speed: CpuSpeed | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"before": self.before and self.before.to_dict(),
                "after": self.after and self.after.to_dict(),
                "cpu_speed": self.cpu_speed.to_dict() if self.cpu_speed is not None else None}

    @classmethod
    def from_dict(cls, d: Any) -> MachineLoad:
        """What a stored run says; a part that is missing or garbled (older runs stored
        no CPU speed) is None."""
        d = d if isinstance(d, dict) else {}

        def part(key: str, kind: Any) -> Any:
            try:
                return kind.from_dict(d[key]) if isinstance(d.get(key), dict) else None
            except (KeyError, TypeError, ValueError):
                return None

        return cls(part("before", LoadReading), part("after", LoadReading),
                   part("cpu_speed", CpuSpeed))
