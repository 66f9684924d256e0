"""Op sweep worker: ``python -m devicebench.ops.worker RESULT_FILE CONFIG_JSON``.

Started by :mod:`devicebench.ops.runner` with its environment (device visibility,
thread pools) already set. It writes one JSON :class:`OpsWorkerResult` to RESULT_FILE —
rewritten after every op, so a worker killed by the timeout still leaves what it
measured — and never reports through stdout.

The protocol per op:

1. calibration, smallest size first, every mode: the first call (tracing / compilation
   included, reported apart); one synced call → calls per block K so that a block lasts
   ``block_seconds``; one warm-up block of K calls → K refined;
2. ``blocks`` rounds, each timing one block of K calls of every size and mode in turn,
   so drift and bursts of load from other processes hit all points alike; a block that
   runs 20x past its expected time (a stalled thread pool) is cut short, its per-call
   rate kept. Every block
   ends with a device sync inside the timed region — except ``naive`` blocks, which time
   the loop exactly as seed 003 did (no sync), their queue drained after the timer stops.

A point whose single call would exceed ``max_call_seconds`` (predicted from the
previous size) is skipped with the reason, and so are the larger sizes of that mode.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devicebench.errors import exception_line
from devicebench.launch.child import die_with_parent, exit_now
from devicebench.ops.kernels import BaseKernels, DeviceUnavailable, load_kernels
from devicebench.ops.result import OpsPoint, OpsWorkerResult
from devicebench.ops.spec import OpsConfig, modes_for, op_work, ops_for

MAX_CALLS_PER_BLOCK = 1_000_000
IN_GRAPH_CAP_SHARE = 0.2  # in-graph chains stop at a fifth of the per-call limit
# ... and once the compiled call costs this many times its smallest-size cost: the
# dispatch is then under ~5% of a call, and each chain only adds compile time.
IN_GRAPH_MAX_GROWTH = 20.0
BLOCK_FLOOR = 0.002  # seconds: the expected block time never counts as shorter
CHECK_SECONDS = 20e-6  # expected work between clock reads (<0.5% overhead)
STALL_FACTOR = 20.0  # a block this many times longer than expected is cut short


def time_block(call: Callable[[], Any], k: int, sync: Callable[[Any], None] | None,
               limit: float | None = None, check_every: int = 64) -> tuple[float, Any]:
    """Seconds for ``k`` calls, the sync (when given) inside the timed region.

    With ``limit``, a block still running after ``limit`` seconds (a thread pool stalled
    by another process) stops early and its time is scaled to ``k`` calls: the same
    per-call rate, without spending seconds on one outlier. The clock is read every
    ``check_every`` calls only.
    """
    out = None
    done = 0
    start = time.perf_counter()
    if limit is None:
        for _ in range(k):
            out = call()
        done = k
    else:
        while done < k:
            n = min(check_every, k - done)
            for _ in range(n):
                out = call()
            done += n
            if done < k and time.perf_counter() - start > limit:
                break
    if sync is not None:
        sync(out)
    return (time.perf_counter() - start) * k / done, out


@dataclass
class _Path:
    mode: str
    size: int
    call: Callable[[], Any]
    chain: int
    first: float
    per_call: float  # the calibration estimate
    k: int = 1
    n_blocks: int = 0
    samples: list[float] = field(default_factory=list)
    error: str = ""


def _stall_guard(k: int, per_call: float) -> tuple[float | None, int]:
    """(limit, check_every) for a block of ``k`` calls expected to take ``per_call`` each."""
    if k <= 1:
        return None, 1
    limit = STALL_FACTOR * max(k * per_call, BLOCK_FLOOR)
    return limit, max(1, min(64, int(CHECK_SECONDS / max(per_call, 1e-9))))


def _calls_for(seconds_per_call: float, target: float) -> int:
    return max(1, min(MAX_CALLS_PER_BLOCK, math.ceil(target / max(seconds_per_call, 1e-9))))


def _build(kernels: BaseKernels, op: str, mode: str, inputs: tuple[Any, ...],
           chain: int) -> tuple[Callable[[], Any], int]:
    if mode == "naive":
        return kernels.naive(op, inputs), 1
    if mode == "eager":
        f = kernels.op(op)
        return (lambda: f(*inputs)), 1
    length = chain if mode == "in-graph" else 1
    g = kernels.compiled(op, length)
    return (lambda: g(*inputs)), length


def _skip_reason(config: OpsConfig, mode: str, guess: float) -> str | None:
    cap = config.max_call_seconds
    limit = cap * IN_GRAPH_CAP_SHARE if mode == "in-graph" else cap
    if guess <= limit:
        return None
    if not math.isfinite(guess):
        return "a smaller size was already over the time limit"
    if mode == "in-graph":
        return (f"a chain of {config.chain} would take ~{guess:.2g} s (in-graph stops at "
                f"{limit:g} s: the call overhead no longer matters)")
    return f"one call would take ~{guess:.2g} s, over the {cap:g} s limit"


def calibrate_size(kernels: BaseKernels, config: OpsConfig, op: str, n: int,
                   modes: tuple[str, ...], predicted: dict[str, float],
                   smallest_compiled: float | None = None,
                   ) -> tuple[list[_Path], list[OpsPoint], set[str]]:
    """Build every mode of ``op`` at size ``n``: first call (compilation), one synced
    call, a warm-up block; choose calls per block and blocks. Returns the paths to time,
    the points skipped or failed, and the modes to skip at every larger size (those
    predicted over the time limit; a mode skipped on a noisy estimate is retried).

    ``smallest_compiled``: the compiled call's cost at the smallest size, which ends the
    in-graph chains once the compiled call has grown :data:`IN_GRAPH_MAX_GROWTH` times."""
    points: list[OpsPoint] = []
    paths: list[_Path] = []
    stop: set[str] = set()
    inputs = kernels.inputs(op, n)
    for mode in modes:
        guess = predicted.get(mode, 0.0)
        base = next((p for p in paths if p.mode == "compiled"), None)
        if mode == "in-graph" and base is not None and guess == 0.0:  # no history yet
            guess = config.chain * base.per_call
        why = _skip_reason(config, mode, guess)
        if why is not None:
            stop.add(mode)
        elif (mode == "in-graph" and base is not None and smallest_compiled
                and base.per_call > IN_GRAPH_MAX_GROWTH * smallest_compiled):
            why = (f"the compiled call already costs {base.per_call / smallest_compiled:.0f}x "
                   "its smallest-size cost: dispatch is under 5% of it")
        if why is not None:
            points.append(OpsPoint(op, mode, n, status="skipped", reason=why))
            continue
        try:
            call, chain = _build(kernels, op, mode, inputs, config.chain)
            first, _ = time_block(call, 1, kernels.sync)
            one, _ = time_block(call, 1, kernels.sync)
            path = _Path(mode, n, call, chain, first, one)
            path.k = _calls_for(one, config.block_seconds)
            if path.k > 1:  # a warm-up block; longer calls are warm after two
                warm, _ = time_block(call, path.k, kernels.sync, *_stall_guard(path.k, one))
                path.per_call = warm / path.k
                path.k = _calls_for(path.per_call, config.block_seconds)
            if one > config.max_call_seconds:
                path.n_blocks = 2
            elif path.k == 1:
                path.n_blocks = min(3, config.blocks)
            else:
                path.n_blocks = config.blocks
            paths.append(path)
        except Exception as exc:  # one failing op must not end the sweep
            points.append(OpsPoint(op, mode, n, status="error",
                                   reason=f"{type(exc).__name__}: {exc}"[:500]))
    return paths, points, stop


def predict_call(history: list[tuple[float, float]], work: float) -> float:
    """Seconds per call at ``work`` from the last two (work, seconds) points of a mode:
    the last time plus the marginal cost per unit of work (never negative). With fewer
    than two points there is no prediction (0)."""
    if len(history) < 2:
        return 0.0
    (w1, t1), (w2, t2) = history[-2], history[-1]
    slope = max(0.0, (t2 - t1) / (w2 - w1)) if w2 > w1 else 0.0
    return t2 + slope * max(0.0, work - w2)


def _time_rounds(kernels: BaseKernels, paths: list[_Path]) -> None:
    """Round r times block r of every path (every size and mode) in turn, so a burst of
    load from another process hits one block of many points, not all blocks of one."""
    for round_ in range(max((p.n_blocks for p in paths), default=0)):
        for p in paths:
            if round_ >= p.n_blocks or p.error:
                continue
            naive = p.mode == "naive"
            try:
                seconds, out = time_block(p.call, p.k, None if naive else kernels.sync,
                                          *_stall_guard(p.k, p.per_call))
                if naive:
                    kernels.sync(out)  # drain the queue outside the timer
            except Exception as exc:
                p.error = f"{type(exc).__name__}: {exc}"[:500]
                continue
            p.samples.append(seconds)


def sweep_op(kernels: BaseKernels, config: OpsConfig, op: str,
             modes: tuple[str, ...]) -> list[OpsPoint]:
    """Every size and mode of ``op``: calibrated smallest size first (larger sizes of a
    mode whose call would exceed the per-call limit are skipped), then timed in rounds."""
    points: list[OpsPoint] = []
    paths: list[_Path] = []
    history: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
    skipped: set[str] = set()
    with kernels.scope():
        for n in sorted(config.sizes):
            work = op_work(op, n)
            predicted = {m: predict_call(h, work) for m, h in history.items()}
            predicted.update({m: math.inf for m in skipped})
            first = history.get("compiled", [])
            new_paths, new_points, stop = calibrate_size(
                kernels, config, op, n, modes, predicted, first[0][1] if first else None)
            paths += new_paths
            points += new_points
            for p in new_paths:
                history[p.mode].append((work, p.per_call))
            skipped |= stop
        _time_rounds(kernels, paths)
    for p in paths:
        if p.error:
            points.append(OpsPoint(op, p.mode, p.size, status="error", reason=p.error))
        else:
            points.append(OpsPoint(op, p.mode, p.size, calls_per_block=p.k, chain=p.chain,
                                   block_seconds=tuple(p.samples),
                                   first_call_seconds=p.first))
    order = {m: i for i, m in enumerate(modes)}
    return sorted(points, key=lambda q: (q.size, order[q.mode]))


def _write(path: Path, result: OpsWorkerResult) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result.to_dict()), encoding="utf-8")
    os.replace(tmp, path)


def run_config(config: OpsConfig, result_path: Path | None = None) -> OpsWorkerResult:
    """Run one worker's sweep in this process (tests call it inline)."""
    start = time.perf_counter()
    result = OpsWorkerResult(config.backend, config.device)
    try:
        kernels = load_kernels(config)
    except DeviceUnavailable as exc:
        result.status, result.error = "unavailable", str(exc)
        return result
    except ImportError as exc:
        result.status = "unavailable"
        result.error = f"{config.backend} cannot be imported: {exc}"
        return result
    modes = modes_for(config.backend, config.modes)
    if "in-graph" in modes and "compiled" not in modes:  # its per-op cost needs it
        modes = tuple(m for m in modes if m != "in-graph") + ("compiled", "in-graph")
    result.info = dict(kernels.info)
    result.info.update({"modes": list(modes), "chain": config.chain,
                        "threads": config.threads or "all cores",
                        "cpu_count": os.cpu_count()})
    for op in ops_for(config.backend, config.ops):
        try:
            result.points.extend(sweep_op(kernels, config, op, modes))
        except Exception as exc:  # e.g. out of memory inside a timed block
            reason = f"{type(exc).__name__}: {exc}"[:500]
            result.points.extend(OpsPoint(op, m, min(config.sizes), status="error",
                                          reason=reason) for m in modes)
        if result_path is not None:
            _write(result_path, result)
    result.info["sweep_seconds"] = time.perf_counter() - start
    return result


def main(argv: list[str]) -> int:
    die_with_parent()
    result_path = Path(argv[1])
    config = OpsConfig.from_dict(json.loads(argv[2]))
    try:
        result = run_config(config, result_path)
    except Exception as exc:
        result = OpsWorkerResult(config.backend, config.device, status="error",
                                 error=exception_line(exc),
                                 info={"traceback": traceback.format_exc()[-3000:]})
        _write(result_path, result)
        return 1
    _write(result_path, result)
    return 0


if __name__ == "__main__":
    exit_now(main(sys.argv))
