"""A long-lived worker driven over two dedicated pipes (JSON lines), and the small
protocol the trial engine uses to talk to any worker (a process, a fake in tests, a
replay of recorded results)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Protocol

from devicebench.launch.child import PARENT_PID_VAR
from devicebench.launch.memory import MemoryWatch
from devicebench.launch.process import end_group, exit_status, kill_group, sigkill_detail, tail


class WorkerFailure(Exception):
    """A worker died, timed out or reported an error.

    Attributes:
        status: the trial status it ends with: ``timeout``, ``crashed``, ``oom``,
            ``nan`` or ``error``.
        message: one line saying what happened.
        stderr_tail: the end of the worker's stderr.
        traceback_tail: the end of the worker's traceback, when it sent one.
        peak_rss_bytes: the peak resident memory the parent saw (a memory limit's kill).
    """

    def __init__(self, status: str, message: str, stderr_tail: str = "",
                 traceback_tail: str = "", peak_rss_bytes: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.peak_rss_bytes = peak_rss_bytes
        self.message = message
        self.stderr_tail = stderr_tail
        self.traceback_tail = traceback_tail


class Worker(Protocol):
    """What the trial engine needs from a worker handle.

    Messages and replies are JSON-able dicts; a reply with ``ok: False`` (or a dead or
    silent worker) is raised as :class:`WorkerFailure` by ``receive``/``request``.
    """

    def send(self, message: dict[str, Any]) -> None:
        """Send a command without waiting for its reply."""

    def receive(self, timeout: float) -> dict[str, Any]:
        """The reply to the last command sent, within ``timeout`` seconds."""

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """``send`` then ``receive``."""

    def begin_close(self) -> None:
        """Ask the worker to exit, without waiting."""

    def close(self, timeout: float = 10) -> None:
        """Ask the worker to exit and make sure it has (idempotent)."""

    def kill(self) -> None:
        """End the worker now."""


class WorkerProcess:
    """A long-lived worker driven over two dedicated pipes (JSON lines).

    The parent writes commands to the child's command pipe and reads replies from its
    result pipe; stdout and stderr go to files (workloads print freely). Each request has
    a timeout, after which the child's whole process group is killed. With a memory
    limit, a :class:`MemoryWatch` kills the group when its resident memory reaches it;
    the failure then has status ``oom`` and says the peak seen.

    Example:
        >>> w = WorkerProcess.start("devicebench.trials.worker", env=env)  # doctest: +SKIP
        >>> w.request({"cmd": "ping"}, timeout=30)  # doctest: +SKIP
    """

    def __init__(self, proc: subprocess.Popen[bytes], cmd_w: int, res_r: int,
                 tmpdir: tempfile.TemporaryDirectory[str],
                 memory_limit_bytes: int | None = None) -> None:
        self.proc = proc
        self.memory = (MemoryWatch(proc.pid, memory_limit_bytes)
                       if memory_limit_bytes else None)
        self._cmd = os.fdopen(cmd_w, "w", encoding="utf-8", buffering=1)
        self._res_fd = res_r
        self._buffer = b""
        self._tmpdir = tmpdir
        self.dead: WorkerFailure | None = None

    @classmethod
    def start(cls, module: str, *, env: dict[str, str], args: list[str] | None = None,
              python: str | None = None,
              memory_limit_bytes: int | None = None) -> WorkerProcess:
        """Start ``python -m module CMD_FD RESULT_FD *args`` in its own process group.

        Args:
            memory_limit_bytes: kill the worker when its resident memory (its children's
                included, the framework's own counted) reaches this many bytes.
        """
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        tmpdir = tempfile.TemporaryDirectory(prefix="devicebench-worker-")
        out = open(Path(tmpdir.name) / "stdout", "wb")
        err = open(Path(tmpdir.name) / "stderr", "wb")
        try:
            proc = subprocess.Popen(
                [python or sys.executable, "-m", module, str(cmd_r), str(res_w), *(args or [])],
                stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                env={**env, PARENT_PID_VAR: str(os.getpid())},
                pass_fds=(cmd_r, res_w), start_new_session=True,
            )
        finally:
            out.close()
            err.close()
            os.close(cmd_r)
            os.close(res_w)
        return cls(proc, cmd_w, res_r, tmpdir, memory_limit_bytes)

    @property
    def stderr_tail(self) -> str:
        return tail(Path(self._tmpdir.name) / "stderr")

    def _read_line(self, deadline: float) -> bytes | None:
        """One reply line, or None at EOF (the child died)."""
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            # Short slices: a Ctrl-C the kernel handed to another thread (a progress
            # bar's) is only acted on when the main thread runs Python again.
            ready, _, _ = select.select([self._res_fd], [], [], min(remaining, 0.25))
            if not ready:
                continue
            chunk = os.read(self._res_fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send a command and wait for its reply.

        Raises:
            WorkerFailure: with status ``timeout`` (group killed), ``crashed`` (signal),
                ``oom`` (MemoryError or SIGKILL) or ``error`` (the worker's exception).
        """
        self.send(message)
        return self.receive(timeout)

    def send(self, message: dict[str, Any]) -> None:
        """Send a command without waiting (its reply is read by :meth:`receive`)."""
        if self.dead is not None:
            raise self.dead
        try:
            self._cmd.write(json.dumps(message) + "\n")
            self._cmd.flush()
        except BrokenPipeError:
            pass  # the child is gone: receive() reads EOF and says how it died

    def receive(self, timeout: float) -> dict[str, Any]:
        """Wait up to ``timeout`` seconds for the reply to the last command sent.

        Raises:
            WorkerFailure: as :meth:`request`.
        """
        if self.dead is not None:
            raise self.dead
        start = time.monotonic()
        try:
            line = self._read_line(start + timeout)
        except TimeoutError:
            self.kill()
            self.dead = WorkerFailure(
                "timeout", f"no reply within {timeout:.0f} s; process group killed",
                self.stderr_tail)
            raise self.dead from None
        except BaseException:
            self.kill()
            raise
        if line is None:
            self.dead = self._death()
            raise self.dead
        reply = json.loads(line)
        if not reply.get("ok", False):
            status = reply.get("status", "error")
            failure = WorkerFailure(status, reply.get("error", "worker error"),
                                    self.stderr_tail, reply.get("traceback", ""))
            if reply.get("fatal", True):
                self.dead = failure
                self.kill()
            raise failure
        return reply

    def _death(self) -> WorkerFailure:
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            rc = self.proc.returncode
        text = self.stderr_tail
        if self.memory is not None and self.memory.exceeded:
            return WorkerFailure("oom", self.memory.describe(), text,
                                 peak_rss_bytes=self.memory.peak_bytes)
        status, name = exit_status(rc)
        if name == "SIGKILL":
            return WorkerFailure(status, f"worker {sigkill_detail(status)}", text)
        if name:
            return WorkerFailure(status, f"worker killed by {name}", text)
        if "MemoryError" in text or "out of memory" in text.lower():
            return WorkerFailure("oom", f"worker ran out of memory (exit {rc})", text)
        return WorkerFailure("crashed", f"worker exited unexpectedly with code {rc}", text)

    def kill(self) -> None:
        """Kill the worker's process group (SIGTERM, then SIGKILL)."""
        if self.memory is not None:
            self.memory.stop()
        if self.proc.poll() is None:
            kill_group(self.proc)
        end_group(self.proc.pid)  # what the workload started, the leader gone

    def begin_close(self) -> None:
        """Ask the worker to exit (end of its commands) without waiting for it."""
        try:
            self._cmd.close()
        except OSError:
            pass

    def close(self, timeout: float = 10) -> None:
        """Ask the worker to exit, then make sure it has (idempotent)."""
        self.begin_close()
        if self._res_fd < 0:
            return
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        end_group(self.proc.pid)  # every trial end, not only a timeout or Ctrl-C
        if self.memory is not None:
            self.memory.stop()
        os.close(self._res_fd)
        self._res_fd = -1
        self._tmpdir.cleanup()
