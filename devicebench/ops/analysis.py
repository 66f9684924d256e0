"""From raw op-sweep results to figures: per-point statistics, the cost model per path,
speed-ups with CIs, crossover sizes, the measured matmul peak. Verdicts are in
:mod:`devicebench.ops.verdict`; renderers only format what these return.
"""

from __future__ import annotations

from typing import Any

from devicebench.measure.stats import ratio_of_medians, summarize
from devicebench.ops.fit import crossover_size, fit_cost_model
from devicebench.ops.records import (
    NOISY_IQR,
    OpAnalysis,
    OpsAnalysis,
    PathStat,
    Peak,
    PointStat,
)
from devicebench.ops.result import OpsPoint, OpsWorkerResult
from devicebench.ops.spec import MODES, OPS, WORK_UNIT, op_flops, op_work, side_for_work
from devicebench.ops.verdict import op_verdict
from devicebench.trials.spec import TF32_SWITCH

__all__ = ["NOISY_IQR", "OpAnalysis", "OpsAnalysis", "PathStat", "Peak", "PointStat",
           "analyse", "measured_peaks"]

PEAK_MODES = ("eager", "compiled")
# A smaller matmul times its dispatch, not the device's arithmetic: no peak from it
# (the main job's dispatch probe times 2x2 and 8x8 matmuls only).
PEAK_MIN_SIZE = 256
MIN_FIT_POINTS = 3  # two points always fit a line exactly: no check left


def _stat(p: OpsPoint, samples: list[float], resolved: bool = True) -> PointStat:
    s = summarize(samples)
    return PointStat(p.size, s.median, s.q1, s.q3, s.ci_low, s.ci_high, tuple(samples),
                     p.calls_per_block, p.first_call_seconds, op_work(p.op, p.size),
                     op_flops(p.op, p.size), resolved)


def _in_graph_per_op(chain: OpsPoint, base: OpsPoint) -> list[float]:
    """Per-op seconds inside the chain: (t_chain − t_compiled) / (N − 1). Blocks of the
    same round are paired (they ran back to back), so drift cancels; with unequal block
    counts the compiled median is subtracted instead."""
    t_chain, t_one = chain.call_seconds, base.call_seconds
    if len(t_chain) == len(t_one):
        return [(c - o) / (chain.chain - 1) for c, o in zip(t_chain, t_one, strict=True)]
    t1 = summarize(t_one).median
    return [(c - t1) / (chain.chain - 1) for c in t_chain]


def _path_points(worker: OpsWorkerResult, op: str, mode: str) -> PathStat:
    path = PathStat(worker.backend, worker.device, mode)
    compiled = {p.size: p for p in worker.points
                if p.op == op and p.mode == "compiled" and p.status == "ok"}
    for p in (q for q in worker.points if q.op == op and q.mode == mode):
        if p.status == "skipped":
            path.skipped.append((p.size, p.reason))
            continue
        if p.status != "ok" or not p.call_seconds:
            path.errors.append((p.size, p.reason))
            continue
        if mode != "in-graph":
            path.points.append(_stat(p, p.call_seconds))
            continue
        base = compiled.get(p.size)
        if base is None or not base.call_seconds or p.chain < 2:
            path.errors.append((p.size, "no compiled call at this size to subtract"))
            continue
        per_op = _in_graph_per_op(p, base)
        stat = _stat(p, per_op)
        path.points.append(_stat(p, per_op, resolved=stat.ci_low > 0))
    path.points.sort(key=lambda q: q.size)
    return path


def measured_peaks(workers: list[OpsWorkerResult]) -> dict[str, Peak]:
    """Per device, the fastest matmul (eager or compiled, any backend, at least
    PEAK_MIN_SIZE square) in FLOP/s."""
    peaks: dict[str, Peak] = {}
    for w in workers:
        for p in w.points:
            if (p.op != "matmul" or p.mode not in PEAK_MODES or p.status != "ok"
                    or p.size < PEAK_MIN_SIZE):
                continue
            s = p.summary()
            if s is None or s.median <= 0:
                continue
            rate = op_flops("matmul", p.size) / s.median
            if w.device not in peaks or rate > peaks[w.device].flops_per_s:
                peaks[w.device] = Peak(rate, f"{w.label} {p.mode}", p.size,
                                       matmul_math(w.backend, w.device, w.info))
    return peaks


def matmul_math(backend: str, device: str, info: dict[str, Any]) -> str:
    """How a backend computes a float32 matmul on ``device``: ``"TF32"`` (10-bit
    mantissa, NVIDIA GPUs from Ampere on) or ``"float32"``; from the settings the worker
    recorded, else the backend's default (jax and TensorFlow use TF32 on those GPUs by
    default, torch does not).

    Example:
        >>> matmul_math("torch", "gpu:0", {})
        'float32'
    """
    if device == "cpu" or backend == "numpy" or device == "mps":
        return "float32"
    if backend == "jax":
        precision = str(info.get("matmul_precision") or "None").lower()
        return "float32" if precision in ("highest", "float32") else "TF32"
    if backend == "torch":
        tf32 = info.get("allow_tf32") or str(info.get("matmul_precision", "")).lower() in (
            "high", "medium")
        return "TF32" if tf32 else "float32"
    if backend == "tensorflow":
        return "TF32" if info.get("tf32", True) else "float32"
    return ""


