"""The ops job: time single ops across sizes, backends, devices and loop styles, and
analyse them. What ``devicebench ops`` and :func:`devicebench.api.ops` do."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devicebench.progress import OnProgress, Reporter
from devicebench.schema import envelope


@dataclass(frozen=True)
class OpsOutcome:
    """What :func:`ops` measured and stored: the run, each worker's raw result and the
    analysis (fits, peaks, speed-ups, crossovers, verdicts)."""

    run_id: int
    settings: dict[str, Any]
    results: list[Any]  # devicebench.ops.result.OpsWorkerResult
    analysis: Any  # devicebench.ops.records.OpsAnalysis

    @property
    def problem(self) -> str | None:
        """Why nothing was measured, in one line, or None: every worker failed (the
        table says why), or the workers ran and every point failed or was skipped."""
        if all(r.status != "ok" for r in self.results):
            return "every worker failed; the table above says why"
        points = [pt for r in self.results for pt in r.points]
        if not any(pt.status == "ok" for pt in points):
            failed = sum(pt.status == "error" for pt in points)
            return (f"no op was measured ({failed} of {len(points)} points failed, the "
                    "others skipped); the table above says why")
        return None

    def to_dict(self) -> dict[str, Any]:
        return envelope("ops", {"run_id": self.run_id,
                                "settings": {k: list(v) if isinstance(v, tuple) else v
                                             for k, v in self.settings.items()},
                                **self.analysis.to_dict()})


def ops(*, ops: tuple[str, ...] | None = None, modes: tuple[str, ...] | None = None,
        backends: list[str] | None = None, devices: list[str] | None = None,
        sizes: tuple[int, ...] | str | None = None, threads: int | None = None, chain: int = 16,
        block_seconds: float = 0.005, blocks: int = 5, max_call_seconds: float = 0.25,
        torch_compile: bool = False, timeout: float = 600.0, db: str | Path | None = None,
        on_progress: OnProgress | None = None,
        argv: list[str] | None = None) -> OpsOutcome:
    """Time single ops across sizes, backends, devices and loop styles (one worker
    process per backend and device, one after the other) and analyse them. What
    ``devicebench ops`` does.

    Args:
        sizes: n for n x n tensors: a tuple, or the text ``"2,64,1024"``, ``"2..4096"``
            (powers of 2) or ``"2..4096:4"`` (x4 steps); None: 2..4096.
        on_progress: progress events (:mod:`devicebench.progress`): each worker started
            (k of n). Default: one line each on stderr when it is a terminal, else none.

    Raises:
        devicebench.errors.DevicebenchError: an unknown op, mode, backend or device, a
            bad size list or number.
    """
    from devicebench.env.probe import probe_host_layer
    from devicebench.errors import SpecError
    from devicebench.ops.analysis import analyse
    from devicebench.ops.runner import plan_ops, run_ops, worker_notes
    from devicebench.ops.spec import DEFAULT_SIZES, MODES, OPS, parse_sizes
    from devicebench.store import recorded_run
    from devicebench.store.ops import add_ops_result

    if isinstance(sizes, str):
        sizes = parse_sizes(sizes)  # bad input: before any work
    if timeout <= 0:
        raise SpecError(f"--timeout must be positive, got {timeout:g}", fix="e.g. --timeout 600")
    settings = {"ops": tuple(ops or OPS), "modes": tuple(modes or MODES),
                "sizes": tuple(sizes) if sizes is not None else DEFAULT_SIZES,
                "threads": threads, "chain": chain, "block_seconds": block_seconds,
                "blocks": blocks, "max_call_seconds": max_call_seconds,
                "torch_compile": torch_compile}
    snapshot = probe_host_layer()
    plan = plan_ops(snapshot, backends=backends or None, devices=devices or None, **settings)
    with recorded_run(Path(db) if db else None, snapshot, "ops",
                      {"argv": argv if argv is not None else [], **settings}) as rec:
        run_id = rec.run_id
        report = Reporter("ops", on_progress)
        report.started("planning")
        results = run_ops(plan, timeout=timeout, on_start=lambda config, i, n: report.progress(
                              f"measuring {config.label}: import, then every op, size and mode",
                              done=i, total=n),
                          on_result=lambda r: add_ops_result(rec.store, run_id, r))
        report.finished()
    analysis = analyse(results, plan.accelerators, plan.notes + worker_notes(results))
    return OpsOutcome(run_id, settings, results, analysis)
