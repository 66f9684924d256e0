"""How much does TrainingMonitor slow down the training it measures?

One process per workload (seed-rnn: millisecond steps, the worst case; mnist-cnn) on the
chosen Keras backend. The model is compiled and warmed up once (a fit without and one
with the monitor, so compilation and the monitor's first-use imports are paid before
timing); then rounds alternate fit-without / fit-with (the order flips each round), each
fit timed as a whole with `time.perf_counter`. Per round: with / without. Prints the
median overhead (ratio - 1) with its 95% bootstrap CI over rounds
(`devicebench.measure.stats.paired_ratio`), the range over rounds, and the overhead the
monitor measured in its own code. Target: <= 1%.

Usage: python bench/monitor_overhead.py [--backend jax] [--rounds 7] [--epochs 2]
       [--workloads seed-rnn,mnist-cnn]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Samples per fit: seed-rnn's whole training set (219 steps of 32); a slice of MNIST
# (8 steps of 256) so a CPU run stays short.
SAMPLES = {"seed-rnn": 7000, "mnist-cnn": 2048}


def worker(name: str, rounds: int, epochs: int) -> dict:
    import keras

    from devicebench.keras import TrainingMonitor
    from devicebench.workloads import get_workload

    wl = get_workload(name)
    data = wl.make_data(wl.default_seed)
    x, y = data.x[:SAMPLES[name]], data.y[:SAMPLES[name]]
    model = wl.build_model(keras)
    model.compile(optimizer=wl.optimizer(keras), loss=wl.loss, metrics=list(wl.metrics))

    def run(monitored: bool) -> tuple[float, float | None]:
        cbs = [TrainingMonitor(verbose=0, nvml="auto")] if monitored else []
        t0 = time.perf_counter()
        model.fit(x, y, batch_size=wl.batch_size, epochs=epochs, verbose=0, callbacks=cbs)
        wall = time.perf_counter() - t0
        return wall, (cbs[0].summary()["monitor_overhead_fraction"] if cbs else None)

    run(False)
    run(True)
    without: dict[int, float] = {}
    with_: dict[int, float] = {}
    self_measured = []
    for r in range(rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        for monitored in order:
            wall, own = run(monitored)
            if monitored:
                with_[r] = wall
                self_measured.append(own)
            else:
                without[r] = wall
    return {"without": without, "with": with_, "self_measured": self_measured,
            "steps": SAMPLES[name] // wl.batch_size * epochs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="jax")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workloads", default="seed-rnn,mnist-cnn")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.rounds, args.epochs)))
        return

    from devicebench.measure.stats import paired_ratio

    env = dict(os.environ, KERAS_BACKEND=args.backend, TF_CPP_MIN_LOG_LEVEL="2")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.pop("DEVICEBENCH_MONITOR", None)
    print(f"backend {args.backend}, {args.rounds} interleaved rounds, {args.epochs} epochs "
          "per fit")
    for name in args.workloads.split(","):
        out = subprocess.run([sys.executable, __file__, "--worker", name, "--rounds",
                              str(args.rounds), "--epochs", str(args.epochs)], env=env,
                             capture_output=True, text=True, check=False)
        if out.returncode != 0:
            print(f"{name}: worker failed\n{out.stderr[-2000:]}")
            continue
        res = json.loads(out.stdout.strip().splitlines()[-1])
        without = {int(k): v for k, v in res["without"].items()}
        with_ = {int(k): v for k, v in res["with"].items()}
        # paired_ratio gives baseline/candidate: with/without = slowdown.
        ratio = paired_ratio(without, with_)
        if ratio is None:
            print(f"{name}: no rounds")
            continue
        slow = 1 / ratio.value - 1
        lo, hi = 1 / ratio.ci_high - 1, 1 / ratio.ci_low - 1
        per_round = sorted(with_[r] / without[r] - 1 for r in without)
        own = sorted(res["self_measured"])
        fit_ms = sorted(without.values())[len(without) // 2] * 1e3
        verdict = ("met" if hi <= 0.01 else "met at the median" if slow <= 0.01
                   else "NOT met")
        print(f"{name}: overhead {slow * 100:+.2f}% (95% CI {lo * 100:+.2f}% .. "
              f"{hi * 100:+.2f}%; rounds {per_round[0] * 100:+.1f}% .. "
              f"{per_round[-1] * 100:+.1f}%); fit {fit_ms:.0f} ms for {res['steps']} steps; "
              f"monitor's own code {own[len(own) // 2] * 100:.2f}% (median); "
              f"target <= 1%: {verdict}")


if __name__ == "__main__":
    main()
