"""Run a command as a faithful wrapper does: SIGINT and SIGTERM sent to us reach the
child, and its death by a signal is reported as a shell reports it (128+N).

Ctrl-C in a terminal signals the whole foreground process group, the child included:
forwarding that SIGINT again would hit the child twice (a second KeyboardInterrupt in
the middle of its own clean-up). On Linux the wrapper waits with ``sigtimedwait`` and
reads who sent each signal: one from the terminal (``si_code`` > 0, SI_KERNEL) is not
forwarded, one sent with ``kill`` (``si_code`` <= 0, SI_USER/SI_TKILL/SI_QUEUE) is.
Elsewhere (no ``sigtimedwait``: macOS, Windows) SIGTERM is forwarded and SIGINT is left
to the terminal's own delivery.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence

FORWARDED = (signal.SIGINT, signal.SIGTERM)
POLL_SECONDS = 0.1

HINTS = {
    "SIGKILL": "often the out-of-memory killer (see `dmesg`), or `kill -9`",
    "SIGSEGV": "a crash in native code (the framework, a driver or an extension)",
    "SIGABRT": "a native abort (often a failed check inside the framework)",
    "SIGBUS": "a crash in native code (a bad memory access)",
    "SIGINT": "interrupted (Ctrl-C)",
    "SIGTERM": "terminated",
}


def run_forwarding_signals(command: Sequence[str], env: Mapping[str, str]) -> int:
    """Run ``command``; returns its exit code (negative: the signal that killed it, as
    :class:`subprocess.Popen` reports it).

    Raises:
        FileNotFoundError, PermissionError: the program cannot be started.
    """
    proc = subprocess.Popen(list(command), env=dict(env))
    if threading.current_thread() is not threading.main_thread():
        return proc.wait()
    if hasattr(signal, "sigtimedwait") and hasattr(signal, "pthread_sigmask"):
        return _wait_linux(proc)
    return _wait_portable(proc)


def _wait_linux(proc: subprocess.Popen[bytes]) -> int:
    wanted = set(FORWARDED)

    def stray(signum: int, frame: object) -> None:
        # Only this (main) thread blocks the signals: a process-directed one that arrives
        # while it is between two sigtimedwait calls goes to another thread of this
        # process (a library's own: numpy's OpenBLAS workers), and Python then runs this
        # handler here instead. Its sender is unknown: a Ctrl-C reached the child itself
        # when we share the terminal's foreground group; anything else is forwarded.
        if signum == signal.SIGINT and _terminal_foreground():
            return
        proc.send_signal(signum)

    handlers = {s: signal.signal(s, stray) for s in wanted}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, wanted)
    try:
        while True:
            code = proc.poll()
            if code is not None:
                return code
            info = signal.sigtimedwait(wanted, POLL_SECONDS)
            if info is None:
                continue
            if info.si_signo == signal.SIGINT and info.si_code > 0:
                continue  # from the terminal: the child has it already
            proc.send_signal(info.si_signo)
    finally:
        while signal.sigtimedwait(wanted, 0) is not None:
            pass  # drain: a late Ctrl-C must not raise in the wrapper after the child
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        for s, handler in handlers.items():
            signal.signal(s, handler)


def _terminal_foreground() -> bool:
    """Whether this process is in the foreground process group of its controlling
    terminal (where a Ctrl-C signals the whole group, the child included)."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY)
    except OSError:
        return False  # no controlling terminal
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)


def _wait_portable(proc: subprocess.Popen[bytes]) -> int:  # pragma: no cover - not Linux
    def forward(signum: int, frame: object) -> None:
        proc.send_signal(signum)

    old_term = signal.signal(signal.SIGTERM, forward)
    old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return proc.wait()
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)


def signal_death_line(code: int, stored: bool = True) -> str:
    """One line for a child killed by a signal (``code`` < 0); "" otherwise.
    ``stored``: say that the measured blocks are in the store.

    Example:
        >>> signal_death_line(-9)[:46]
        'the script was killed by SIGKILL (signal 9): o'
    """
    if code >= 0:
        return ""
    n = -code
    try:
        name = signal.Signals(n).name
    except ValueError:
        name = f"signal {n}"
    hint = HINTS.get(name, "")
    return (f"the script was killed by {name} (signal {n})" + (f": {hint}" if hint else "")
            + f"; exit code {128 + n}"
            + ("; the blocks measured so far are in the store (devicebench history)"
               if stored else ""))
