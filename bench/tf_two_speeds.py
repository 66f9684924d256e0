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
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=5, help="processes per condition")
    ap.add_argument("--seconds", type=float, default=3.0, help="timed seconds per process")
    ap.add_argument("--conditions", default=",".join(CONDITIONS))
    args = ap.parse_args()
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
