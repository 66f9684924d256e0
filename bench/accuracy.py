"""Does devicebench's epoch estimate match what plain ``model.fit`` takes?

seed-rnn on TensorFlow/CPU: devicebench's estimated epoch time (median step time x
steps per epoch) vs seed 000's script (fixed for Keras 3) timed with plain ``model.fit``
(median of epochs 2..N), interleaved: devicebench, plain, devicebench, plain, ...
Prints each pair, the ratios and their median. Target: within 10%.

Usage: python bench/accuracy.py [PAIRS] [--backend tensorflow]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from devicebench.trials.engine import RunOptions, run_workload_group
from devicebench.trials.spec import TrialSpec

HERE = Path(__file__).resolve().parent


def devicebench_epoch(backend: str) -> float:
    (result,) = run_workload_group([TrialSpec("seed-rnn", backend=backend)],
                                   RunOptions(min_rounds=8, max_rounds=8, budget_seconds=60))
    if result.status != "ok" or result.epoch_seconds is None:
        sys.exit(f"devicebench trial failed: {result.status}: {result.error}")
    return result.epoch_seconds


def plain_fit_epoch(backend: str, epochs: int) -> float:
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2",
               CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, str(HERE / "seed000_keras3.py"), str(epochs)],
                         capture_output=True, text=True, env=env, check=True)
    times = json.loads(out.stdout.strip().splitlines()[-1])["epoch_seconds"]
    return statistics.median(times[1:])  # epoch 1 includes tracing


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pairs", nargs="?", type=int, default=3)
    ap.add_argument("--backend", default="tensorflow")
    ap.add_argument("--epochs", type=int, default=6)
    args = ap.parse_args()
    ratios = []
    for i in range(args.pairs):
        ours = devicebench_epoch(args.backend)
        plain = plain_fit_epoch(args.backend, args.epochs)
        ratios.append(ours / plain)
        print(f"pair {i + 1}: devicebench {ours:.3f} s/epoch, plain fit {plain:.3f} s/epoch, "
              f"ratio {ours / plain:.3f}", flush=True)
    med = statistics.median(ratios)
    verdict = "within" if abs(med - 1) <= 0.10 else "OUTSIDE"
    print(f"seed-rnn {args.backend}/cpu: devicebench/plain-fit epoch ratio median {med:.3f} "
          f"(range {min(ratios):.3f}-{max(ratios):.3f}, {len(ratios)} interleaved pairs): "
          f"{verdict} the 10% target")


if __name__ == "__main__":
    main()
