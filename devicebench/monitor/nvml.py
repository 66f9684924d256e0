"""NVIDIA GPU utilisation and memory from NVML, sampled on a background thread.

NVML's utilisation is the percentage of the last sample period during which a kernel
was running on the GPU: averaged over a block of steps it says "GPU busy 3% of the
step", the visible symptom of a dispatch-bound model. ``nvidia-ml-py`` (``import
pynvml``) is an optional extra (``pip install devicebench[nvml]``); without it, or
without an NVIDIA driver, :func:`nvml_reader` returns None and a reason.

The sampler takes its reader as an argument (the seam tests use to feed recorded-shaped
values without a GPU).
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections.abc import Callable

NvmlRead = tuple[float, int | None]  # (utilisation 0..100, memory used bytes)
DEFAULT_INTERVAL = 0.05
_MISSING: list[str] = []  # why NVML cannot be used in this process, once known


def nvml_reader(index: int | None = None) -> tuple[Callable[[], NvmlRead] | None, str]:
    """A reader for GPU ``index`` (default: the first of CUDA_VISIBLE_DEVICES, else 0).

    Returns:
        ``(reader, "")``, or ``(None, reason)`` when NVML cannot be used here.
    """
    if _MISSING:
        return None, _MISSING[0]
    try:
        import pynvml
    except ImportError:
        # Remembered (as a failed nvmlInit is): retrying on every fit costs a sys.path
        # search or a dlopen each time, and the answer will not change in this process.
        _MISSING.append("nvidia-ml-py not installed (pip install devicebench[nvml])")
        return None, _MISSING[0]
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded: for good
        _MISSING.append(f"NVML unavailable ({type(exc).__name__}: {exc})")
        return None, _MISSING[0]
    try:
        if index is None:
            index = _first_visible_index()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None, f"NVML unavailable ({type(exc).__name__}: {exc})"

    def read() -> NvmlRead:
        util = pynvml.nvmlDeviceGetUtilizationRates(handle)
        mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return float(util.gpu), int(mem.used)

    return read, ""


def _first_visible_index() -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(visible) if visible.isdigit() else 0


class NvmlSampler:
    """Calls ``reader`` every ``interval`` seconds on a daemon thread; keeps timestamped
    samples (``clock`` seconds) so a block can ask for its own average.

    Example:
        >>> s = NvmlSampler(lambda: (50.0, 1 << 20), interval=0.01)
        >>> s.start(); time.sleep(0.05); s.stop()
        >>> s.busy_between(0, float("inf"))
        0.5
    """

    def __init__(self, reader: Callable[[], NvmlRead], interval: float = DEFAULT_INTERVAL,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self._reader = reader
        self._interval = interval
        self._clock = clock
        self._times: list[float] = []
        self._util: list[float] = []
        self._mem: list[int | None] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error = ""

    def sample_once(self) -> None:
        """Take one sample now (the thread's body; tests call it directly)."""
        util, mem = self._reader()
        with self._lock:
            self._times.append(self._clock())
            self._util.append(float(util))
            self._mem.append(mem)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample_once()
            except Exception as exc:  # a lost GPU must not kill training: stop sampling
                self.error = f"{type(exc).__name__}: {exc}"
                return
            self._stop.wait(self._interval)

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="devicebench-nvml",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self._interval + 1.0)
            self._thread = None

    def busy_between(self, t0: float, t1: float) -> float | None:
        """Mean utilisation (0..1) of the samples taken in ``[t0, t1]``; None if none."""
        with self._lock:
            lo = bisect.bisect_left(self._times, t0)
            hi = bisect.bisect_right(self._times, t1)
            vals = self._util[lo:hi]
        return sum(vals) / len(vals) / 100.0 if vals else None

    def memory_peak(self) -> int | None:
        """Highest NVML "memory used" seen (every process on the GPU); None if none."""
        with self._lock:
            vals = [m for m in self._mem if m is not None]
        return max(vals) if vals else None
