"""A one-shot worker: run a module in a child process with a timeout; read its result
from a file.

pyperf's habits: one process per job, the result comes back through a dedicated file
(never stdout, which the workload may print to), the child gets its own process group
so a timeout kills everything it started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devicebench.launch.child import PARENT_PID_VAR
from devicebench.launch.memory import MemoryWatch
from devicebench.launch.process import end_group, exit_status, kill_group, sigkill_detail, tail


@dataclass(frozen=True)
class WorkerOutcome:
    """How a worker process ended.

    Attributes:
        status: ``ok`` (exit 0 and a result), ``error`` (non-zero exit or no result),
            ``crashed`` (killed by a signal), ``oom`` (killed by a SIGKILL we did not
            send), ``timeout`` (killed by us) — :func:`exit_status`'s mapping.
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
    memory: str = ""  # set when a memory limit killed it: the peak seen and the limit

    def describe(self) -> str:
        """One line saying how the process ended, for error findings and tables."""
        if self.memory:
            return self.memory
        if self.status == "timeout":
            return f"timed out after {self.wall_seconds:.0f} s (process group killed)"
        if self.signal_name == "SIGKILL":
            return f"process {sigkill_detail(self.status)}"
        if self.status == "crashed":
            return f"process killed by {self.signal_name} (exit {self.returncode})"
        if self.status == "error":
            return f"process exited with code {self.returncode}"
        return "ok"


def run_worker(
    module: str,
    args: list[str],
    *,
    timeout: float,
    env: dict[str, str] | None = None,
    python: str | None = None,
    memory_limit_bytes: int | None = None,
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
        memory_limit_bytes: kill the group when its resident memory reaches this
            (status ``oom``, :attr:`WorkerOutcome.memory` saying the peak).

    Returns:
        a :class:`WorkerOutcome`; never raises for anything the child does.

    Example:
        >>> r = run_worker("devicebench.backends.probe_worker", ["jax"])  # doctest: +SKIP
        >>> r.status  # doctest: +SKIP
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
                env={**(env if env is not None else os.environ),
                     PARENT_PID_VAR: str(os.getpid())},
                start_new_session=True,
            )
            watch = MemoryWatch(proc.pid, memory_limit_bytes) if memory_limit_bytes else None
            timed_out = False
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                kill_group(proc)
            except BaseException:
                # Ctrl-C in the parent: never leave an orphaned worker behind.
                kill_group(proc)
                raise
            finally:
                end_group(proc.pid)  # whatever the worker's user code started
                if watch is not None:
                    watch.stop()
        wall = time.perf_counter() - start
        result: dict[str, Any] | None = None
        if result_path.exists():
            try:
                loaded = json.loads(result_path.read_text(encoding="utf-8"))
                result = loaded if isinstance(loaded, dict) else None
            except (OSError, json.JSONDecodeError):
                result = None
        rc = proc.returncode
        status, sig_name = exit_status(rc)
        memory = watch.describe() if watch is not None and watch.exceeded else ""
        if memory:
            status = "oom"
        elif timed_out:
            status, sig_name = "timeout", ""
        elif status == "ok" and result is None:
            status = "error"
        return WorkerOutcome(
            status=status,
            result=result,
            returncode=rc,
            signal_name=sig_name,
            stdout_tail=tail(out_path),
            stderr_tail=tail(err_path),
            wall_seconds=wall,
            memory=memory,
        )
