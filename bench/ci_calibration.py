"""Do devicebench's 95% CIs hold on a rerun? K fresh `devicebench run` processes, quiet
and beside a competing load, compared pairwise.

Each rerun is one `devicebench run seed-rnn --backend tensorflow,jax --jit auto,on
--json` in a fresh process (its trials in worker processes of their own; the baseline,
its partner and the likely winner replicated as the budget holds), the reruns spread
over time (--gap seconds apart). From each rerun:

  (a) the absolute median step time of tensorflow/cpu (the reference), with its CI;
  (b) two paired ratios from the same interleaved rounds: tensorflow/cpu jit=on vs
      the default, and jax/cpu vs tensorflow/cpu, with their CIs.

For every pair of reruns i, j the z-score (x_i - x_j) / sqrt(se_i^2 + se_j^2), se from
each rerun's own 95% CI (half-width / 1.96): a calibrated CI gives |z| < 1.96 in about
95% of pairs. Also the max deviation of each ratio from its mean over the reruns, and
how many reruns a stability finding flagged; beside each ratio, the same stored rounds by
the estimator used before 2026-12-03 (the ratio of the two sides' medians), so the two
estimators' spreads compare on one set of reruns. The whole series runs twice: quiet, then
beside a competing load that this bench starts and stops itself (a bounded busy loop
on one core, as a browser tab or an IDE's indexer would be).

Issue 25's bar: ratio CIs with |z| < 1.96 in >= 90% of pairs and max deviation <= 5%
(under load: that, or every rerun flagged by a stability finding); the absolute step
time's coverage printed beside a stability finding whenever it is below 90%.

Full form (about an hour on the 2-core VM; run it on a quiet machine):
    python bench/ci_calibration.py --k 8 --gap 30
With one results file per series (--history), each rerun's CIs include how far the
earlier reruns moved beyond theirs (from the third on; the first two have too few):
    python bench/ci_calibration.py --k 8 --gap 10 --history
Reduced form (proves the bench works; figures then mean little):
    python bench/ci_calibration.py --k 3 --rounds 3 --budget 20 --gap 0
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

Z95 = 1.959964


@dataclass
class Figure:
    """One rerun's value of a quantity with its 95% CI."""

    value: float
    low: float
    high: float
    # The run's own CI when the shown one was widened by earlier runs (--history).
    own: tuple[float, float] | None = None

    @property
    def se(self) -> float:
        return max((self.high - self.low) / 2 / Z95, 1e-12)

    @property
    def own_se(self) -> float:
        lo, hi = self.own or (self.low, self.high)
        return max((hi - lo) / 2 / Z95, 1e-12)


@dataclass
class Rerun:
    figures: dict[str, Figure] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)  # stability finding ids
    cpu_slowdown: float | None = None  # the reference loop: mean / fastest tenth - 1
    seconds: float = 0.0
    error: str = ""
    # The same rounds' ratios by the estimator used before 2026-12-03 (the ratio of the
    # two sides' medians over their common rounds), printed beside today's for the bench.
    earlier: dict[str, float] = field(default_factory=dict)


QUANTITIES = {
    "step tensorflow/cpu (ms)": "abs",
    "ratio tensorflow/cpu jit=on vs default": "ratio",
    "ratio jax/cpu vs tensorflow/cpu": "ratio",
}


def one_rerun(args: argparse.Namespace, db: Path) -> Rerun:
    """A fresh `devicebench run` process; its JSON parsed into the three figures."""
    cmd = [sys.executable, "-m", "devicebench", "run", "seed-rnn",
           "--backend", "tensorflow,jax", "--jit", "auto,on", "--device", "cpu",
           "--budget", str(args.budget), "--equivalence-steps", "10", "--db", str(db),
           "--json"]
    if args.rounds:
        cmd += ["--rounds", str(args.rounds)]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          timeout=args.timeout)
    out = Rerun(seconds=time.monotonic() - t0)
    if args.keep:  # the JSON beside the store, for estimators computed afterwards
        n = len(list(db.parent.glob(f"{db.stem}*.json")))
        db.with_name(f"{db.stem}-{n}.json").write_text(proc.stdout)
    if proc.returncode != 0:
        out.error = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return out
    data = json.loads(proc.stdout)
    data = data.get("data", data)
    out.earlier = earlier_estimator(db, data.get("run_id"))
    rows = {r["label"]: r for r in data["results"] if r.get("status") == "ok"}
    out.findings = [f["id"] for f in data.get("stability", [])]
    speed = (data.get("load") or {}).get("cpu_speed") or {}
    out.cpu_slowdown = speed.get("mean_slowdown")
    ref = rows.get("tensorflow/cpu")
    if ref and ref.get("step_time_s"):
        st = ref["step_time_s"]
        own = st.get("ci95_this_run")
        out.figures["step tensorflow/cpu (ms)"] = Figure(
            st["median"] * 1e3, st["ci95"][0] * 1e3, st["ci95"][1] * 1e3,
            (own[0] * 1e3, own[1] * 1e3) if own else None)
    for name, label in RATIO_LABELS.items():
        sp = (rows.get(label) or {}).get("speedup_vs_reference")
        if sp:
            own = sp.get("ci95_this_run")
            out.figures[name] = Figure(sp["value"], *sp["ci95"], tuple(own) if own else None)
    return out


