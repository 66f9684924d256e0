"""Why does a TensorFlow process here settle at one of two speeds for its life?

Starts K fresh processes per condition, interleaved (A B C D, A B C D, ...), each
importing TensorFlow, building seed 000's model (SimpleRNN(1) over 50 timesteps,
batch 32) and timing blocks of `train_on_batch` steps after a warm-up. Each process
prints its median step, its spread, the CPU its main thread ended on, its thread count
and its TF thread-pool sizes. If a condition removes the bimodality (processes agree),
it names the cause.

Conditions:
  default      TensorFlow's own pools (intra- and inter-op: one per core)
  threads=1    tf.config.threading intra=1, inter=1 (no pool contention)
  intra2inter1 intra=2, inter=1
  pinned       the process pinned to core 0 before TF starts (no migration)

    python bench/tf_two_speeds.py --k 5 --seconds 3

With --reference it asks the question underneath instead: does the CPU itself run at
two speeds? A fixed pure-Python loop (devicebench.measure.cpuspeed's reference), timed
on its thread's CPU clock, sampled every 0.1 s by one process pinned to each core at
once, then by one core's process alone; then TensorFlow processes timing each block of
steps on the wall clock and on the process's CPU clock (is a slow block slow because it
waited, or because the same work took more CPU time?).

    python bench/tf_two_speeds.py --reference --seconds 15

With --idle: is a vCPU slow because it just woke? The reference loop every 0.1 s on core 0,
the gaps slept (the vCPU halts) or busy-waited (it never idles), alternating 10 s windows,
--k times each.

    python bench/tf_two_speeds.py --idle --k 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from devicebench.measure.cpuspeed import CpuSpeed, reference_seconds  # noqa: E402

CHILD = r"""
import json, os, sys, time
cond, seconds = sys.argv[1], float(sys.argv[2])
if cond == "pinned":
    os.sched_setaffinity(0, {0})
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf
if cond == "threads=1":
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
elif cond == "intra2inter1":
    tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.config.threading.set_inter_op_parallelism_threads(1)
import keras
rng = np.random.default_rng(0)
x = rng.normal(size=(32, 50, 1)).astype("float32")
y = rng.normal(size=(32, 1)).astype("float32")
model = keras.Sequential([keras.Input((50, 1)), keras.layers.SimpleRNN(1),
                          keras.layers.Dense(1)])
model.compile("adam", "mse")
for _ in range(30):
    model.train_on_batch(x, y)
blocks = []
end = time.perf_counter() + seconds
while time.perf_counter() < end:
    t = time.perf_counter()
    for _ in range(20):
        model.train_on_batch(x, y)
    blocks.append((time.perf_counter() - t) / 20)
