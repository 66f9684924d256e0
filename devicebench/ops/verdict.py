"""Plain-words verdicts per op, from the analysed figures (what was measured, why it
matters, what to do). The formatters are :mod:`devicebench.fmt`'s."""

from __future__ import annotations

import math

from devicebench.fmt import fmt_count, fmt_pct, fmt_rate, fmt_ratio, fmt_seconds
from devicebench.measure.stats import ratio_of_medians
from devicebench.ops.records import OpAnalysis, PathStat, Peak
from devicebench.ops.spec import fmt_size, op_elements

PRETTY = {"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch", "numpy": "numpy"}
COMPILED = {"tensorflow": "tf.function", "jax": "jax.jit", "torch": "torch.jit.trace"}
SEED_ORDER = ("tensorflow", "jax", "torch", "numpy")
NAIVE_GAP = 2.0  # naive this many times faster than synced: it timed the dispatch only


def _seed_path(a: OpAnalysis, device: str) -> PathStat | None:
    for backend in SEED_ORDER:
        p = a.path(backend, device, "eager")
        if p is not None and p.points:
            return p
    return None


def _best_rate(a: OpAnalysis, device: str) -> float | None:
    rates = [p.fit.rate for p in a.paths if p.device == device and p.fit is not None
             and math.isfinite(p.fit.rate) and p.mode != "naive" and not p.fit_above_peak]
    return max(rates) if rates else None


def _remedy(a: OpAnalysis, seed: PathStat, compiled_with: dict[str, str]) -> list[str]:
    lines = []
    cw = compiled_with.get(seed.backend) or COMPILED.get(seed.backend, "compiled")
    small = seed.points[0]
    graph = a.path(seed.backend, seed.device, "in-graph")
    per_op = graph.at(small.size) if graph is not None else None
    if per_op is not None and per_op.usable:
        lines.append(f"Put the loop inside a compiled function: chained inside one {cw} call "
                     f"the op costs {fmt_seconds(per_op.median)} at {fmt_size(a.op, small.size)}"
                     f" instead of {fmt_seconds(small.median)} per eager call "
                     f"({small.median / per_op.median:.0f}x less).")
    elif per_op is not None:
        bound = (f"below the timing noise (< {fmt_seconds(per_op.ci_high)})"
                 if per_op.ci_high > 0 else "indistinguishable from zero")
        lines.append(f"Put the loop inside a compiled function: chained inside one {cw} call "
                     f"the op's own cost at {fmt_size(a.op, small.size)} is {bound}, against "
                     f"{fmt_seconds(small.median)} per eager call.")
    compiled = a.path(seed.backend, seed.device, "compiled")
    if compiled and compiled.fit and seed.fit and compiled.fit.overhead > 1.5 * seed.fit.overhead:
        inside = per_op.median if per_op is not None and per_op.usable else 0.0
        saving = seed.fit.overhead - inside
        advice = ""
        if saving > 0:
            k = math.ceil(compiled.fit.overhead / saving)
            advice = f" (it pays off from ~{k} ops per call)"
        lines.append(f"But one {cw} call costs {fmt_seconds(compiled.fit.overhead)} of "
                     f"overhead, {compiled.fit.overhead / seed.fit.overhead:.0f}x an eager "
                     f"call: compile whole loops, never single ops{advice}.")
    return lines


def _naive_gap(a: OpAnalysis) -> str | None:
    """The worst case where the unsynced loop reported a clearly smaller time than the
    synced one (the 95% CI of the ratio above NAIVE_GAP / 1.5), or None."""
    worst: tuple[float, PathStat, int, float, float] | None = None
    for naive in (p for p in a.paths if p.mode == "naive"):
        eager = a.path(naive.backend, naive.device, "eager")
        if eager is None:
            continue
        for q in naive.points:
            e = eager.at(q.size)
            ratio = ratio_of_medians(e.samples, q.samples) if e is not None else None
            if (e is None or ratio is None or ratio.value < NAIVE_GAP
                    or ratio.ci_low < NAIVE_GAP / 1.5):
                continue
            if worst is None or ratio.value > worst[0]:
                worst = (ratio.value, naive, q.size, q.median, e.median)
    if worst is None:
        return None
    gap, naive, size, tn, te = worst
    return (f"{PRETTY[naive.backend]} on {naive.device}: the usual benchmark loop without a sync "
            f"reports {fmt_seconds(tn)} per call at {fmt_size(a.op, size)}, the synced loop "
            f"{fmt_seconds(te)}: it timed the dispatch, not the work ({gap:.0f}x too fast).")


