"""How much does TrainingMonitor slow down the training it measures? Target: <= 1%.

Two paired designs, each in one process per workload on one compiled model (JAX by
default), with and without the monitor, interleaved:

``--design epochs`` (default): adjacent epochs of ONE long ``fit``. On this VM per-pair
  ratios spread +-10-12% (IQR) whether a pair is two 80 ms epochs or two 1.6 s fits, so a
  CI near +-0.5% takes thousands of pairs, and they must be cheap: a pair is two
  neighbouring epochs, the monitor on in one and off in the other (the order flips every
  pair), the shortest unit a user's training has. A thin switch
  forwards Keras' hooks to a real ``TrainingMonitor`` only in its "on" epochs (its "off"
  cost, one call per step that returns at once, is paid by both arms). Each epoch is
  timed from the end of the last to the end of this one (a timer after every other
  callback), so the monitor's epoch hooks, its blocks' device syncs and its memory reads
  are inside the time. The first ``--warmup`` epochs (compilation; the monitor's first
  blocks growing to their size, one sync each) are not counted: they are per-fit costs,
  which ``--design fits`` includes.
``--design fits``: pairs of whole ``model.fit`` calls as a user runs them (seed-rnn: seed
  000's own 20 epochs, about 1.6 s with JAX here; mnist-cnn: 2 epochs of 16 steps of
  256, about 4 s), with a fresh monitor (per-fit setup, first blocks, end line all inside
  the time) or without; ``gc.collect()`` before each, outside the timing.

Per pair: ratio = with / without (wall time). The overhead is the median of the per-pair
ratios minus 1, with its 95% bootstrap CI (``devicebench.measure.stats.summarize``). The
verdict is read off the CI, not the median: "MET" only when the whole CI is <= 1%, "NOT
met" when the whole CI is above, otherwise "undecided" (too noisy: more pairs or a
quieter machine). The same figure on process CPU time is printed beside it: other
processes disturb it less, but it cannot see time lost waiting.

It also prints what the monitor measured of its own code (``monitor_overhead_fraction``:
the Python it runs per block and per epoch, device waits excluded) and its blocks (device
syncs).

Usage: python bench/monitor_overhead.py [--design epochs|fits] [--backend jax]
       [--pairs N] [--warmup N] [--workloads seed-rnn,mnist-cnn]
Defaults, epochs: seed-rnn 1500 pairs of ~80 ms epochs (each epoch varies +-25% here, so
a CI of +-0.5% takes that many), mnist-cnn 200 pairs of ~1 s epochs (about 11 minutes
for both on a quiet 2-core VM with JAX); fits: 40 and 20 pairs (about 5 minutes).
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
# workload -> (samples per epoch, epochs per segment, default pairs): --design fits
SEGMENTS = {"seed-rnn": (7000, 20, 40), "mnist-cnn": (4096, 2, 20)}
# workload -> (samples per epoch, default pairs): --design epochs
EPOCHS = {"seed-rnn": (7000, 1500), "mnist-cnn": (2048, 200)}


def _compiled(name: str, samples: int):
    """The workload, its model built and compiled as the workload does, and its first
    ``samples`` training samples."""
    import keras

    from devicebench.workloads import get_workload

    wl = get_workload(name)
    data = wl.make_data(wl.default_seed)
    model = wl.build_model(keras)
    model.compile(optimizer=wl.optimizer(keras), loss=wl.loss, metrics=list(wl.metrics))
    return wl, model, data.x[:samples], data.y[:samples]


def epochs_worker(name: str, pairs: int, warmup: int) -> dict:
    """Adjacent epochs of one fit, the monitor on in one of each pair (see the module
    doc). Returns per-epoch wall and CPU seconds of each arm, in pair order."""
    import time

    import keras

    from devicebench.monitor import TrainingMonitor

    samples, _ = EPOCHS[name]
    wl, model, x, y = _compiled(name, samples)
    warmup = max(warmup, 2)
    # epoch -> monitor on? Warm-up epochs on (its blocks grow there); then pairs.
    on = [True] * warmup
    for r in range(pairs):
        on += [False, True] if r % 2 == 0 else [True, False]
    monitor = TrainingMonitor(verbose=0)
    # seconds inside the switch's hooks, monitor on / off; "waits": device syncs inside them
    hooks: dict = {True: 0.0, False: 0.0, "waits": 0.0}

    class Switch(keras.callbacks.Callback):
        """Forwards Keras' hooks to the monitor in its "on" epochs only."""

        def __init__(self) -> None:
            super().__init__()
            self.active = True

        def set_model(self, model):
            super().set_model(model)
            monitor.set_model(model)

        def set_params(self, params):
            super().set_params(params)
            monitor.set_params(params)

        def on_train_begin(self, logs=None):
            monitor.on_train_begin(logs)
            probe = monitor._probe  # the device sync at a block's end: the steps' own time

            def timed_probe():
                t = time.perf_counter()
                try:
                    return probe()
                finally:
                    hooks["waits"] += time.perf_counter() - t

            monitor._probe = timed_probe

        def on_train_end(self, logs=None):
            monitor.on_train_end(logs)

        # Time inside the hooks, per arm: the monitor's whole added work in an "on"
        # epoch (its blocks close at the epoch end Keras syncs anyway), low in noise.
        def on_epoch_begin(self, epoch, logs=None):
            t = time.perf_counter()
            self.active = on[epoch]
            if self.active:
                monitor.on_epoch_begin(epoch, logs)
            hooks[self.active] += time.perf_counter() - t

        def on_train_batch_begin(self, batch, logs=None):
            t = time.perf_counter()
            if self.active:
                monitor.on_train_batch_begin(batch, logs)
            hooks[self.active] += time.perf_counter() - t

        def on_epoch_end(self, epoch, logs=None):
            t = time.perf_counter()
            if self.active:
                monitor.on_epoch_end(epoch, logs)
            hooks[self.active] += time.perf_counter() - t

    class Timer(keras.callbacks.Callback):
        """Last in the list: each epoch from the end of the last to the end of this one."""

        def __init__(self) -> None:
            super().__init__()
            self.wall: list[float] = []
            self.cpu: list[float] = []

        def on_train_begin(self, logs=None):
            self.t, self.c = time.perf_counter(), time.process_time()

        def on_epoch_end(self, epoch, logs=None):
            float(logs["loss"])  # a host float already: the device is synced
            t, c = time.perf_counter(), time.process_time()
            self.wall.append(t - self.t)
            self.cpu.append(c - self.c)
            self.t, self.c = t, c

    timer = Timer()
    model.fit(x, y, batch_size=wl.batch_size, epochs=len(on), verbose=0, shuffle=True,
              callbacks=[Switch(), timer])
    out: dict = {"without": [], "with": [], "cpu_without": [], "cpu_with": [],
                 "steps": -(-samples // wl.batch_size), "unit": "epoch"}
    for i in range(warmup, len(on)):
        arm = "with" if on[i] else "without"
        out[arm].append(timer.wall[i])
        out[f"cpu_{arm}"].append(timer.cpu[i])
    n_on, n_off = sum(on), len(on) - sum(on)
    out["hooks_ms_per_epoch"] = {"with": (hooks[True] - hooks["waits"]) / n_on * 1e3,
                                 "without": hooks[False] / n_off * 1e3,
                                 "waits": hooks["waits"] / n_on * 1e3}
    s = monitor.summary()
    counted_on = sum(on[warmup:])
    blocks = sum(1 for b in monitor.log.blocks if b.epoch >= warmup)
    out["own"] = [{"own": s["monitor_overhead_fraction"], "setup": s["monitor_setup_seconds"],
                   "blocks": round(blocks / max(counted_on, 1), 2), "nvml": s["nvml"]}]
    return out


def fits_worker(name: str, pairs: int, warmup: int) -> dict:
    import gc
    import time

    from devicebench.monitor import TrainingMonitor

    samples, epochs, _ = SEGMENTS[name]
    wl, model, x, y = _compiled(name, samples)

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
                 "steps": samples // wl.batch_size * epochs, "unit": "segment"}
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
    unit = res["unit"]
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
        f"  {unit} {seg_ms:.0f} ms unmonitored for {res['steps']} steps; monitor's own code "
        f"{own[len(own) // 2] * 100:.2f}% (median), {blocks[len(blocks) // 2]} blocks "
        f"(device syncs) per {unit} and {setup[len(setup) // 2] * 1e3:.1f} ms setup per fit; "
        f"NVML {res['own'][0]['nvml']}\n"
        + _hooks_line(res, seg_ms) +
        f"  target <= {TARGET:.0%}: {verdict(lo, hi)}")


def _hooks_line(res: dict, epoch_ms: float) -> str:
    """--design epochs: the time measured inside Keras' hooks in each arm (the switch
    around the monitor), per epoch and as a share of the unmonitored epoch."""
    h = res.get("hooks_ms_per_epoch")
    if not h:
        return ""
    added = h["with"] - h["without"]
    waits = (f" (device syncs at its blocks' ends, {h['waits']:.2f} ms per epoch, left out: "
             "the steps' own time)" if h["waits"] >= 0.005 else "")
    return (f"  inside the hooks: {h['with']:.3f} ms per epoch with the monitor{waits}, "
            f"{h['without']:.3f} ms without: the monitor's own work adds {added:.3f} ms "
            f"= {added / epoch_ms * 100:.2f}% of an epoch\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--design", choices=("epochs", "fits"), default="epochs")
    ap.add_argument("--backend", default="jax")
    ap.add_argument("--pairs", type=int, default=None,
                    help="pairs per workload (default: epochs: seed-rnn 1500, mnist-cnn 200; "
                    "fits: 40, 20)")
    ap.add_argument("--warmup", type=int, default=2,
                    help="untimed epochs (epochs) or pairs of fits (fits) first (default 2)")
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
        run = epochs_worker if args.design == "epochs" else fits_worker
        print(json.dumps(run(args.worker, args.pairs, args.warmup)))
        return

    env = dict(os.environ, KERAS_BACKEND=args.backend, TF_CPP_MIN_LOG_LEVEL="2")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.pop("DEVICEBENCH_MONITOR", None)
    what = ("adjacent epochs of one fit, the monitor on in one of each pair"
            if args.design == "epochs" else "paired segments (one fit each)")
    unit = "epochs" if args.design == "epochs" else "pairs of fits"
    print(f"backend {args.backend}; {what}, order flipped every pair, {args.warmup} warm-up "
          f"{unit} not counted; {_load()}")
    for name in names:
        pairs = args.pairs or (EPOCHS[name][1] if args.design == "epochs"
                               else SEGMENTS[name][2])
        out = subprocess.run([sys.executable, __file__, "--worker", name, "--design",
                              args.design, "--pairs", str(pairs), "--warmup",
                              str(args.warmup)], env=env,
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