stat = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
threads = [l for l in open("/proc/self/status") if l.startswith("Threads:")]
print(json.dumps({"cond": cond, "median": sorted(blocks)[len(blocks) // 2],
                  "blocks": len(blocks), "min": min(blocks), "max": max(blocks),
                  "cpu": int(stat[36]), "threads": int(threads[0].split()[1]),
                  "intra": tf.config.threading.get_intra_op_parallelism_threads(),
                  "inter": tf.config.threading.get_inter_op_parallelism_threads(),
                  "load1": os.getloadavg()[0]}))
"""

CONDITIONS = ("default", "threads=1", "intra2inter1", "pinned")

# One process pinned to a core: the reference loop every 0.1 s from a shared start time.
SAMPLER = r"""
import json, os, sys, time
from devicebench.measure.cpuspeed import reference_seconds
cpu, start, seconds = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
os.sched_setaffinity(0, {cpu})
while time.time() < start:
    time.sleep(0.001)
out, k = [], 0
while time.time() < start + seconds:
    out.append(reference_seconds())
    k += 1
    time.sleep(max(0.0, start + 0.1 * k - time.time()))
print(json.dumps(out))
"""

# A TensorFlow process: each block of 20 steps on the wall clock and the process's CPU clock.
CPU_CHILD = CHILD.split("blocks = []")[0] + r"""
pairs = []
end = time.perf_counter() + seconds
while time.perf_counter() < end:
    t, c = time.perf_counter(), time.process_time()
    for _ in range(20):
        model.train_on_batch(x, y)
    pairs.append(((time.perf_counter() - t) / 20, (time.process_time() - c) / 20))
print(json.dumps({"pairs": pairs}))
"""


def _levels(xs: list[float]) -> str:
    sp = CpuSpeed(tuple(xs))
    return (f"{len(xs)} samples, fastest tenth {sp.fastest * 1e3:.3f} ms, slowest tenth "
            f"{sp.slowest * 1e3:.3f} ms ({sp.slowest / sp.fastest:.2f}x), over 1.2x the fastest "
            f"in {sp.slow_share:.0%}")


def _corr(a: list[float], b: list[float]) -> float:
    n = min(len(a), len(b))
    try:
        return statistics.correlation(a[:n], b[:n])
    except statistics.StatisticsError:  # a constant series
        return 0.0


def reference(seconds: float, k: int) -> None:
    """The CPU's own speed per core, together and alone; then TF blocks' wall vs CPU time."""
    import os
    import time

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(Path(__file__).resolve().parents[1]),
                    os.environ.get("PYTHONPATH")) if p))
    cpus = sorted(os.sched_getaffinity(0))[:2]
    for label, which in (("both cores at once", cpus), (f"core {cpus[0]} alone", cpus[:1])):
        start = time.time() + 1.5
        procs = [subprocess.Popen([sys.executable, "-c", SAMPLER, str(c), str(start),
                                   str(seconds)], stdout=subprocess.PIPE, text=True, env=env)
                 for c in which]
        got = [json.loads(p.communicate()[0]) for p in procs]
        print(f"reference loop, {label}:")
        slow = [[x > 1.2 * CpuSpeed(tuple(xs)).fastest for x in xs] for xs in got]
        for c, xs, flags in zip(which, got, slow, strict=True):
            print(f"  core {c}: {_levels(xs)}")
            print("    " + "".join("S" if f else "." for f in flags))
        if len(got) == 2:
            n = min(map(len, slow))
            both = sum(a and b for a, b in zip(slow[0][:n], slow[1][:n], strict=True)) / n
            print(f"  correlation of the two cores' samples {_corr(*got):.2f}; both slow in "
                  f"{both:.0%} of samples (independent phases would give "
                  f"{sum(slow[0][:n]) / n * sum(slow[1][:n]) / n:.0%})")
    for i in range(k):
        p = subprocess.run([sys.executable, "-c", CPU_CHILD, "default", str(seconds / 3)],
                           capture_output=True, text=True, check=False)
        if p.returncode != 0:
            print(f"  tf #{i + 1}: failed")
            continue
        pairs = json.loads(p.stdout.strip().splitlines()[-1])["pairs"]
        wall, cpu = [w for w, _ in pairs], [c for _, c in pairs]
        print(f"tensorflow process #{i + 1}: {len(pairs)} blocks; wall ms/step median "
              f"{statistics.median(wall) * 1e3:.2f} [{min(wall) * 1e3:.2f}-"
              f"{max(wall) * 1e3:.2f}], CPU ms/step median {statistics.median(cpu) * 1e3:.2f};"
              f" correlation of a block's wall and CPU time {_corr(wall, cpu):.2f}", flush=True)


def idle(k: int) -> None:
    """The reference loop with slept vs busy-waited gaps, pinned to one core."""
    import os
    import time

    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    for i in range(k):
        for cond in ("slept gaps", "busy-waited gaps"):
            xs: list[float] = []
            end = time.time() + 10
            while time.time() < end:
                xs.append(reference_seconds())
                nxt = time.time() + 0.1
                if cond == "slept gaps":
                    time.sleep(0.1)
                while time.time() < nxt:
                    pass
            sp = CpuSpeed(tuple(xs))
            print(f"{cond:16s} #{i + 1}: {_levels(xs)}; mean slowdown {sp.mean_slowdown:.0%}",
                  flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=5, help="processes per condition")
    ap.add_argument("--seconds", type=float, default=3.0, help="timed seconds per process")
    ap.add_argument("--conditions", default=",".join(CONDITIONS))
    ap.add_argument("--reference", action="store_true",
                    help="the CPU's own speed per core, and TF blocks' wall vs CPU time")
    ap.add_argument("--idle", action="store_true",
                    help="the reference loop with slept vs busy-waited gaps")
    args = ap.parse_args()
    if args.reference:
        reference(args.seconds, args.k)
        return
    if args.idle:
        idle(args.k)
        return
    conds = [c for c in args.conditions.split(",") if c]
    got: dict[str, list[dict]] = {c: [] for c in conds}
    for i in range(args.k):
        for c in conds:
            p = subprocess.run([sys.executable, "-c", CHILD, c, str(args.seconds)],
                               capture_output=True, text=True, timeout=600, check=False)
            if p.returncode != 0:
                print(f"  {c} #{i + 1}: failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
                continue
            r = json.loads(p.stdout.strip().splitlines()[-1])
            got[c].append(r)
            print(f"  {c:13s} #{i + 1}: median {r['median'] * 1e3:6.2f} ms/step "
                  f"[{r['min'] * 1e3:.2f}-{r['max'] * 1e3:.2f}] over {r['blocks']} blocks; "
                  f"cpu {r['cpu']}, {r['threads']} threads, intra {r['intra']} inter "
                  f"{r['inter']}, load {r['load1']:.1f}", flush=True)
    print()
    for c, rs in got.items():
        if len(rs) < 2:
            continue
        meds = [r["median"] * 1e3 for r in rs]
        mid = statistics.median(meds)
        print(f"{c:13s}: process medians {', '.join(f'{m:.2f}' for m in meds)} ms; "
              f"range {min(meds):.2f}-{max(meds):.2f} ({(max(meds) - min(meds)) / mid:.0%} "
              f"of the median)")


if __name__ == "__main__":
    main()
