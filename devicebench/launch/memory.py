"""Watch a worker's resident memory and kill it at a limit.

An address-space limit (RLIMIT_AS) is the wrong tool: XLA and TensorFlow reserve large
virtual ranges they never touch, so a healthy worker dies under it (XLA cannot even
create its thread pools) while a runaway one ends in whatever error its allocator
raises. Resident memory is what the machine runs out of, so that is what is watched:
the parent samples the worker's RSS, its children's included, every
:data:`SAMPLE_SECONDS`, and kills the process group at the limit.
"""

from __future__ import annotations

import os
import signal
import threading

import psutil

SAMPLE_SECONDS = 0.1


def tree_rss_bytes(pid: int) -> int | None:
    """Resident bytes of a process and all its descendants; None once it is gone."""
    try:
        proc = psutil.Process(pid)
        total = proc.memory_info().rss
        children = proc.children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    for child in children:
        try:
            total += child.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return total


class MemoryWatch:
    """A daemon thread that samples a process group's resident memory.

    Attributes:
        limit_bytes: the limit (None: only the peak is tracked).
        peak_bytes: the largest sample seen.
        exceeded: set once a sample reached the limit and the group was killed.

    Example:
        >>> watch = MemoryWatch(proc.pid, 2 * 2**30)  # doctest: +SKIP
        >>> ...; watch.stop(); watch.exceeded  # doctest: +SKIP
    """

    def __init__(self, pid: int, limit_bytes: int | None,
                 interval: float = SAMPLE_SECONDS) -> None:
        self.pid = pid
        self.limit_bytes = limit_bytes
        self.interval = interval
        self.peak_bytes = 0
        self.exceeded = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"memory-watch-{pid}",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = tree_rss_bytes(self.pid)
            if rss is None:
                return
            self.peak_bytes = max(self.peak_bytes, rss)
            if self.limit_bytes is not None and rss >= self.limit_bytes:
                self.exceeded = True
                try:
                    os.killpg(self.pid, signal.SIGKILL)  # no grace: it is still growing
                except (ProcessLookupError, PermissionError):
                    pass
                return
            self._stop.wait(self.interval)

    def stop(self) -> None:
        """Stop sampling (the thread ends within one interval)."""
        self._stop.set()

    def describe(self) -> str:
        """One line for an ``oom`` result: the peak seen and the limit."""
        mib = 2**20
        return (f"resident memory reached {self.peak_bytes / mib:.0f} MiB, over the "
                f"--memory-limit of {(self.limit_bytes or 0) / mib:.0f} MiB; process group "
                "killed (raise --memory-limit, or make the batch or model smaller)")