def _largest(a: OpAnalysis, device: str, peaks: dict[str, Peak]) -> str | None:
    candidates = [p for p in a.paths if p.device == device and p.mode in ("eager", "compiled")]
    sizes = [q.size for p in candidates for q in p.points if q.usable]
    if not sizes:
        return None
    big = max(sizes)
    timed = [(p.at(big), p) for p in candidates if p.at(big) is not None]
    point, best = min(((q, p) for q, p in timed if q is not None and q.usable),
                      key=lambda qp: qp[0].median)
    text = (f"At {fmt_size(a.op, big)} on {device} the fastest call is {best.label}: "
            f"{fmt_seconds(point.median)} ({fmt_rate(point.work / point.median, a.unit)}")
    peak = peaks.get(device)
    if peak is not None:
        pct = 100 * point.flops / point.median / peak.flops_per_s
        text += f", {fmt_pct(pct)} of the measured matmul peak"
    return text + ")."


def _accelerator(a: OpAnalysis, device: str) -> str | None:
    best: PathStat | None = None
    for p in a.paths:
        if p.device == device and p.mode in ("eager", "compiled") and p.speedups:
            last = [r for _, r in p.speedups if r is not None]
            if last and (best is None or last[-1].value > _last_ratio(best)):
                best = p
    if best is None:
        return None
    size, ratio = [(s, r) for s, r in best.speedups if r is not None][-1]
    where = (f"at {fmt_size(a.op, size)}: {fmt_ratio(ratio.value)} "
             f"[95% CI {ratio.ci_low:.2g}–{ratio.ci_high:.2g}]")
    if best.crossover is not None:
        return (f"On {device}, {best.label} beats the same path on the CPU from "
                f"{fmt_size(a.op, best.crossover)} on ({where}).")
    return f"On {device}, {best.label} never clearly beats the CPU in this sweep ({where})."


def _last_ratio(p: PathStat) -> float:
    rs = [r.value for _, r in p.speedups if r is not None]
    return rs[-1] if rs else 0.0


def op_verdict(a: OpAnalysis, peaks: dict[str, Peak], accelerators: list[str],
               compiled_with: dict[str, str] | None = None) -> list[str]:
    """Sentences for one op: the seed's cost, where dispatch dominates, the fix, the naive
    loop's error, the large-size winner and the accelerator's crossover."""
    measured_accel = [d for d in accelerators if any(p.device == d for p in a.paths)]
    seed = _seed_path(a, "cpu")  # the CPU's arithmetic decides whether offloading can pay
    if seed is None:
        return [f"{a.op}: nothing was measured on the CPU."]
    small = seed.points[0]
    lines = []
    rate = (seed.fit.rate if seed.fit is not None and math.isfinite(seed.fit.rate)
            and not seed.fit_above_peak else None)
    best = rate or _best_rate(a, seed.device)
    arith = f", of which the arithmetic is ~{fmt_seconds(small.work / best)}" if best else ""
    elsewhere = ""
    for dev in measured_accel:
        acc = a.path(seed.backend, dev, "eager")
        point = acc.at(small.size) if acc is not None else None
        if point is not None:
            elsewhere += f", {fmt_seconds(point.median)} on {dev}"
    lines.append(f"{fmt_size(a.op, small.size)} {a.op}: {fmt_seconds(small.median)} per "
                 f"{PRETTY[seed.backend]} eager call on the CPU{elsewhere}{arith}.")
    if seed.fit is not None and seed.dispatch_bound_below is not None:
        n = seed.dispatch_bound_below
        top = seed.points[-1].size
        over = f"{fmt_seconds(seed.fit.overhead)} of fixed cost per call"
        if n >= top:
            lines.append(f"Over the whole sweep (up to {fmt_size(a.op, top)}) the {over} "
                         "exceeds the CPU's arithmetic: no accelerator can help this call.")
        else:
            elements = fmt_count(op_elements(a.op, max(1, round(n))))
            lines.append(f"Below ~{fmt_size(a.op, n)} ({elements} elements) the {over} "
                         "exceeds the CPU's arithmetic, so no accelerator can help there: "
                         "even an infinitely fast one would at most halve the time.")
    lines += _remedy(a, seed, compiled_with or {})
    naive = _naive_gap(a)
    if naive:
        lines.append(naive)
    for dev in [d for d in ("cpu", *measured_accel)]:
        text = _largest(a, dev, peaks)
        if text:
            lines.append(text)
    for dev in measured_accel:
        text = _accelerator(a, dev)
        if text:
            lines.append(text)
    if not accelerators:
        lines.append("No accelerator on this machine: only CPU paths were compared.")
    return lines
