"""Run a comparison: one worker process per trial, measured in interleaved rounds.

Each trial gets its own process (so every process-global setting is isolated). All the
workers of one workload stay alive and are driven round by round (A B C, A B C, ...),
so drift on a busy machine hits every configuration alike, and the import cost is paid
once per trial.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from devicebench.advisor.equivalence import compare_losses, tolerance_for
from devicebench.trials.environment import worker_env
from devicebench.trials.launcher import WorkerFailure, WorkerProcess
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec

WORKER_MODULE = "devicebench.trials.worker"


@dataclass(frozen=True)
class RunOptions:
    """How long and how precisely to measure.

    Attributes:
        min_rounds: rounds always measured (per trial one timed block per round).
        max_rounds: stop after this many rounds.
        budget_seconds: measuring stops after this long (past min_rounds) even if the CI
            target is not met; the table then says the spread is wide.
        target_ci: stop when every trial's 95% CI half-width is at most this fraction.
        equivalence_steps: steps from the shared initial weights whose losses are compared.
        setup_timeout: seconds for a worker's import, build, compile and warm-up.
        block_timeout: seconds for one round's block(s) of one trial.
        memory_limit_bytes: address-space limit added to each worker after import.
        whole_epoch_seconds: when every trial's epoch is estimated shorter than this,
            blocks are whole epochs (as the user's fit runs them); otherwise every trial
            uses blocks of K steps (0: always K steps).
        max_warmup_seconds: warm-up stops after this long even if not settled.
    """

    min_rounds: int = 5
    max_rounds: int = 30
    budget_seconds: float = 60.0
    target_ci: float = 0.03
    equivalence_steps: int = 50
    setup_timeout: float = 300.0
    block_timeout: float = 120.0
    memory_limit_bytes: int | None = None
    whole_epoch_seconds: float = 3.0
    max_warmup_seconds: float = 60.0


class Worker(Protocol):
    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]: ...
    def close(self, timeout: float = 10) -> None: ...
    def kill(self) -> None: ...


def start_process_worker(spec: TrialSpec) -> Worker:
    return WorkerProcess.start(WORKER_MODULE, env=worker_env(spec))


def default_reference(specs: list[TrialSpec]) -> TrialSpec:
    """TensorFlow, cpu, float32, the workload's defaults if present; else the first spec."""
    for s in specs:
        if (s.backend, s.device, s.precision, s.jit, s.batch_size) == (
            "tensorflow", "cpu", "float32", "auto", None):
            return s
    return specs[0]


Event = Callable[[str, TrialSpec | None, dict[str, Any]], None]


def _fail(result: TrialResult, exc: WorkerFailure) -> None:
    result.status = exc.status
    result.error = exc.message
    result.stderr_tail = exc.stderr_tail[-2000:]
    result.traceback_tail = exc.traceback_tail
    if exc.status == "nan":
        result.nonfinite = True


def run_workload_group(
    specs: list[TrialSpec],
    options: RunOptions = RunOptions(),
    *,
    reference: TrialSpec | None = None,
    start_worker: Callable[[TrialSpec], Worker] = start_process_worker,
    on_event: Event | None = None,
    on_result: Callable[[TrialResult], None] | None = None,
) -> list[TrialResult]:
    """Measure trials of one workload against each other, interleaved.

    Args:
        specs: the trials (same workload); duplicates are measured once.
        reference: the trial others are compared with (default: :func:`default_reference`);
            its initial weights are copied to every other trial.
        start_worker: launcher seam (tests pass a fake); default: a fresh process.
        on_event: progress callback ``(event, spec, info)``.
        on_result: called once per trial as soon as its result is final (store it there).

    Returns:
        one TrialResult per spec, in the given order; a failed trial has its status and
        error set and never stops the others.
    """
    specs = list(dict.fromkeys(specs))
    ref = reference if reference in specs else default_reference(specs)
    order = [ref] + [s for s in specs if s != ref]
    emit = on_event or (lambda *a: None)
    results = {s: TrialResult(s) for s in specs}
    workers: dict[TrialSpec, Worker] = {}
    finished: set[TrialSpec] = set()
    estimates: dict[TrialSpec, float] = {}

    def done(spec: TrialSpec) -> None:
        finished.add(spec)
        if results[spec].status == "nan":
            _set_verdict(results[spec], None)
        w = workers.pop(spec, None)
        if w is not None:
            w.close()
        if on_result is not None:
            on_result(results[spec])
        emit("done", spec, {"status": results[spec].status})

    with tempfile.TemporaryDirectory(prefix="devicebench-weights-") as tmp:
        weights = Path(tmp) / "initial_weights.npz"
        weights_source: TrialSpec | None = None
        try:
            for spec in order:
                emit("setup", spec, {})
                msg: dict[str, Any] = {"cmd": "setup", "spec": spec.to_dict(),
                                       "equivalence_steps": options.equivalence_steps,
                                       "memory_limit_bytes": options.memory_limit_bytes,
                                       "max_warmup_seconds": options.max_warmup_seconds}
                if weights_source is None:
                    msg["weights_out"] = str(weights)
                else:
                    msg["weights_in"] = str(weights)
                try:
                    worker = start_worker(spec)
                    workers[spec] = worker
                    reply = worker.request(msg, timeout=options.setup_timeout)
                except WorkerFailure as exc:
                    _fail(results[spec], exc)
                    done(spec)
                    continue
                if weights_source is None:
                    weights_source = spec
                estimates[spec] = reply.get("epoch_estimate_seconds", float("inf"))
                r = results[spec]
                for key in ("import_seconds", "setup_seconds", "first_step_seconds",
                            "batch_size",
                            "steps_per_epoch", "flops_per_step", "loss_checkpoints",
                            "equivalence_losses", "jit_resolved", "data_note", "placement"):
                    if key in reply:
                        setattr(r, key, reply[key])

            # One way of cutting blocks for every trial compared: whole epochs when all
            # of them are short, else K-step blocks (mixing the two would bias ratios).
            whole = all(estimates.get(s, float("inf")) <= options.whole_epoch_seconds
                        for s in order if s not in finished)
            start = time.monotonic()
            for rnd in range(options.max_rounds):
                live = [s for s in order if s not in finished]
                if not live:
                    break
                for spec in live:
                    try:
                        reply = workers[spec].request(
                            {"cmd": "measure", "whole_epochs": whole},
                            timeout=options.block_timeout)
                    except WorkerFailure as exc:
                        _fail(results[spec], exc)
                        done(spec)
                        continue
                    r = results[spec]
                    if "warmup_seconds" in reply:
                        r.warmup_seconds = reply["warmup_seconds"]
                        r.warmup_blocks = reply["warmup_blocks"]
                    r.steps_per_block = reply.get("steps_per_block", r.steps_per_block)
                    results[spec].block_seconds.extend(reply["block_seconds"])
                    results[spec].block_rounds.extend([rnd] * len(reply["block_seconds"]))
                emit("round", None, {"round": rnd + 1, "max_rounds": options.max_rounds})
                if rnd + 1 < options.min_rounds:
                    continue
                live = [s for s in order if s not in finished]
                precise = all(
                    (st := results[s].step_time) is not None
                    and st.rel_ci_halfwidth <= options.target_ci for s in live)
                if precise or time.monotonic() - start >= options.budget_seconds:
                    break

            for spec in [s for s in order if s not in finished]:
                try:
                    reply = workers[spec].request({"cmd": "finish"}, timeout=60)
                    r = results[spec]
                    r.peak_device_memory_bytes = reply.get("peak_device_memory_bytes")
                    r.peak_rss_bytes = reply.get("peak_rss_bytes")
                    r.final_loss = reply.get("final_loss")
                except WorkerFailure as exc:
                    _fail(results[spec], exc)
                _set_verdict(results[spec], results.get(weights_source) if weights_source
                             else None)
                done(spec)
        finally:
            for w in workers.values():
                w.kill()
                w.close()
    return [results[s] for s in specs]


def _set_verdict(result: TrialResult, reference: TrialResult | None) -> None:
    if result.status == "nan":
        result.loss_verdict, result.loss_detail = "nan", result.error
        return
    if result.status != "ok":
        return
    if reference is None or reference is result:
        result.loss_verdict, result.loss_detail = "reference", "initial weights from this trial"
        return
    changed = result.spec.math_changes(reference.spec)
    if "batch_size" in changed:
        result.loss_verdict = "n/a"
        result.loss_detail = "batch size changes the training itself; losses not comparable"
        return
    rtol = max(tolerance_for(result.spec.precision), tolerance_for(reference.spec.precision))
    verdict, detail = compare_losses(reference.equivalence_losses, result.equivalence_losses,
                                     rtol)
    result.loss_verdict, result.loss_detail = verdict, detail
