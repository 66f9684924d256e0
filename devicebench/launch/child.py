"""The worker side: the pipe protocol (JSON lines over two dedicated pipes) and dying
with the parent."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import threading
import time
from typing import Any


class Channel:
    """JSON lines over the two dedicated pipes (commands in, replies out).

    ``pending`` holds a command read ahead (by a loop that must stop on it) for the next
    :meth:`recv`.
    """

    def __init__(self, cmd_fd: int, res_fd: int) -> None:
        self._in = os.fdopen(cmd_fd, "r", encoding="utf-8")
        self._out = os.fdopen(res_fd, "w", encoding="utf-8", buffering=1)
        self.pending: dict[str, Any] | None = None

    def recv(self) -> dict[str, Any] | None:
        """The next command, or None when the parent closed the command pipe."""
        if self.pending is not None:
            msg, self.pending = self.pending, None
            return msg
        line = self._in.readline()
        return json.loads(line) if line else None

    def send(self, reply: dict[str, Any]) -> None:
        """Send one reply."""
        self._out.write(json.dumps(reply, default=float) + "\n")
        self._out.flush()


def exit_now(code: int) -> None:
    """End this worker at once, skipping the interpreter's teardown: call it when every
    reply the parent is owed is on the result pipe. Tearing down a process that holds
    TensorFlow or JAX took ~2.6 s on the project's 2-core VM, and the parent waits for
    each finished worker's exit (an ``advise`` ends dozens); this takes ~0.15 s."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


PARENT_PID_VAR = "DEVICEBENCH_PARENT_PID"  # set by the launcher in every worker's env
PR_SET_PDEATHSIG = 1
WATCH_PARENT_SECONDS = 0.5


def _kill_own_group() -> None:
    # The worker leads its own process group (start_new_session): this ends it and
    # anything it started.
    try:
        os.killpg(os.getpgrp(), signal.SIGKILL)
    finally:
        os._exit(137)


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(WATCH_PARENT_SECONDS)
        if os.getppid() != parent:  # re-parented: the launcher is gone
            _kill_own_group()


def die_with_parent() -> None:
    """Make this worker end when the process that launched it ends.

    Linux: ``PR_SET_PDEATHSIG`` (the kernel sends SIGKILL the moment the parent dies).
    Everywhere: a daemon thread checks every :data:`WATCH_PARENT_SECONDS` whether this
    process was re-parented, and ends its process group if so — this covers imports,
    set-up and long blocks, where the command pipe is not being read; between blocks the
    worker also exits as soon as the command pipe reads end-of-file.
    Call it first thing in a worker's ``main``. Linux signals when the *thread* that
    started the worker ends, so a launcher must start workers from a thread that outlives
    them (every launcher here waits in the thread that started its worker; doctor's
    probe threads each start and wait for their own).
    """
    expected = os.environ.get(PARENT_PID_VAR)
    parent = int(expected) if expected and expected.isdigit() else os.getppid()
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # it died before the line above took effect
        _kill_own_group()
    threading.Thread(target=_watch_parent, args=(parent,), name="watch-parent",
                     daemon=True).start()
