"""How fast the CPU itself ran during a measurement: a fixed reference loop, timed on
the CPU clock of its own thread, sampled in the background while trials run.

Why: on this project's 2-vCPU cloud VM the same pure-Python loop, timed on the thread's
CPU clock (so time spent waiting for other processes is not counted), takes either
~0.77 ms or ~1.3 ms: each virtual CPU runs at one of two speeds in phases of 0.1-2 s,
independently of the other vCPU (correlation 0.02 between two loops pinned one per
vCPU), slow 15-40% of the time depending on the minute, with no CPU steal reported and
no other process in the guest (``bench/tf_two_speeds.py --reference``), and more often
right after the vCPU idled (slept gaps 13-36% slow, busy-waited gaps 8-17%: ``--idle``).
That is the host: other tenants sharing the physical cores, and idle vCPUs coming back
slow; a laptop's turbo and thermal limits do the same. A run's absolute figures move
with the share of slow time, which the load average and the steal counter cannot see;
the samples here can. The sampler sleeps between samples, so on such a guest it reads a
just-woken vCPU: how much the machine's speed moves, not exactly what a busy worker saw.
Facts only: :mod:`devicebench.trials.stability` judges them.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

LOOP_ITERATIONS = 20_000  # ~0.8 ms of interpreter work on a 2.6 GHz EPYC core
REPEATS = 3  # each sample: the fastest of 3 loops (an interrupt lands in one of them)
INTERVAL_S = 0.5


def _thread_clock() -> Callable[[], float]:
    """The calling thread's CPU clock where it resolves a microsecond (Linux, macOS), else
    the wall clock (Windows' thread clock ticks in 15.6 ms)."""
    try:
        if time.get_clock_info("thread_time").resolution <= 1e-6:
            return time.thread_time
    except (OSError, ValueError):  # pragma: no cover - a platform without one
        pass
    return time.perf_counter


def reference_seconds(clock: Callable[[], float] | None = None) -> float:
    """One sample: the fastest of :data:`REPEATS` runs of the fixed loop, in seconds of
    ``clock`` (default: this thread's CPU clock)."""
    clock = clock or _thread_clock()
    best = float("inf")
    for _ in range(REPEATS):
        t = clock()
        s = 0
        for i in range(LOOP_ITERATIONS):
            s += i * i
        best = min(best, clock() - t)
    return best


@dataclass(frozen=True)
class CpuSpeed:
    """The reference loop's samples over a measurement (seconds each, in time order)."""

    samples: tuple[float, ...]

    @property
    def fastest(self) -> float:
        """The fastest tenth's bound (10th percentile): the CPU at its own full speed."""
        return _quantile(self.samples, 0.1)

    @property
    def slowest(self) -> float:
        """The slowest tenth's bound (90th percentile)."""
        return _quantile(self.samples, 0.9)

    @property
    def mean_slowdown(self) -> float:
        """How much slower the CPU ran on average than at its fastest: mean / p10 - 1."""
        return statistics.fmean(self.samples) / self.fastest - 1 if self.samples else 0.0

    @property
    def slow_share(self) -> float:
        """The share of samples over 1.2x the fastest tenth."""
        if not self.samples:
            return 0.0
        return sum(s > 1.2 * self.fastest for s in self.samples) / len(self.samples)

    def to_dict(self) -> dict[str, Any]:
        """The samples (what :meth:`from_dict` reads) and their summary, for readers."""
        return {"samples_s": [round(s, 7) for s in self.samples],
                "fastest_s": round(self.fastest, 7), "slowest_s": round(self.slowest, 7),
                "mean_slowdown": round(self.mean_slowdown, 4),
                "slow_share": round(self.slow_share, 4)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CpuSpeed:
        return cls(tuple(float(s) for s in d["samples_s"]))


def _quantile(xs: tuple[float, ...], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


class CpuSpeedSampler:
    """Samples :func:`reference_seconds` every ``interval_s`` in a daemon thread between
    ``start()`` and ``stop()`` (or as a context manager). Each sample is ~3 ms of one
    core every half second: under 1% of a core.

    Example:
        >>> with CpuSpeedSampler(interval_s=0.05) as s:
        ...     time.sleep(0.2)
        >>> len(s.result().samples) >= 1
        True
    """

    def __init__(self, interval_s: float = INTERVAL_S) -> None:
        self.interval_s = interval_s
        self._samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        clock = _thread_clock()
        while True:
            self._samples.append(reference_seconds(clock))
            if self._stop.wait(self.interval_s):
                return

    def start(self) -> CpuSpeedSampler:
        self._thread = threading.Thread(target=self._run, name="devicebench-cpu-speed",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> CpuSpeed:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        return self.result()

    def result(self) -> CpuSpeed:
        """The samples so far."""
        return CpuSpeed(tuple(self._samples))

    def __enter__(self) -> CpuSpeedSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
