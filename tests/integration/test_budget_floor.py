"""`advise --budget B` below the least a comparison costs here (issue 27, item 15): the
first time, with nothing stored, advise runs the least (it is never cut) and says what
it cost and the budget that holds it; once this machine's store has measured it, the
same request is refused before anything runs, in one line, exit 2. Real TensorFlow and
JAX workers on the CPU, a real SQLite file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, requires_jax, requires_tf, run_cli

ROOT = Path(__file__).resolve().parents[2]
W = str(ROOT / "tests" / "fixtures" / "workloads.py") + ":slow_build"


def _runs(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    finally:
        con.close()


@pytest.mark.slow  # test_budget_hold holds the overrun's line and the stored floor's refusal
@requires_tf
@requires_jax
def test_a_budget_below_the_measured_least_is_refused_up_front(tmp_path):
    db = tmp_path / "r.db"
    args = ("advise", W, "--budget", "10", "--db", str(db))
    # Its model takes 6 s to build in each trial: the baseline and its first comparison
    # alone cost 12 s or more, whatever the machine.
    first = run_cli(*args, "--json")
    assert first.returncode == 0, first.stderr[-3000:]
    doc = json.loads(first.stdout)
    assert doc["elapsed_s"] > 11 and doc["budget"]["phases_s"]["least set-up"] >= 12
    (took,) = [n for n in doc["notes"] if n.startswith("took ")]
    assert "least a CI needs" in took and "raise --budget (to about" in took
    runs = _runs(db)
    again = run_cli(*args)
    assert_one_line_error(again, "--budget 10 s is below the least a comparison costs on "
                          "this machine", "measured here in run #", "fix: --budget ")
    suggested = int(again.stderr.split("fix: --budget ")[1].split()[0])
    assert suggested >= 1.25 * 12
    assert _runs(db) == runs  # nothing ran, nothing was recorded
    # The budget it suggests holds the measured least: not refused.
    from devicebench.advisor.advice import default_baseline
    from devicebench.advisor.floor import refuse_short_budget
    from devicebench.env.probe import probe_host_layer

    snap = probe_host_layer()
    spec = default_baseline(snap, W)[0]
    refuse_short_budget(db, snap, spec, float(suggested), 50, {})