def math_notes(workers: list[OpsWorkerResult], peaks: dict[str, Peak]) -> list[str]:
    """One note per worker whose float32 matmul math differs from its device's peak's:
    its % of peak is held against other math (e.g. full float32 against a TF32 peak)."""
    notes = []
    for w in workers:
        peak = peaks.get(w.device)
        math = matmul_math(w.backend, w.device, w.info)
        if peak is None or not peak.math or not math or math == peak.math or not w.points:
            continue
        switch = "; ".join(TF32_SWITCH.get(w.backend, ("enable TF32",)))
        how = (f"so it cannot reach 100%; to run TF32 too (a 10-bit mantissa): {switch}"
               if math == "float32" else "so its figures are TF32 math, not float32")
        notes.append(f"{w.label}: float32 matmuls run in {math} math, but the {w.device} "
                     f"peak ({peak.label}) was measured in {peak.math} math: its % peak is "
                     f"held against other math, {how}")
    return notes


def _fit(path: PathStat, op: str, peak: Peak | None) -> None:
    usable = [p for p in path.points if p.usable]
    if len(usable) < MIN_FIT_POINTS:
        return
    path.fit = fit_cost_model([p.work for p in usable], [p.median for p in usable])
    rate = path.fit.rate
    if rate != float("inf"):
        largest = usable[-1]
        flops_rate = rate * largest.flops / largest.work
        if peak is not None:
            path.pct_of_peak = 100.0 * flops_rate / peak.flops_per_s
            if path.pct_of_peak > 100.0 and path.mode != "naive":
                path.fit_above_peak = True
                path.largest_rate = largest.work / largest.median
                path.largest_pct_of_peak = (100.0 * largest.flops / largest.median
                                            / peak.flops_per_s)
        if path.fit.overhead > 0:
            path.dispatch_bound_below = side_for_work(op, path.fit.break_even_work())


def _reference(path: PathStat, paths: list[PathStat]) -> PathStat | None:
    """Accelerator paths: the same backend and mode on the CPU. CPU framework paths:
    numpy (the CPU reference)."""
    if path.device != "cpu":
        key = (path.backend, "cpu", path.mode)
    elif path.backend != "numpy":
        key = ("numpy", "cpu", "eager")
    else:
        return None
    return next((p for p in paths if (p.backend, p.device, p.mode) == key), None)


def _compare(path: PathStat, ref: PathStat) -> None:
    path.ref = ref.label
    for p in path.points:
        r = ref.at(p.size)
        ratio = None
        if r is not None and r.usable and p.usable:
            ratio = ratio_of_medians(r.samples, p.samples)
        path.speedups.append((p.size, ratio))
    path.crossover = crossover_size(path.speedups)


def analyse(workers: list[OpsWorkerResult], accelerators: list[str] | None = None,
            notes: list[str] | None = None) -> OpsAnalysis:
    """Statistics, fits, speed-ups and crossovers for every op and path measured.

    Example:
        >>> analyse([]).ops
        []
    """
    peaks = measured_peaks(workers)
    compiled_with = {w.backend: str(w.info["compiled_with"]) for w in workers
                     if w.info.get("compiled_with")}
    ok_workers = [w for w in workers if w.points]
    present = {p.op for w in ok_workers for p in w.points}
    ops: list[OpAnalysis] = []
    for op in (o for o in OPS if o in present):
        paths = []
        for w in ok_workers:
            for mode in MODES:
                if any(p.op == op and p.mode == mode for p in w.points):
                    path = _path_points(w, op, mode)
                    _fit(path, op, peaks.get(w.device))
                    paths.append(path)
        for path in paths:
            ref = _reference(path, paths)
            if ref is not None:
                _compare(path, ref)
        analysis = OpAnalysis(op, WORK_UNIT[op], paths)
        analysis.verdict = op_verdict(analysis, peaks, accelerators or [], compiled_with)
        ops.append(analysis)
    all_notes = list(notes or []) + math_notes(workers, peaks)
    points = [q for o in ops for p in o.paths for q in p.points if p.mode != "in-graph"]
    noisy = sum(q.noisy for q in points)
    if noisy:
        all_notes.append(
            f"{noisy} of {len(points)} points spread by more than {NOISY_IQR:.0%} of their "
            "median (IQR): the machine was busy or a thread pool stalled; close other work "
            "and rerun, or raise --blocks")
    return OpsAnalysis(ops, peaks, list(accelerators or []), workers, all_notes)
