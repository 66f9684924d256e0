"""The figures of a monitored fit (a run ``devicebench monitor`` or
``TrainingMonitor(db=...)`` stored): step time over the fit's steps, throughput and
memory per block, the first execution (compilation inside) apart, the steady figure
and how the fit ended.

The steady figure, its CI and the compilation estimate are the monitor's own (kept in
the run's summary when the fit ended); a fit that was killed has no summary, and then
the steady step time is the plain median of its stored full blocks, said so in a note.

Example:
    >>> from devicebench.store import ResultStore
    >>> with ResultStore.open(":memory:") as store:
    ...     monitor_figures  # doctest: +ELLIPSIS
    <function monitor_figures at ...>
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from devicebench.store.runs import StoredRun, monitor_digest

FIRST_KIND = "first"  # devicebench.monitor.core.FIRST (a higher layer: not imported)


@dataclass(frozen=True)
class MonitorPoint:
    """One timed block: where it ends in the fit, and its figures."""

    step: int  # global step at the block's end (1-based count of steps so far)
    epoch: int
    steps: int
    ms_per_step: float
    samples_per_s: float | None
    memory_peak_bytes: int | None
    gpu_busy: float | None
    loss: float | None
    kind: str


@dataclass
class MonitorFigures:
    """Everything a report shows of one monitored fit."""

    run_id: int
    script: str
    argv: list[str]
    fit: int | None
    ended: str
    end_detail: str
    backend: str
    model: str
    params: int | None
    batch_size: int | None
    steps: int
    train_seconds: float
    steady_step_s: float | None
    steady_ci_s: tuple[float, float] | None
    steady_blocks: int
    samples_per_s: float | None
    first_step_s: float | None  # the first execution alone (tracing, compilation)
    compile_s: float | None  # the first epoch beyond its steps at the steady rate
    peak_memory_bytes: int | None
    memory_label: str
    gpu_busy: float | None
    spread_caution: str
    overhead_fraction: float | None
    points: list[MonitorPoint] = field(default_factory=list)  # every block but the first
    epochs: list[dict[str, Any]] = field(default_factory=list)
    alerts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def monitor_figures(run: StoredRun, blocks: list[dict[str, Any]]) -> MonitorFigures:
    """The figures of monitored run ``run`` from its stored ``blocks``."""
    o = run.options
    summary = run.summary or {}
    digest = monitor_digest(o, len(blocks), sum(int(b["steps"]) for b in blocks))
    batch = summary.get("batch_size") or o.get("batch_size")
    points: list[MonitorPoint] = []
    first: float | None = None
    done = 0
    for b in blocks:
        done += int(b["steps"])
        if b["kind"] == FIRST_KIND:
            first = float(b["seconds"])
            continue
        per = float(b["seconds"]) / int(b["steps"]) if b["steps"] else 0.0
        points.append(MonitorPoint(
            step=done, epoch=int(b["epoch"]), steps=int(b["steps"]), ms_per_step=per * 1e3,
            samples_per_s=(batch / per) if batch and per > 0 else None,
            memory_peak_bytes=b.get("memory_peak"), gpu_busy=b.get("gpu_busy"),
            loss=b.get("loss"), kind=str(b["kind"])))
    notes: list[str] = []
    ended = digest["ended"]
    if run.finished_at is None and ended == "running":
        ended = "never ended (the process was killed, or is still training)"
    steady = summary.get("steady_step_seconds")
    ci = summary.get("steady_ci")
    n_steady = int(summary.get("steady_blocks") or 0)
    if not summary:
        full = [p.ms_per_step / 1e3 for p in points if p.kind == "block"]
        steady = statistics.median(full) if full else None
        n_steady = len(full)
        notes.append("no summary was stored with the fit: the steady step time is the "
                     "median of its stored full blocks, without a CI")
    if digest["ended"] not in ("completed", "running", "unknown"):
        notes.append(f"the fit ended: {ended}"
                     + (f" ({o.get('end_detail')})" if o.get("end_detail") else ""))
    peaks = [p.memory_peak_bytes for p in points if p.memory_peak_bytes is not None]
    train = sum(float(b["seconds"]) for b in blocks)
    return MonitorFigures(
        run_id=run.id, script=digest["script"], argv=digest["argv"], fit=digest["fit"],
        ended=ended, end_detail=str(o.get("end_detail") or ""),
        backend=str(o.get("backend") or ""), model=str(o.get("model") or ""),
        params=o.get("params"), batch_size=batch, steps=digest["steps"],
        train_seconds=float(summary.get("train_seconds") or train),
        steady_step_s=steady,
        steady_ci_s=(float(ci[0]), float(ci[1])) if ci else None, steady_blocks=n_steady,
        samples_per_s=summary.get("samples_per_s") or (
            batch / steady if batch and steady else None),
        first_step_s=first, compile_s=summary.get("compile_seconds"),
        peak_memory_bytes=summary.get("peak_memory_bytes") or (max(peaks) if peaks else None),
        memory_label=str(summary.get("memory_label") or o.get("memory_label") or "unknown"),
        gpu_busy=summary.get("gpu_busy"), spread_caution=str(summary.get("spread_caution") or ""),
        overhead_fraction=summary.get("monitor_overhead_fraction"), points=points,
        epochs=list(summary.get("epochs") or []),
        alerts=[str(a.get("message", "")) for a in summary.get("alerts") or []], notes=notes)
