"""Memory in use and its peak, from whatever the active Keras backend can tell.

Device memory where the framework reports it (TF ``get_memory_info``, torch
``cuda.memory_allocated``/``max_memory_allocated`` or ``mps.current_allocated_memory``,
JAX ``Device.memory_stats()``); otherwise the process's resident memory, labelled as
such (on a CPU, and on Apple unified memory where TF reports nothing). A framework that
answers zero or None is "unknown", never 0 MB. Frameworks are imported lazily, inside the
reader: this module imports none.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass

MemoryRead = tuple[int | None, int | None]  # (current bytes, peak bytes); None = unknown


@dataclass
class MemoryReader:
    """``read()`` -> (current, peak) bytes; ``label`` says what they measure."""

    label: str
    read_fn: Callable[[], MemoryRead]
    _peak_seen: int | None = None

    def read(self) -> MemoryRead:
        try:
            current, peak = self.read_fn()
        except Exception:  # a monitor must never break the training it watches
            return None, None
        if current is not None and current <= 0:
            current = None
        if peak is not None and peak <= 0:
            peak = None
        if peak is None and current is not None:  # no peak API: the highest value seen
            self._peak_seen = max(self._peak_seen or 0, current)
            peak = self._peak_seen
        if peak is not None and current is not None and current > peak:
            peak = current  # a peak counter updated lazily (ru_maxrss) lags the current value
        return current, peak


_PROCESS: list = []
_STATM: dict[str, int] = {}  # Linux: {"pid": ..., "fd": ...} of an open /proc/self/statm
_PAGE = 0


def _current_rss() -> int:
    """Resident bytes now. On Linux a ``pread`` of ``/proc/self/statm`` kept open (a few
    microseconds); psutil's ``memory_info`` opens and parses the file at every call,
    ~100 us while XLA's threads are busy: too much once per block on a millisecond step."""
    global _PAGE
    if sys.platform.startswith("linux"):
        pid = os.getpid()
        try:
            if _STATM.get("pid") != pid:  # first call, or a forked child
                _STATM.update(pid=pid, fd=os.open("/proc/self/statm", os.O_RDONLY))
                _PAGE = os.sysconf("SC_PAGE_SIZE")
            return int(os.pread(_STATM["fd"], 128, 0).split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):
            pass
    if not _PROCESS:
        import psutil

        _PROCESS.append(psutil.Process())
    return int(_PROCESS[0].memory_info().rss)


def _rss() -> MemoryRead:
    current = _current_rss()
    try:
        import resource

        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        peak = int(maxrss if sys.platform == "darwin" else maxrss * 1024)  # macOS: bytes
    except (ImportError, OSError):
        peak = None
    return current, peak


def rss_reader() -> MemoryReader:
    """Process resident memory: labelled unified memory on Apple silicon."""
    apple = sys.platform == "darwin" and platform.machine() == "arm64"
    label = "process RSS, unified memory" if apple else "process RSS"
    return MemoryReader(label, _rss)


def _tensorflow_reader() -> MemoryReader | None:
    import tensorflow as tf

    if not tf.config.list_logical_devices("GPU"):
        return None
    info = tf.config.experimental.get_memory_info("GPU:0")
    if not info.get("current") and not info.get("peak"):
        return None  # Metal and some plugins report zeros: unknown, not 0

    def read() -> MemoryRead:
        i = tf.config.experimental.get_memory_info("GPU:0")
        return int(i.get("current", 0)), int(i.get("peak", 0))

    return MemoryReader("device GPU:0", read)


def _torch_reader() -> MemoryReader | None:
    import torch

    if torch.cuda.is_available():
        return MemoryReader("device cuda, allocated by torch", lambda: (
            int(torch.cuda.memory_allocated()), int(torch.cuda.max_memory_allocated())))
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return MemoryReader("MPS allocated, unified memory; peak of samples",
                            lambda: (int(torch.mps.current_allocated_memory()), None))
    return None


def _jax_reader() -> MemoryReader | None:
    import jax

    dev = jax.devices()[0]
    if not dev.memory_stats():
        return None  # None on CPU: unknown

    def read() -> MemoryRead:
        stats = dev.memory_stats() or {}
        return int(stats.get("bytes_in_use", 0)), int(stats.get("peak_bytes_in_use", 0))

    return MemoryReader(f"device {dev.platform}:{dev.id}", read)


_READERS: dict[str, Callable[[], MemoryReader | None]] = {
    "tensorflow": _tensorflow_reader,
    "torch": _torch_reader,
    "jax": _jax_reader,
}


def memory_reader(backend: str) -> MemoryReader:
    """The best reader for Keras ``backend``: device memory when it reports any, else RSS.

    Example:
        >>> memory_reader("numpy").label.startswith("process RSS")
        True
    """
    factory = _READERS.get(backend)
    if factory is not None:
        try:
            reader = factory()
        except Exception:
            reader = None
        if reader is not None:
            return reader
    return rss_reader()
