"""What every launcher shares: how a process ended, killing its group, output tails."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import psutil

TAIL_CHARS = 4000


def signal_name(returncode: int | None) -> str:
    """``SIGSEGV`` for a process killed by signal 11 (return code -11); "" otherwise."""
    if returncode is None or returncode >= 0:
        return ""
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def exit_status(returncode: int | None) -> tuple[str, str]:
    """``(status, signal name)`` for a process that ended by itself with ``returncode``.

    The one mapping from signals to statuses: killed by a signal is ``crashed``, except
    SIGKILL, which we did not send (our own kills are recorded as ``timeout`` or ``oom``
    by whoever sent them): the kernel's OOM killer is its usual sender, so ``oom`` when
    memory is short now (:func:`memory_short`); otherwise someone ran ``kill -9``, and it
    is ``crashed`` (:func:`sigkill_detail` says which).
    Exit 0 is ``ok``, any other exit code ``error``.
    """
    name = signal_name(returncode)
    if name:
        return ("oom" if name == "SIGKILL" and memory_short() else "crashed"), name
    return ("ok" if returncode == 0 else "error"), ""


SHORT_MEMORY_SHARE = 0.10  # available memory under this share of the total: "short"


def memory_short() -> bool:
    """Whether this machine's available memory is under SHORT_MEMORY_SHARE of its total
    (the kernel's OOM killer has just had reason to act); True when it cannot tell."""
    try:
        vm = psutil.virtual_memory()
    except (OSError, RuntimeError):  # no reading: keep the old, cautious answer
        return True
    return vm.available < SHORT_MEMORY_SHARE * vm.total


def sigkill_detail(status: str) -> str:
    """The words for a SIGKILL devicebench did not send, by :func:`exit_status`'s status."""
    if status == "oom":
        return ("killed by SIGKILL (signal 9) while memory was short: the kernel's "
                "out-of-memory killer is its usual sender")
    try:
        free = f"{psutil.virtual_memory().available / 2**30:.1f} GiB of memory was free"
    except (OSError, RuntimeError):
        free = "memory was not short"
    return (f"killed by SIGKILL (signal 9), not sent by devicebench; {free}, so not the "
            "kernel's out-of-memory killer: another process (kill -9) ended it")


def tail(path: Path, chars: int = TAIL_CHARS) -> str:
    """The last ``chars`` characters of a file ("" if unreadable)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - chars))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the child's process group, SIGKILL it 2 s later if it is still there."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()


def end_group(pgid: int) -> None:
    """SIGKILL whatever is left in process group ``pgid`` once its leader (a worker) has
    exited: processes a workload started (``subprocess.Popen(["sleep", "301"])``) end
    with their trial, not at the machine's next reboot. A child that made its own
    session (``start_new_session=True``) has left the group on purpose and is spared."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
