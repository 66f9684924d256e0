"""Run a worker in a child process with a timeout; read its result from a file.

pyperf's habits: one process per job, the result comes back through a dedicated file
(never stdout, which the workload may print to), the child gets its own process group
so a timeout kills everything it started.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TAIL_CHARS = 4000


@dataclass(frozen=True)
class WorkerOutcome:
    """How a worker process ended.

    Attributes:
        status: ``ok`` (exit 0 and a result), ``error`` (non-zero exit or no result),
            ``crashed`` (killed by a signal), ``timeout`` (killed by us).
        result: the JSON object the worker wrote, or None.
        returncode: the process exit code (negative: the signal number).
        signal_name: e.g. ``SIGABRT`` when crashed.
        stdout_tail, stderr_tail: the last characters the child printed.
        wall_seconds: time from start to exit.
    """

    status: str
    result: dict[str, Any] | None
    returncode: int | None
    signal_name: str
    stdout_tail: str
    stderr_tail: str
    wall_seconds: float

    def describe(self) -> str:
        """One line saying how the process ended, for error findings and tables."""
        if self.status == "timeout":
            return f"timed out after {self.wall_seconds:.0f} s (process group killed)"
        if self.status == "crashed":
            return f"process killed by {self.signal_name} (exit {self.returncode})"
        if self.status == "error":
            return f"process exited with code {self.returncode}"
        return "ok"


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - TAIL_CHARS))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
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


def run_worker(
    module: str,
    args: list[str],
    *,
    timeout: float,
    env: dict[str, str] | None = None,
    python: str | None = None,
) -> WorkerOutcome:
    """Run ``python -m module RESULT_FILE *args`` in its own process group.

    The worker must write one JSON object to ``RESULT_FILE`` (its first argument).

    Args:
        module: the worker's module, e.g. ``"devicebench.backends.probe_worker"``.
        args: further arguments.
        timeout: seconds before the whole process group is killed.
        env: the child's full environment (default: a copy of ours). Set process-global
            variables (KERAS_BACKEND, CUDA_VISIBLE_DEVICES, ...) here: they take effect
            before any framework import in the child.
        python: interpreter to use (default: this one).

    Returns:
        a :class:`WorkerOutcome`; never raises for anything the child does.

    Example:
        >>> run_worker("devicebench.backends.probe_worker", ["jax"], timeout=60).status
        'ok'
    """
    with tempfile.TemporaryDirectory(prefix="devicebench-") as tmp:
        tmpdir = Path(tmp)
        result_path = tmpdir / "result.json"
        out_path, err_path = tmpdir / "stdout", tmpdir / "stderr"
        cmd = [python or sys.executable, "-m", module, str(result_path), *args]
        start = time.perf_counter()
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=env if env is not None else dict(os.environ),
                start_new_session=True,
            )
            timed_out = False
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc)
            except BaseException:
                # Ctrl-C in the parent: never leave an orphaned worker behind.
                _kill_group(proc)
                raise
        wall = time.perf_counter() - start
        result: dict[str, Any] | None = None
        if result_path.exists():
            try:
                loaded = json.loads(result_path.read_text(encoding="utf-8"))
                result = loaded if isinstance(loaded, dict) else None
            except (OSError, json.JSONDecodeError):
                result = None
        rc = proc.returncode
        sig_name = ""
        if timed_out:
            status = "timeout"
        elif rc is not None and rc < 0:
            status = "crashed"
            try:
                sig_name = signal.Signals(-rc).name
            except ValueError:
                sig_name = f"signal {-rc}"
        elif rc == 0 and result is not None:
            status = "ok"
        else:
            status = "error"
        return WorkerOutcome(
            status=status,
            result=result,
            returncode=rc,
            signal_name=sig_name,
            stdout_tail=_tail(out_path),
            stderr_tail=_tail(err_path),
            wall_seconds=wall,
        )


class WorkerFailure(Exception):
    """A persistent worker died, timed out or reported an error."""

    def __init__(self, status: str, message: str, stderr_tail: str = "",
                 traceback_tail: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.stderr_tail = stderr_tail
        self.traceback_tail = traceback_tail


class WorkerProcess:
    """A long-lived worker driven over two dedicated pipes (JSON lines).

    The parent writes commands to the child's command pipe and reads replies from its
    result pipe; stdout and stderr go to files (workloads print freely). Each request has
    a timeout, after which the child's whole process group is killed.

    Example:
        >>> w = WorkerProcess.start("devicebench.trials.worker", env=env)
        >>> w.request({"cmd": "ping"}, timeout=30)
    """

    def __init__(self, proc: subprocess.Popen[bytes], cmd_w: int, res_r: int,
                 tmpdir: tempfile.TemporaryDirectory[str]) -> None:
        self.proc = proc
        self._cmd = os.fdopen(cmd_w, "w", encoding="utf-8", buffering=1)
        self._res_fd = res_r
        self._buffer = b""
        self._tmpdir = tmpdir
        self.dead: WorkerFailure | None = None

    @classmethod
    def start(cls, module: str, *, env: dict[str, str], args: list[str] | None = None,
              python: str | None = None) -> WorkerProcess:
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        tmpdir = tempfile.TemporaryDirectory(prefix="devicebench-worker-")
        out = open(Path(tmpdir.name) / "stdout", "wb")
        err = open(Path(tmpdir.name) / "stderr", "wb")
        try:
            proc = subprocess.Popen(
                [python or sys.executable, "-m", module, str(cmd_r), str(res_w), *(args or [])],
                stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                pass_fds=(cmd_r, res_w), start_new_session=True,
            )
        finally:
            out.close()
            err.close()
            os.close(cmd_r)
            os.close(res_w)
        return cls(proc, cmd_w, res_r, tmpdir)

    @property
    def stderr_tail(self) -> str:
        return _tail(Path(self._tmpdir.name) / "stderr")

    def _read_line(self, deadline: float) -> bytes | None:
        """One reply line, or None at EOF (the child died)."""
        import select

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
        tail = self.stderr_tail
        if rc is not None and rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = f"signal {-rc}"
            # SIGKILL we did not send: the kernel's OOM killer is the usual sender.
            status = "oom" if name == "SIGKILL" else "crashed"
            return WorkerFailure(status, f"worker killed by {name}", tail)
        if "MemoryError" in tail or "out of memory" in tail.lower():
            return WorkerFailure("oom", f"worker ran out of memory (exit {rc})", tail)
        return WorkerFailure("crashed", f"worker exited unexpectedly with code {rc}", tail)

    def kill(self) -> None:
        if self.proc.poll() is None:
            _kill_group(self.proc)

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
        os.close(self._res_fd)
        self._res_fd = -1
        self._tmpdir.cleanup()
