"""Plan the op sweep for this machine and run one worker process per backend and device.

The parent imports no framework: it expands the choices with the host-layer snapshot
and starts ``python -m devicebench.ops.worker`` with the worker's environment set
(device visibility, thread pools) before any framework import.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from devicebench.env.snapshot import EnvSnapshot
from devicebench.errors import SpecError
from devicebench.launch import run_worker, thread_env, worker_env
from devicebench.ops.result import OpsWorkerResult
from devicebench.ops.spec import OPS_BACKENDS, OpsConfig
from devicebench.trials.plan import check_device, installed_backends, machine_devices

WORKER_MODULE = "devicebench.ops.worker"
RUN_ORDER = ("numpy", "tensorflow", "jax", "torch")  # the reference first


@dataclass
class OpsPlan:
    """The workers to start, and what was left out and why."""

    configs: list[OpsConfig]
    notes: list[str] = field(default_factory=list)
    accelerators: list[str] = field(default_factory=list)


def _usable(backend: str, device: str, apple: bool) -> bool:
    if backend == "numpy":
        return device == "cpu"
    if device == "mps":
        return backend == "torch"
    if apple and device == "gpu:0" and backend == "torch":
        return False  # torch reaches the Apple GPU as "mps"
    return True


def plan_ops(snapshot: EnvSnapshot, *, backends: list[str] | None = None,
             devices: list[str] | None = None, **settings: Any) -> OpsPlan:
    """One :class:`OpsConfig` per usable (backend, device) pair, numpy first.

    A backend that is not installed is skipped with a note; an unknown backend or a
    device this machine does not have is an error.

    Args:
        snapshot: the host-layer snapshot (no framework imported).
        backends: tensorflow, jax, torch, numpy (default: every installed one + numpy).
        devices: cpu, gpu:N, mps (default: every device this machine has).
        settings: the remaining :class:`OpsConfig` fields (ops, modes, sizes, threads, ...).

    Raises:
        SpecError: an unknown backend or device, or a bad setting.
    """
    notes: list[str] = []
    have = ["numpy", *installed_backends(snapshot)]
    chosen = list(dict.fromkeys(backends or have))
    for b in chosen:
        if b not in OPS_BACKENDS:
            raise SpecError(f"unknown backend {b!r}", fix=f"use one of: {', '.join(OPS_BACKENDS)}")
    usable_backends = []
    for b in sorted(chosen, key=RUN_ORDER.index):
        if b in have:
            usable_backends.append(b)
        else:
            notes.append(f"skipped backend {b}: not installed (pip install 'devicebench[{b}]')")
    here = machine_devices(snapshot)
    for d in devices or []:
        check_device(d, snapshot)
    chosen_devices = list(dict.fromkeys(devices or here))
    apple = snapshot.host.os == "Darwin" and snapshot.host.machine == "arm64"
    configs = [OpsConfig(backend=b, device=d, **settings)
               for d in chosen_devices for b in usable_backends if _usable(b, d, apple)]
    accelerators = [d for d in chosen_devices if d != "cpu"]
    if not any(d != "cpu" for d in here):
        notes.append("no accelerator found on this machine (no NVIDIA GPU in nvidia-smi, "
                     "not Apple Silicon): comparing CPU paths only")
    if not configs:
        raise SpecError("nothing to run: no chosen backend can use a chosen device",
                        fix="e.g. --backend numpy --device cpu")
    return OpsPlan(configs, notes, accelerators)


def ops_env(config: OpsConfig, base: dict[str, str] | None = None) -> dict[str, str]:
    """The worker's environment: the trial engine's for frameworks, thread variables
    and no GPU for numpy."""
    if config.backend == "numpy":
        env = dict(os.environ if base is None else base)
        env["CUDA_VISIBLE_DEVICES"] = ""
        env["PYTHONUNBUFFERED"] = "1"
        return thread_env(env, config.threads)
    return worker_env(config.backend, config.device, config.threads, base)


def run_config_process(config: OpsConfig, timeout: float) -> OpsWorkerResult:
    """Run one worker process; a crash or timeout keeps the points it had written."""
    outcome = run_worker(WORKER_MODULE, [json.dumps(config.to_dict())], timeout=timeout,
                         env=ops_env(config))
    if outcome.result is not None:
        try:
            result = OpsWorkerResult.from_dict(outcome.result)
        except (KeyError, TypeError, ValueError):
            result = OpsWorkerResult(config.backend, config.device, status="error",
                                     error="the worker wrote an unreadable result")
    else:
        result = OpsWorkerResult(config.backend, config.device)
    if outcome.status != "ok" and result.status in ("ok", ""):
        tail = outcome.stderr_tail.strip().splitlines()
        last = tail[-1] if tail else ""
        result.status = outcome.status
        result.error = outcome.describe() + (f": {last}" if last else "")
    result.info["wall_seconds"] = outcome.wall_seconds
    return result


def run_ops(plan: OpsPlan, *, timeout: float,
            on_start: Callable[[OpsConfig, int, int], None] | None = None,
            on_result: Callable[[OpsWorkerResult], None] | None = None,
            ) -> list[OpsWorkerResult]:
    """Run the plan's workers one after the other (never at once: they would compete
    for the same cores and skew each other's timings)."""
    results = []
    for i, config in enumerate(plan.configs):
        if on_start is not None:
            on_start(config, i, len(plan.configs))
        result = run_config_process(config, timeout)
        if on_result is not None:
            on_result(result)
        results.append(result)
    return results


def worker_notes(results: list[OpsWorkerResult]) -> list[str]:
    """One line per worker that could not run, or that ran with a caveat."""
    notes = []
    for r in results:
        if r.status == "unavailable":
            notes.append(f"skipped {r.label}: {r.error}")
        elif r.status != "ok":
            kept = sum(1 for p in r.points if p.status == "ok")
            notes.append(f"{r.label}: {r.status}: {r.error} ({kept} points kept)")
        if r.info.get("compiled_note"):
            notes.append(f"{r.label}: {r.info['compiled_note']}")
    return notes
