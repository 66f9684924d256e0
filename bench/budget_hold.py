"""Does ``advise --budget B`` finish within B + 10% on this machine? (issue 25)

For each budget and workload, one fresh ``devicebench advise W --budget B --json``
process (its own results file, so no earlier run's figures or floor apply), timed from
the outside: the whole command, start-up and store included, is what a user waits for.
Prints elapsed/B, the verdict, where advise says the time went (its ``budget.phases_s``)
and what the budget cut, with the load average before and after each run (the machine
may be shared: read the figures beside it).

    python bench/budget_hold.py                       # 40 and 120 s, seed-rnn and mnist-cnn
    python bench/budget_hold.py --budgets 40 --workloads mnist-cnn
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SLACK = 1.10  # the rule: within the budget and 10%


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def run_once(workload: str, budget: float, db: Path) -> dict:
    """One fresh advise process; its wall time, exit code and the advice's JSON."""
    cmd = [sys.executable, "-m", "devicebench", "advise", workload, "--budget", f"{budget:g}",
           "--json", "--db", str(db)]
    before = load_average()
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          timeout=budget * 4 + 120)
    wall = time.monotonic() - t0
    out = {"workload": workload, "budget_s": budget, "wall_s": wall, "rc": proc.returncode,
           "load_before": before, "load_after": load_average()}
    if proc.returncode == 0:
        doc = json.loads(proc.stdout)
        out.update(verdict=doc["verdict"], elapsed_s=doc["elapsed_s"],
                   budget=doc.get("budget") or {},
                   processes=(doc.get("replication") or {}).get("processes", {}))
    else:
        out["error"] = proc.stderr.strip().splitlines()[-1:] or ["(no output)"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budgets", default="40,120", help="comma-separated seconds")
    ap.add_argument("--workloads", default="seed-rnn,mnist-cnn")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON too")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="budget-hold-") as tmp:
        for budget in (float(b) for b in args.budgets.split(",")):
            for i, workload in enumerate(args.workloads.split(",")):
                db = Path(tmp) / f"{workload}-{budget:g}-{i}.db"
                r = run_once(workload, budget, db)
                rows.append(r)
                ratio = r["wall_s"] / budget
                mark = "within" if ratio <= SLACK else "OVER"
                print(f"{workload} --budget {budget:g}: {r['wall_s']:.1f} s wall = "
                      f"{ratio:.2f} x B ({mark} +10%); load {r['load_before']} -> "
                      f"{r['load_after']}", flush=True)
                if r["rc"] != 0:
                    print(f"    exit {r['rc']}: {r['error'][0]}")
                    continue
                phases = ", ".join(f"{k} {v:.1f}" for k, v in
                                   r["budget"].get("phases_s", {}).items())
                procs = ", ".join(f"{k} x{n}" for k, n in r["processes"].items())
                print(f"    advise's own clock {r['elapsed_s']:.1f} s: {phases}")
                print(f"    processes: {procs or '-'}")
                print(f"    verdict: {r['verdict']}")
                for cut in r["budget"].get("cuts", []):
                    print(f"    cut: {cut}")
    held = sum(r["wall_s"] <= SLACK * r["budget_s"] for r in rows)
    print(f"{held} of {len(rows)} runs within B + 10% (cpu count {os.cpu_count()})")
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0 if held == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