RATIO_LABELS = {"ratio tensorflow/cpu jit=on vs default": "tensorflow/cpu jit=on",
                "ratio jax/cpu vs tensorflow/cpu": "jax/cpu"}


def earlier_estimator(db: Path, run_id: int | None) -> dict[str, float]:
    """The rerun's two ratios from its stored rounds by the estimator devicebench used
    before 2026-12-03: median(reference's round times) / median(candidate's), over their
    common rounds. Today's (``paired_ratio``) is the median of each round's own ratio;
    both read the same rounds, so the two series' spreads compare like for like."""
    from statistics import median

    from devicebench.store import ResultStore
    from devicebench.store.runs import load_run

    if run_id is None:
        return {}
    store = ResultStore.open(db)
    try:
        trials = {t.spec.label: t for t in load_run(store, int(run_id)).trials
                  if t.status == "ok"}
    finally:
        store.close()
    ref = trials.get("tensorflow/cpu")
    out: dict[str, float] = {}
    for name, label in RATIO_LABELS.items():
        cand = trials.get(label)
        if ref is None or cand is None:
            continue
        b, c = ref.round_step_times, cand.round_step_times
        common = sorted(set(b) & set(c))
        if common:
            out[name] = median(b[r] for r in common) / median(c[r] for r in common)
    return out


def start_load(seconds: float) -> subprocess.Popen:
    """A bounded busy loop on one core (core 0 where affinity can be set), ending by
    itself after ``seconds`` if this bench dies first."""
    code = ("import os, time\n"
            "try:\n    os.sched_setaffinity(0, {0})\nexcept (AttributeError, OSError):\n"
            "    pass\n"
            f"end = time.monotonic() + {seconds:.0f}\n"
            "while time.monotonic() < end:\n    pass\n")
    return subprocess.Popen([sys.executable, "-c", code])


def series(args: argparse.Namespace, label: str) -> list[Rerun]:
    reruns: list[Rerun] = []
    with tempfile.TemporaryDirectory(prefix="devicebench-cical-") as scratch:
        tmp = Path(args.keep) if args.keep else Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        for i in range(args.k):
            if i and args.gap:
                time.sleep(args.gap)
            # --history: one results file per series, as a user's own: each rerun's CIs
            # then include how far the earlier reruns moved (devicebench.results.reruns).
            db = tmp / (f"{label}.db" if args.history else f"{label}-{i}.db")
            r = one_rerun(args, db)
            shown = ", ".join(f"{k.split(' ', 1)[1]}={f.value:.4g} [{f.low:.4g}-{f.high:.4g}]"
                              for k, f in r.figures.items())
            cpu = ("" if r.cpu_slowdown is None
                   else f"  CPU {r.cpu_slowdown:.0%} slower than its fastest on average")
            print(f"  [{label} {i + 1}/{args.k}] {r.seconds:.0f} s  "
                  f"{r.error or shown}{cpu}  findings: {', '.join(r.findings) or '-'}",
                  flush=True)
            reruns.append(r)
    return reruns


