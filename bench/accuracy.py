"""Do devicebench's epoch and whole-fit figures match what a user's own fit shows?

For each workload, the seed script as its author wrote it (bench/seed000_keras3.py:
SimpleRNN with its 2,000-sample validation; bench/seed001_keras3.py: the MNIST CNN, no
validation) is timed by a callback (each epoch, validation included) and by a stopwatch
around the whole ``fit``; devicebench measures the same workload (run_workload_group,
then fit_estimate for the same number of epochs) in two worker processes, as its verdicts
are measured, so each figure's 95% CI holds the process spread (--processes 1: one).
Pairs alternate: devicebench, plain, devicebench, plain, ... Two ratios per pair:
  epoch: devicebench's epoch (training + validation) / the callback's steady epoch
         (median of epochs 2..E);
  fit:   devicebench's "a fit of E epochs takes about T" / the stopwatch.
Prints each pair, then per workload and figure the median ratio over the pairs with its
range, and in how many pairs the plain figure fell inside devicebench's 95% CI. Target:
within 10% (median ratio in 0.90-1.10).

Short pairs: E epochs (default 6 for seed-rnn, seed 001's 5 for mnist-cnn) instead of
seed 000's 20; mnist-cnn on its first --mnist-samples samples (default 12,000, both sides
alike; 0: all 60,000).

Usage: python bench/accuracy.py [PAIRS] [--workloads seed-rnn,mnist-cnn]
           [--backend tensorflow] [--rounds 5] [--mnist-samples 12000] [--verbose 0]
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
from devicebench.trials.epochs import fit_estimate
from devicebench.trials.spec import TrialSpec

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TARGET = 0.10
SCRIPTS = {"seed-rnn": "seed000_keras3.py", "mnist-cnn": "seed001_keras3.py"}
DEFAULT_EPOCHS = {"seed-rnn": 6, "mnist-cnn": 5}


def _env(backend: str, samples: int) -> dict[str, str]:
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2",
               CUDA_VISIBLE_DEVICES="")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    if samples:
        env["DEVICEBENCH_BENCH_SAMPLES"] = str(samples)
    return env


def devicebench_figures(workload: str, backend: str, epochs: int, rounds: int,
                        samples: int, processes: int = 2) -> tuple:
    """(epoch seconds, whole-fit seconds) as devicebench reports them, the fit's two
    parts (the one-time cost and the mean epoch), the epoch's and the fit's 95% CIs, and
    the processes that measured them."""
    ref = workload
    if workload == "mnist-cnn" and samples:
        os.environ["DEVICEBENCH_BENCH_SAMPLES"] = str(samples)  # the worker inherits it
        ref = f"{HERE / 'accuracy_workloads.py'}:mnist_subset"
    (result,) = run_workload_group([TrialSpec(ref, backend=backend)],
                                   RunOptions(min_rounds=rounds, max_rounds=rounds,
                                              budget_seconds=600),
                                   replicate=processes > 1)
    est = fit_estimate(result, epochs)
    if result.status != "ok" or est is None or est.fit_s is None:
        sys.exit(f"devicebench trial failed: {result.status}: {result.error}")
    return (est.epoch_s, est.fit_s, est.one_time_s, est.mean_epoch[0], est.epoch_ci,
            est.fit_ci, result.processes)


def plain_figures(workload: str, backend: str, epochs: int, samples: int,
                  verbose: int) -> tuple[float, float, float, float]:
    """(steady epoch seconds by the callback, whole fit by the stopwatch), and the fit's
    parts as devicebench splits it: the first epoch's excess over the steady median,
    and the mean of the other epochs."""
    cmd = [sys.executable, str(HERE / SCRIPTS[workload]), str(epochs), "--verbose", str(verbose)]
    if workload == "mnist-cnn" and samples:
        cmd += ["--samples", str(samples)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=_env(backend, samples),
                         check=True)
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    first, rest = doc["epoch_seconds"][0], doc["epoch_seconds"][1:]
    steady = statistics.median(rest)
    return steady, doc["fit_seconds"], first - steady, statistics.fmean(rest)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pairs", nargs="?", type=int, default=5)
    ap.add_argument("--workloads", default="seed-rnn,mnist-cnn")
    ap.add_argument("--backend", default="tensorflow")
    ap.add_argument("--epochs", type=int, default=0, help="0: 6 for seed-rnn, 5 for mnist")
    ap.add_argument("--rounds", type=int, default=5, help="devicebench's timed rounds")
    ap.add_argument("--mnist-samples", type=int, default=12_000)
    ap.add_argument("--verbose", type=int, default=0, help="the plain fit's verbose")
    ap.add_argument("--processes", type=int, default=2, choices=(1, 2),
                    help="devicebench's worker processes per measurement (default 2)")
    args = ap.parse_args()
    summary = []
    for workload in args.workloads.split(","):
        epochs = args.epochs or DEFAULT_EPOCHS[workload]
        ratios: dict[str, list[float]] = {"epoch": [], "fit": []}
        inside: dict[str, int] = {"epoch": 0, "fit": 0}
        epochs_seen: dict[str, list[float]] = {"devicebench": [], "plain": []}
        for i in range(args.pairs):
            ours = devicebench_figures(workload, args.backend, epochs, args.rounds,
                                       args.mnist_samples, args.processes)
            plain = plain_figures(workload, args.backend, epochs, args.mnist_samples,
                                  args.verbose)
            ratios["epoch"].append(ours[0] / plain[0])
            ratios["fit"].append(ours[1] / plain[1])
            epochs_seen["devicebench"].append(ours[0])
            epochs_seen["plain"].append(plain[0])
            (elo, ehi), (flo, fhi) = ours[4], ours[5]
            inside["epoch"] += elo <= plain[0] <= ehi
            inside["fit"] += flo <= plain[1] <= fhi
            print(f"{workload} pair {i + 1}: epoch devicebench {ours[0]:.3f} s, callback "
                  f"{plain[0]:.3f} s (ratio {ours[0] / plain[0]:.3f}); fit of {epochs} "
                  f"epochs devicebench {ours[1]:.2f} s, stopwatch {plain[1]:.2f} s "
                  f"(ratio {ours[1] / plain[1]:.3f}; one-time {ours[2]:.2f} s vs the plain "
                  f"first epoch's excess {plain[2]:.2f} s, mean epoch {ours[3]:.3f} s vs "
                  f"{plain[3]:.3f} s; devicebench's 95% CIs over {ours[6]} processes: epoch "
                  f"[{elo:.3f}-{ehi:.3f}], fit [{flo:.2f}-{fhi:.2f}])", flush=True)
        for side, xs in epochs_seen.items():  # how much each side moves between pairs
            mid = statistics.median(xs)
            summary.append(f"{workload} {side} epoch over the pairs: {min(xs):.3f}-"
                           f"{max(xs):.3f} s (range {(max(xs) - min(xs)) / mid:.0%} of the "
                           f"median {mid:.3f} s)")
        for figure, rs in ratios.items():
            med = statistics.median(rs)
            verdict = "within" if abs(med - 1) <= TARGET else "OUTSIDE"
            summary.append(f"{workload} {args.backend}/cpu {figure}: devicebench/plain ratio "
                           f"median {med:.3f} (range {min(rs):.3f}-{max(rs):.3f}, {len(rs)} "
                           f"interleaved pairs): {verdict} the {TARGET:.0%} target; the plain "
                           f"figure inside devicebench's 95% CI in {inside[figure]} of "
                           f"{len(rs)}")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
