"""Is a devicebench comparison repeatable?

The same two-configuration comparison (seed-rnn: TensorFlow default vs TensorFlow with
``jit_compile=True``) run three times in a row; prints the three speed-ups with their
95% CIs and the spread of the three. Target: within +-10% of their mean.

Usage: python bench/repeatability.py [RUNS] [--budget SECONDS]
"""

from __future__ import annotations

import argparse
import statistics

from devicebench.advisor.equivalence import loss_check
from devicebench.trials.engine import RunOptions, run_workload_group
from devicebench.trials.spec import TrialSpec
from devicebench.trials.summary import compare


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="?", type=int, default=3)
    ap.add_argument("--budget", type=float, default=30.0)
    args = ap.parse_args()
    base = TrialSpec("seed-rnn")
    jit = base.with_(jit="on")
    speedups = []
    for i in range(args.runs):
        results = run_workload_group([base, jit], RunOptions(budget_seconds=args.budget),
                                     loss_check=loss_check)
        row = next(r for r in compare(results) if r.result.spec == jit)
        if row.speedup is None:
            raise SystemExit(f"run {i + 1}: {row.result.status}: {row.result.error}")
        s = row.speedup
        speedups.append(s.value)
        print(f"run {i + 1}: jit_compile=True vs default: {s.value:.2f}x "
              f"[95% CI {s.ci_low:.2f}-{s.ci_high:.2f}] over {s.n_rounds} rounds; "
              f"loss {row.result.loss_verdict}", flush=True)
    mean = statistics.mean(speedups)
    spread = max(abs(s - mean) for s in speedups) / mean
    verdict = "within" if spread <= 0.10 else "OUTSIDE"
    print(f"speed-ups {', '.join(f'{s:.2f}' for s in speedups)}: mean {mean:.2f}x, "
          f"max deviation {spread:.1%} of the mean: {verdict} the +-10% target")


if __name__ == "__main__":
    main()
