"""Golden output of report/: what `run` and `advise` print, rendered from recorded data
(the H200 run in tests/fixtures/bundles/h200.json, and advise replayed on the shipped
H200 profile) and compared line by line with tests/fixtures/golden/. A change to the
wording or the figures shows up here as a diff; when it is intended, regenerate with
``DEVICEBENCH_UPDATE_GOLDEN=1 python -m pytest tests/unit/test_report_golden.py`` and
read the diff before committing."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from devicebench.advisor.advice import default_baseline
from devicebench.fmt import fmt_duration
from devicebench.profiles import load_profile
from devicebench.profiles.replay import replay_advise
from devicebench.report.advise import render_advice
from devicebench.report.run import render_comparison
from devicebench.store import ResultStore
from devicebench.store.bundle import import_bundle, read_bundle
from devicebench.store.runs import load_run
from devicebench.trials.stability import brief_lines, stability_findings
from devicebench.trials.summary import compare

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
GOLDEN = FIXTURES / "golden"


def _rendered(draw) -> str:
    con = Console(record=True, width=150, color_system=None, force_terminal=False)
    draw(con)
    return "\n".join(line.rstrip() for line in con.export_text().splitlines()) + "\n"


def _check(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("DEVICEBENCH_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    want = path.read_text(encoding="utf-8")
    assert text.splitlines() == want.splitlines()


def test_the_run_table_of_the_recorded_h200_run(tmp_path):
    with ResultStore.open(tmp_path / "r.db") as store:
        added = import_bundle(store, read_bundle(FIXTURES / "bundles" / "h200.json"),
                              "h200.json").added
        run = next(r for r in (load_run(store, i) for i in added) if r.command == "run")
    text = _rendered(lambda con: render_comparison(compare(run.trials), console=con))
    _check("h200-run.txt", text)
    # Every recorded step time is in it, as the recorded run printed it.
    recorded = json.loads((FIXTURES / "recorded" / "h200" / "run.json").read_text())
    for row in recorded["results"]:
        assert fmt_duration(row["step_time_s"]["median"]) in text, row["label"]


def test_advise_on_the_h200_profile(tmp_path):
    profile = load_profile("h200")
    for workload in ("seed-rnn", "mnist-cnn"):
        base = default_baseline(profile.env_snapshot(), workload)[0]
        advice, _ = replay_advise(profile, workload, budget_s=40, baseline=base)
        text = _rendered(lambda con, a=advice: render_advice(a, console=con))
        _check(f"h200-advise-{workload}.txt", text)
        assert "Verdict:" in text and "Why (from the measurements):" in text
    # The main job's brief form keeps the stability findings, one line per kind.
    few = [replace(r.result, block_seconds=r.result.block_seconds[:3],
                   block_rounds=r.result.block_rounds[:3]) for r in advice.rows]
    advice = replace(advice, stability=stability_findings(few))
    brief = _rendered(lambda con: render_advice(advice, console=con, brief=True))
    assert advice.stability and "stability: too few rounds (mnist-cnn " in brief
    assert all(line[:60] in brief for line in brief_lines(advice.stability))  # (wrapped)


def test_report_of_an_advise_run_shows_the_headline_advise_printed(tmp_path):
    """One accelerator answer: ``report --json`` of an advise run carries the headline
    ``advise --json`` printed for it (same pair, same ratio, same CI), not a recomputed
    one; the advise runs are replays on the shipped H200 profile, stored as the advise job
    stores them."""
    from devicebench.results.run_report import build_report
    from devicebench.store import recorded_run

    profile = load_profile("h200")
    db = tmp_path / "r.db"
    for workload in ("seed-rnn", "mnist-cnn"):
        with recorded_run(db, profile.env_snapshot(), "advise", {"workload": workload}) as rec:
            advice, _ = replay_advise(profile, workload, budget_s=40,
                                      on_result=lambda r, rec=rec: rec.store.add_trial(
                                          rec.run_id, r))
            rec.summary = advice.to_dict()
            run_id = rec.run_id
        printed = json.loads(json.dumps(advice.to_dict(), default=str))["headline"]
        with ResultStore.open(db) as store:
            report = json.loads(json.dumps(build_report(store, run_id).to_dict(),
                                           default=str))
        (shown,) = [w["headline"] for w in report["workloads"] if w["workload"] == workload]
        assert shown == printed
        assert printed["speedup_over_cpu"] is not None and printed["accelerator_label"]


def test_no_golden_output_names_the_projects_own_labels():
    """Issue 26: a user never saw "seed 000"; stored notes that say it (the shipped
    profiles and bundles were recorded before) are worded out when rendered."""
    from devicebench.report.run import plain_data_note

    for path in GOLDEN.glob("*.txt"):
        assert "seed 00" not in path.read_text(encoding="utf-8").lower(), path.name
    assert plain_data_note("synthetic two-sine series, seed 000's generator (its seed 42)") \
        == "synthetic two-sine series, the forum script's generator (its seed 42)"
