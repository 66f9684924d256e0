"""What the trial engine is told (:class:`RunOptions`), how it starts a worker and picks
the reference, and how a trial's record ends (a failure, a loss verdict): the parts of
:mod:`devicebench.trials.engine` that hold no live workers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from devicebench.errors import strip_ansi
from devicebench.launch import Worker, WorkerFailure, WorkerProcess, worker_env
from devicebench.trials.blocks import WHOLE_EPOCH_SECONDS
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec

WORKER_MODULE = "devicebench.trials.worker"


@dataclass(frozen=True)
class RunOptions:
    """How long and how precisely to measure.

    Attributes:
        min_rounds: rounds always measured (per trial one timed block per round).
        max_rounds: stop after this many rounds.
        budget_seconds: measuring stops (past min_rounds) when another round like the
            last would end after this long, even if the CI target is not met; the table
            then says the spread is wide.
        target_ci: stop when every trial's 95% CI half-width is at most this fraction.
        equivalence_steps: steps from the shared initial weights whose losses are compared.
        setup_timeout: seconds for a worker's build, compile, equivalence steps and
            warm-up (the user's ``--timeout``).
        import_timeout: seconds for a worker's framework import, apart: workers import
            side by side, and on a loaded machine an import alone can take a minute.
        block_timeout: seconds for one round's block(s) of one trial.
        memory_limit_bytes: resident-memory limit of each worker (its framework and
            children included): the parent kills it there and records ``oom``.
        whole_epoch_seconds: when every live trial's epoch is estimated shorter than
            this, blocks are whole epochs (as the user's fit runs them); otherwise every
            trial uses blocks of K steps (0: always K steps). Decided at each measure.
        max_warmup_seconds: warm-up stops after this long even if not settled.
    """

    min_rounds: int = 5
    max_rounds: int = 30
    budget_seconds: float = 60.0
    target_ci: float = 0.03
    equivalence_steps: int = 50
    setup_timeout: float = 300.0
    import_timeout: float = 600.0
    block_timeout: float = 120.0
    memory_limit_bytes: int | None = None
    whole_epoch_seconds: float = WHOLE_EPOCH_SECONDS
    max_warmup_seconds: float = 60.0


def start_process_worker(spec: TrialSpec, memory_limit_bytes: int | None = None) -> Worker:
    """A fresh worker process with ``spec``'s process-global settings in its environment;
    killed (status ``oom``) if its resident memory reaches ``memory_limit_bytes``."""
    return WorkerProcess.start(WORKER_MODULE, env=worker_env(spec.backend, spec.device,
                                                             spec.threads),
                               memory_limit_bytes=memory_limit_bytes)


def default_reference(specs: list[TrialSpec]) -> TrialSpec:
    """TensorFlow, cpu, float32, the workload's defaults if present; else the first spec."""
    for s in specs:
        if (s.backend, s.device, s.precision, s.jit, s.batch_size) == (
            "tensorflow", "cpu", "float32", "auto", None):
            return s
    return specs[0]


Event = Callable[[str, TrialSpec | None, dict[str, Any]], None]
# (reference, candidate) -> (verdict, detail): do the two train the same model? The
# caller's policy (tolerances per precision): devicebench.advisor.equivalence.loss_check.
LossCheck = Callable[[TrialResult, TrialResult], tuple[str, str]]
NO_LOSS_CHECK = "losses not compared (no loss check was given)"


def _failed(result: TrialResult, exc: WorkerFailure) -> TrialResult:
    """``result`` ended by ``exc``: its status, error and tails (a new record)."""
    changes: dict[str, Any] = {
        "status": exc.status,
        "error": strip_ansi(exc.message),  # stored text: no terminal colour codes
        "stderr_tail": strip_ansi(exc.stderr_tail)[-2000:],
        "traceback_tail": strip_ansi(exc.traceback_tail),
    }
    if exc.peak_rss_bytes is not None:
        changes["peak_rss_bytes"] = exc.peak_rss_bytes
    if exc.status == "nan":
        changes["nonfinite"] = True
    return replace(result, **changes)


def _with_verdict(result: TrialResult, reference: TrialResult | None,
                  loss_check: LossCheck | None) -> TrialResult:
    """``result`` with its loss verdict against ``reference`` by ``loss_check`` (a new
    record)."""
    if result.status == "nan":
        return replace(result, loss_verdict="nan", loss_detail=result.error)
    if result.status != "ok":
        return result
    if reference is None or reference.spec == result.spec:
        return replace(result, loss_verdict="reference",
                       loss_detail="initial weights from this trial")
    changed = result.spec.math_changes(reference.spec)
    if "batch_size" in changed:
        return replace(result, loss_verdict="n/a", loss_detail="batch size changes the "
                       "training itself; losses not comparable")
    if loss_check is None:
        return replace(result, loss_verdict="n/a", loss_detail=NO_LOSS_CHECK)
    verdict, detail = loss_check(reference, result)
    return replace(result, loss_verdict=verdict, loss_detail=detail)
