"""Is a devicebench comparison repeatable?

The same two-configuration comparison (seed-rnn: TensorFlow default vs TensorFlow with
``jit_compile=True``) run three times in a row; prints the three speed-ups with their
95% CIs and the spread of the three. Target: within +-5% of their mean.

Each run measures interleaved rounds until the speed-up's own 95% CI is within
+-``--ratio-ci`` (default 2%) of its value (``ratios_precise``: more rounds where the
ratio is noisy), or ``--budget`` seconds of rounds have passed (then it says so).

Usage: python bench/repeatability.py [RUNS] [--budget SECONDS] [--ratio-ci FRACTION]
"""

from __future__ import annotations

import argparse
import statistics

from devicebench.advisor.equivalence import loss_check
from devicebench.trials.engine import RunOptions, run_workload_group
from devicebench.trials.spec import TrialSpec
from devicebench.trials.summary import compare, ratios_precise

TARGET = 0.05


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="?", type=int, default=3)
    ap.add_argument("--budget", type=float, default=120.0)
    ap.add_argument("--ratio-ci", type=float, default=0.02)
    ap.add_argument("--max-rounds", type=int, default=60)
    args = ap.parse_args()
    base = TrialSpec("seed-rnn")
    jit = base.with_(jit="on")
    # target_ci=0: the per-trial step-time rule never stops it; the ratio's CI does.
    options = RunOptions(min_rounds=5, max_rounds=args.max_rounds,
                         budget_seconds=args.budget, target_ci=0.0)
    speedups = []
    for i in range(args.runs):
        results = run_workload_group([base, jit], options, reference=base,
                                     enough=ratios_precise(base, args.ratio_ci),
                                     loss_check=loss_check)
        row = next(r for r in compare(results) if r.result.spec == jit)
        if row.speedup is None:
            raise SystemExit(f"run {i + 1}: {row.result.status}: {row.result.error}")
        s = row.speedup
        half = (s.ci_high - s.ci_low) / 2 / s.value
        stop = ("CI reached" if half <= args.ratio_ci else
                f"CI ±{half:.1%} still wider than ±{args.ratio_ci:.0%}: budget or rounds ran out")
        speedups.append(s.value)
        print(f"run {i + 1}: jit_compile=True vs default: {s.value:.3f}x "
              f"[95% CI {s.ci_low:.3f}-{s.ci_high:.3f}, ±{half:.1%}] over {s.n_rounds} "
              f"rounds ({stop}); loss {row.result.loss_verdict}", flush=True)
    mean = statistics.mean(speedups)
    spread = max(abs(s - mean) for s in speedups) / mean
    verdict = "within" if spread <= TARGET else "OUTSIDE"
    print(f"speed-ups {', '.join(f'{s:.3f}' for s in speedups)}: mean {mean:.3f}x, "
          f"max deviation {spread:.1%} of the mean: {verdict} the ±{TARGET:.0%} target")


if __name__ == "__main__":
    main()
