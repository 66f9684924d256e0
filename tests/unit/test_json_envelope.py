"""Every ``--json`` output carries one envelope, ``{"schema": "devicebench.<kind>",
"version": N, ...}`` (devicebench.schema). The quick commands are run here as a user runs
them; ``run``, ``advise`` and ``ops`` check theirs in their integration tests."""

from __future__ import annotations

import json
from pathlib import Path

from devicebench.schema import VERSIONS
from devicebench.store import ResultStore
from tests.conftest import run_cli
from tests.unit.test_report_data import add_run, snapshot, trial

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _envelope(res, kind: str) -> dict:
    assert res.returncode in (0, 1), res.stderr[-2000:]  # doctor: 1 when it finds an error
    doc = json.loads(res.stdout)
    assert doc["schema"] == f"devicebench.{kind}" and doc["version"] == VERSIONS[kind], (
        kind, {k: doc[k] for k in ("schema", "version") if k in doc})
    assert "schema_version" not in doc  # one version style
    return doc


def test_every_quick_command_prints_the_envelope(tmp_path):
    db = ["--db", str(tmp_path / "r.db")]
    ResultStore.open(tmp_path / "r.db").close()  # history reads a store, never creates one
    assert _envelope(run_cli("history", "--json", *db), "history")["runs"] == []
    assert run_cli("import", str(FIXTURES / "bundles" / "h200.json"), *db).returncode == 0
    runs = _envelope(run_cli("history", "--json", *db), "history")["runs"]
    training = next(r["id"] for r in runs if r["command"] == "run")
    with ResultStore.open(tmp_path / "r.db") as store:
        here = add_run(store, snapshot(), [trial("seed-rnn", "jax", [0.5, 0.55, 0.48, 0.5])])
    report = _envelope(run_cli("report", "--run", str(training), "--json", *db), "report")
    assert report["workloads"] and report["workloads"][0]["headline"]["text"]
    compare = _envelope(run_cli("compare", str(training), str(here), "--json", *db),
                        "compare")
    assert compare["rows"]
    assert _envelope(run_cli("workloads", "--json"), "workloads")["workloads"]
    replay = _envelope(run_cli("profile", "replay", "h200", "seed-rnn", "--json"),
                       "profile-replay")
    assert (replay["advice"]["schema"], replay["advice"]["version"]) == (
        "devicebench.advise", VERSIONS["advise"])
    doctor = _envelope(run_cli("doctor", "--frameworks", "none", "--json"), "doctor")
    assert "findings" in doctor and "snapshot" in doctor
