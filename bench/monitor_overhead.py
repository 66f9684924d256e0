"""How much does TrainingMonitor slow down the training it measures? Target: <= 1%.

Design (paired, in one process per workload, on one compiled model):

* The model is built, compiled and warmed up once (``--warmup`` pairs of fits, not
  counted: compilation, first-use imports, allocator and cache warm-up).
* Then ``--pairs`` pairs of *segments*; a segment is one ``model.fit`` of a few epochs
  (seed-rnn: 3 epochs of its 219 steps of 32; mnist-cnn: 2 epochs of 16 steps of 256),
  timed as a whole with ``time.perf_counter``, with a fresh ``TrainingMonitor`` (its
  per-fit setup, first-execution block, block syncs, epoch summaries and end line are
  all inside the time) or without one. The order inside a pair flips every pair
  (A B, B A, A B, ...) so drift and warm-up trends hit both arms alike; ``gc.collect()``
  runs before every segment, outside the timing.
* Per pair: ratio = with / without (wall time). The overhead is the median of the
  per-pair ratios minus 1, with its 95% bootstrap CI (``devicebench.measure.stats.
  summarize``). The verdict is read off the CI, not the median: "met" only when the whole
  CI is <= 1%, "NOT met" when the whole CI is above, otherwise "undecided" (too noisy:
  more pairs or a quieter machine). The same figure on process CPU time is printed
  beside it: other processes disturb it less, but it cannot see time lost waiting.

It also prints what the monitor measured of its own code (``monitor_overhead_fraction``:
the Python it runs per block and per epoch, device waits excluded) and the blocks (device
syncs) per segment.

Usage: python bench/monitor_overhead.py [--backend jax] [--pairs N] [--warmup 2]
       [--workloads seed-rnn,mnist-cnn]
Default pairs: seed-rnn 80, mnist-cnn 20 (about 4 minutes for both on a quiet 2-core CPU
VM with JAX).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: this checkout's devicebench
TARGET = 0.01
# workload -> (samples per epoch, epochs per segment, default pairs)
SEGMENTS = {"seed-rnn": (7000, 3, 80), "mnist-cnn": (4096, 2, 20)}


def worker(name: str, pairs: int, warmup: int) -> dict:
    import gc
    import time

    import keras

    from devicebench.keras import TrainingMonitor
    from devicebench.workloads import get_workload

    samples, epochs, _ = SEGMENTS[name]
    wl = get_workload(name)
    data = wl.make_data(wl.default_seed)
    x, y = data.x[:samples], data.y[:samples]
    model = wl.build_model(keras)
    model.compile(optimizer=wl.optimizer(keras), loss=wl.loss, metrics=list(wl.metrics))

    def segment(monitored: bool) -> tuple[float, float, dict | None]:
        cbs = [TrainingMonitor(verbose=0)] if monitored else []
        gc.collect()
        c0, t0 = time.process_time(), time.perf_counter()
        model.fit(x, y, batch_size=wl.batch_size, epochs=epochs, verbose=0, callbacks=cbs)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if not cbs:
            return wall, cpu, None
        s = cbs[0].summary()
        return wall, cpu, {"own": s["monitor_overhead_fraction"], "setup":
                           s["monitor_setup_seconds"], "blocks": len(cbs[0].log.blocks),
                           "nvml": s["nvml"]}

    for _ in range(max(warmup, 1)):
        segment(False)
        segment(True)
    out: dict = {"without": [], "with": [], "cpu_without": [], "cpu_with": [], "own": [],
                 "steps": samples // wl.batch_size * epochs}
    for r in range(pairs):
        for monitored in ((False, True) if r % 2 == 0 else (True, False)):
            wall, cpu, info = segment(monitored)
            arm = "with" if monitored else "without"
            out[arm].append(wall)
            out[f"cpu_{arm}"].append(cpu)
            if info is not None:
                out["own"].append(info)
    return out


def verdict(ci_low: float, ci_high: float) -> str:
    """The target's verdict from the overhead's 95% CI (fractions, 0.01 = 1%)."""
    if ci_high <= TARGET:
        return f"MET (the whole 95% CI is <= {TARGET:.0%})"
    if ci_low > TARGET:
        return f"NOT met (the whole 95% CI is above {TARGET:.0%})"
    return (f"undecided (the 95% CI straddles {TARGET:.0%}: too noisy here; rerun with more "
            "--pairs on a quieter machine)")


def report(name: str, res: dict) -> str:
    from devicebench.measure.stats import summarize

    s = summarize([w / wo for w, wo in zip(res["with"], res["without"], strict=True)])
    c = summarize([w / wo for w, wo in zip(res["cpu_with"], res["cpu_without"], strict=True)])
    lo, hi = s.ci_low - 1, s.ci_high - 1
    seg_ms = sorted(res["without"])[len(res["without"]) // 2] * 1e3
    own = sorted(o["own"] for o in res["own"] if o["own"] is not None)
    blocks = sorted(o["blocks"] for o in res["own"])
    setup = sorted(o["setup"] for o in res["own"])
    return (
        f"{name}: overhead {(s.median - 1) * 100:+.2f}% (median of {s.n} per-pair ratios; "
        f"95% CI {lo * 100:+.2f}% .. {hi * 100:+.2f}%; pairs' IQR {(s.q1 - 1) * 100:+.1f}% .. "
        f"{(s.q3 - 1) * 100:+.1f}%)\n"
        f"  process CPU time (all threads; less sensitive to other processes, blind to "
        f"idle waits): {(c.median - 1) * 100:+.2f}% (95% CI {(c.ci_low - 1) * 100:+.2f}% .. "
        f"{(c.ci_high - 1) * 100:+.2f}%)\n"
        f"  segment {seg_ms:.0f} ms unmonitored for {res['steps']} steps; monitor's own code "
        f"{own[len(own) // 2] * 100:.2f}% (median), {blocks[len(blocks) // 2]} blocks "
        f"(device syncs) and {setup[len(setup) // 2] * 1e3:.1f} ms setup per segment; "
        f"NVML {res['own'][0]['nvml']}\n"
        f"  target <= {TARGET:.0%}: {verdict(lo, hi)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="jax")
    ap.add_argument("--pairs", type=int, default=None,
                    help="pairs per workload (default: seed-rnn 80, mnist-cnn 20)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed pairs first (default 2)")
    ap.add_argument("--workloads", default="seed-rnn,mnist-cnn")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    names = args.workloads.split(",")
    unknown = [n for n in names if n not in SEGMENTS]
    if unknown or (args.pairs is not None and args.pairs < 3):
        print(f"monitor_overhead: unknown workload {unknown} (known: {', '.join(SEGMENTS)})"
              if unknown else "monitor_overhead: --pairs must be >= 3 for a CI",
              file=sys.stderr)
        sys.exit(2)
    if args.worker:
        print(json.dumps(worker(args.worker, args.pairs, args.warmup)))
        return

    env = dict(os.environ, KERAS_BACKEND=args.backend, TF_CPP_MIN_LOG_LEVEL="2")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.pop("DEVICEBENCH_MONITOR", None)
    print(f"backend {args.backend}; paired segments (one fit each), order flipped every "
          f"pair, {args.warmup} warm-up pair(s) not counted; {_load()}")
    for name in names:
        pairs = args.pairs or SEGMENTS[name][2]
        out = subprocess.run([sys.executable, __file__, "--worker", name, "--pairs",
                              str(pairs), "--warmup", str(args.warmup)], env=env,
                             capture_output=True, text=True, check=False)
        if out.returncode != 0:
            print(f"{name}: worker failed\n{out.stderr[-2000:]}")
            continue
        print(report(name, json.loads(out.stdout.strip().splitlines()[-1])), flush=True)


def _load() -> str:
    """The 1-minute load average against the CPU count, taken before the bench starts its
    own workers: is anything else running?"""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return "load average unknown"
    cpus = os.cpu_count() or 1
    note = "" if load < 0.5 * cpus else (" — other processes compete for the CPUs: expect "
                                         "wide CIs")
    return f"load average {load:.1f} on {cpus} CPUs{note}"


if __name__ == "__main__":
    main()
