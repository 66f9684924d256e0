"""Worker processes: start, pipe protocol, timeouts, kill, exit status, environment.

Everything that owns a child process lives here, so the layers that start workers
(env/probe.py, workloads/loader.py, ops/runner.py, trials/) depend on this package and
not on each other.

- :func:`run_worker` — a one-shot worker whose result comes back in a file.
- :class:`WorkerProcess` — a long-lived worker driven over two pipes; the engine sees it
  through the small :class:`Worker` protocol (a replay launcher can serve the same).
- :func:`worker_env` — the environment for any (backend, device, threads).
- :func:`exit_status` — how a process ended, from its return code (the one mapping).
- :mod:`devicebench.launch.child` — the worker side of the pipe protocol.
"""

from devicebench.launch.environment import THREAD_VARS, thread_env, worker_env
from devicebench.launch.memory import MemoryWatch
from devicebench.launch.oneshot import WorkerOutcome, run_worker
from devicebench.launch.process import exit_status, signal_name
from devicebench.launch.worker import Worker, WorkerFailure, WorkerProcess

__all__ = [
    "THREAD_VARS",
    "MemoryWatch",
    "Worker",
    "WorkerFailure",
    "WorkerOutcome",
    "WorkerProcess",
    "exit_status",
    "run_worker",
    "signal_name",
    "thread_env",
    "worker_env",
]