def report(label: str, reruns: list[Rerun]) -> None:
    flagged = sum(1 for r in reruns if r.findings)
    print(f"\n{label}: {len(reruns)} reruns, {flagged} flagged by a stability finding")
    for name, kind in QUANTITIES.items():
        figs = [r.figures[name] for r in reruns if name in r.figures]
        if len(figs) < 2:
            print(f"  {name}: fewer than 2 reruns measured it")
            continue
        zs = [(a.value - b.value) / math.sqrt(a.se ** 2 + b.se ** 2)
              for a, b in itertools.combinations(figs, 2)]
        inside = sum(1 for z in zs if abs(z) < Z95) / len(zs)
        mean = sum(f.value for f in figs) / len(figs)
        dev = max(abs(f.value - mean) / mean for f in figs)
        values = ", ".join(f"{f.value:.4g}" for f in figs)
        print(f"  {name}: values {values}")
        if any(f.own for f in figs):
            own = [(a.value - b.value) / math.sqrt(a.own_se ** 2 + b.own_se ** 2)
                   for a, b in itertools.combinations(figs, 2)]
            print(f"    (with each run's own CI, before earlier runs widened it: |z| < 1.96 "
                  f"in {sum(1 for z in own if abs(z) < Z95) / len(own):.0%} of pairs; "
                  f"{sum(1 for f in figs if f.own)} of {len(figs)} reruns had earlier runs "
                  "to widen by)")
        print(f"    pairwise |z| < 1.96 in {inside:.0%} of {len(zs)} pairs (max |z| "
              f"{max(abs(z) for z in zs):.2f}); max deviation from the mean {dev:.1%}")
        if kind == "ratio":
            was = [r.earlier[name] for r in reruns if name in r.figures and name in r.earlier]
            if len(was) >= 2:
                m = sum(was) / len(was)
                print(f"    the same rounds by the earlier estimator (ratio of the two sides' "
                      f"medians): {', '.join(f'{x:.4g}' for x in was)}; max deviation from "
                      f"the mean {max(abs(x - m) / m for x in was):.1%}")
            ok = inside >= 0.9 and dev <= 0.05
            verdict = ("meets the bar" if ok else
                       "every rerun flagged: the output said so" if flagged == len(reruns)
                       else "BELOW the bar")
            print(f"    issue 25 bar (>= 90% of pairs, <= 5% deviation): {verdict}")
        elif inside < 0.9:
            print(f"    coverage below 90%: {flagged}/{len(reruns)} reruns carried a "
                  "stability finding")
        if kind == "abs":
            cpu_speed(name, [r for r in reruns if name in r.figures])
    speed = sum(1 for r in reruns if "stability.cpu-speed" in r.findings)
    print(f"  stability.cpu-speed (the CPU's own speed moved) flagged {speed}/{len(reruns)}")


def _corr(a: list[float], b: list[float]) -> float:
    try:
        return statistics.correlation(a, b)
    except statistics.StatisticsError:  # a constant series
        return 0.0


def cpu_speed(name: str, reruns: list[Rerun]) -> None:
    """Does the CPU's own speed during each rerun (its reference loop's mean slowdown)
    explain the absolute figure's rerun-to-rerun deviation? The correlation, and the
    spread of the figure divided by (1 + slowdown)."""
    rs = [r for r in reruns if r.cpu_slowdown is not None]
    if len(rs) < 3:
        return
    v = [r.figures[name].value for r in rs]
    slow = [r.cpu_slowdown for r in rs]
    adj = [x / (1 + s) for x, s in zip(v, slow, strict=True)]

    def dev(xs: list[float]) -> float:
        m = sum(xs) / len(xs)
        return max(abs(x - m) / m for x in xs)

    print(f"    the CPU's slowdown per rerun {', '.join(f'{s:.0%}' for s in slow)}: "
          f"correlation with the step time {_corr(v, slow):.2f}; step / (1 + slowdown) "
          f"deviates {dev(adj):.1%} from its mean (raw {dev(v):.1%})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=8, help="reruns per condition (default 8)")
    ap.add_argument("--gap", type=float, default=30.0,
                    help="seconds between reruns, to spread them over time")
    ap.add_argument("--rounds", type=int, default=None,
                    help="fixed rounds per rerun (default: devicebench's own rule)")
    ap.add_argument("--budget", type=float, default=60.0, help="each rerun's --budget")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per rerun")
    ap.add_argument("--keep", metavar="DIR", default=None,
                    help="keep each rerun's store and JSON in DIR (default: a temporary one)")
    ap.add_argument("--history", action="store_true",
                    help="one results file per series (each rerun sees the earlier ones: "
                         "its CIs include their run-to-run spread), as a user's own file")
    ap.add_argument("--no-load", action="store_true", help="quiet series only")
    ap.add_argument("--load-only", action="store_true", help="loaded series only")
    args = ap.parse_args()
    if args.k < 2:
        ap.error("--k must be at least 2 (pairs of reruns are compared)")
    print(f"devicebench CI calibration: K={args.k} fresh `devicebench run` processes per "
          f"condition, {args.gap:g} s apart, --budget {args.budget:g}"
          + (f", --rounds {args.rounds}" if args.rounds else "")
          + f"; {os.cpu_count()} logical cores; load average now "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    results: dict[str, list[Rerun]] = {}
    if not args.load_only:
        results["quiet"] = series(args, "quiet")
    if not args.no_load:
        load = start_load(args.k * (args.gap + args.timeout))
        try:
            results["under load"] = series(args, "load")
        finally:
            load.terminate()
            load.wait(timeout=10)
    for label, reruns in results.items():
        report(label, reruns)


if __name__ == "__main__":
    main()
