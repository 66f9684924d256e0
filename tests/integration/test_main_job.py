"""The main job (`devicebench` alone) end to end on a tiny workload and a small budget:
real doctor probe, real dispatch probe, real advise workers, a real SQLite file."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.conftest import requires_jax, requires_tf

ROOT = Path(__file__).resolve().parents[2]
W = str(ROOT / "tests" / "fixtures" / "workloads.py")


@requires_tf
@requires_jax
def test_the_main_job_answers_for_each_workload_and_stores_what_it_measured(tmp_path):
    db = tmp_path / "r.db"
    code = ("import sys\nfrom devicebench.cli.advise import main_job\n"
            f"sys.exit(main_job({str(db)!r}, workloads=({W + ':tiny'!r},), budget=10.0))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600, check=False, env={**__import__("os").environ,
                                                         "COLUMNS": "200"})
    out = proc.stdout
    assert proc.returncode in (0, 1), proc.stderr[-3000:]  # 1: doctor found an error
    assert "doctor:" in out and "findings; `devicebench doctor` for details" in out
    # No ops run was stored: the per-op dispatch cost was measured first, and stored.
    assert "measured the per-op dispatch cost of" in out and "ops run #1" in out
    assert "No accelerator:" in out or "Accelerator:" in out
    assert "Verdict:" in out and "Summary" in out.split("Verdict:")[-1]
    con = sqlite3.connect(db)
    try:
        commands = [r[0] for r in con.execute("SELECT command FROM runs ORDER BY id")]
        trials = con.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
    finally:
        con.close()
    assert commands == ["ops", "advise"] and trials >= 1
