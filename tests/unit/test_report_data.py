"""Bundles, cross-run comparison and the report's figures, on real SQLite files.

The H200 bundle (tests/fixtures/bundles/h200.json, built by make_h200_bundle.py from
recorded/h200/) is real data from a machine we lack; small synthetic runs stand for
"this machine" where a test needs exact numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devicebench.env.snapshot import EnvSnapshot, HostInfo
from devicebench.errors import InputError
from devicebench.measure.stats import paired_ratio, ratio_of_medians
from devicebench.results.compare import compare_runs
from devicebench.results.run_report import build_report
from devicebench.store import ResultStore
from devicebench.store.bundle import export_runs, import_bundle, read_bundle, write_bundle
from devicebench.store.runs import load_run, run_history
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H200 = FIXTURES / "bundles" / "h200.json"
RECORDED = FIXTURES / "recorded" / "h200"


def snapshot(cpu: str = "Test CPU") -> EnvSnapshot:
    return EnvSnapshot(created_at="2026-11-30T00:00:00+00:00",
                       host=HostInfo(os="Linux", machine="x86_64", cpu_model=cpu,
                                     cpu_cores_logical=2, python_version="3.11.7"),
                       distributions={"jax": "0.10.2"})


def trial(workload: str, backend: str, step_ms: list[float], verdict: str = "same",
          device: str = "cpu") -> TrialResult:
    steps = 10
    return TrialResult(TrialSpec(workload, backend=backend, device=device),
                       steps_per_block=steps, batch_size=32, steps_per_epoch=100,
                       block_seconds=[t / 1e3 * steps for t in step_ms],
                       block_rounds=list(range(len(step_ms))), peak_rss_bytes=2**29,
                       equivalence_losses=[1.0, 0.8, 0.7], loss_verdict=verdict)


def add_run(store: ResultStore, snap: EnvSnapshot, trials: list[TrialResult]) -> int:
    machine = store.add_machine(snap)
    run_id = store.start_run(machine, "run", {"argv": ["run"]})
    for t in trials:
        store.add_trial(run_id, t)
    store.finish_run(run_id)
    return run_id


def test_compare_is_a_ratio_of_medians_with_independent_ci(tmp_path):
    with ResultStore.open(tmp_path / "r.db") as store:
        a = add_run(store, snapshot(), [trial("seed-rnn", "jax", [2.0, 2.2, 1.9, 2.1, 2.0])])
        b = add_run(store, snapshot(), [trial("seed-rnn", "jax", [1.0, 1.1, 0.9, 1.2, 1.0])])
        result = compare_runs(store, a, b)
    (row,) = result.rows
    expected = ratio_of_medians([2.0, 2.2, 1.9, 2.1, 2.0], [1.0, 1.1, 0.9, 1.2, 1.0])
    assert row.speedup.value == pytest.approx(2.0)
    # Not paired by round: the independent bootstrap of each side, as ratio_of_medians does.
    assert (row.speedup.ci_low, row.speedup.ci_high) == pytest.approx(
        (expected.ci_low, expected.ci_high))
    doc = result.to_dict()
    assert doc["interleaved"] is False and "not interleaved" in doc["pairing"]
    assert row.verdict.startswith(f"run {b} is 2.00x faster")
    assert result.machine_differences == []  # the same machine


def test_compare_refuses_same_run_unmatched_specs_and_flags_differences(tmp_path):
    with ResultStore.open(tmp_path / "r.db") as store:
        a = add_run(store, snapshot(), [trial("seed-rnn", "jax", [2.0, 2.0, 2.1])])
        b = add_run(store, snapshot("Other CPU"),
                    [trial("seed-rnn", "tensorflow", [1.0, 1.1, 1.0])])
        with pytest.raises(InputError, match="same run"):
            compare_runs(store, a, a)
        with pytest.raises(InputError, match="share no configuration.*--config-a"):
            compare_runs(store, a, b)
        with pytest.raises(InputError, match="go together"):
            compare_runs(store, a, b, config_a="jax/cpu")
        with pytest.raises(InputError, match="no ok trial labelled 'torch/cpu'"):
            compare_runs(store, a, b, config_a="torch/cpu", config_b="tensorflow/cpu")
        flagged = compare_runs(store, a, b, config_a="jax/cpu", config_b="tensorflow/cpu")
    assert flagged.rows[0].spec_differences == ["backend: jax vs tensorflow"]
    assert any("cpu: Test CPU (2 cores) vs Other CPU (2 cores)" == d
               for d in flagged.machine_differences)


def test_export_import_round_trip_reproduces_the_comparison(tmp_path):
    with ResultStore.open(tmp_path / "here.db") as store:
        a = add_run(store, snapshot(), [trial("seed-rnn", "jax", [2.0, 2.4, 1.9, 2.1]),
                                        trial("seed-rnn", "torch", [9.0, 9.5, 8.7])])
        b = add_run(store, snapshot("Other CPU"),
                    [trial("seed-rnn", "jax", [1.0, 1.3, 0.9, 1.1, 1.0])])
        before = compare_runs(store, a, b).to_dict()
        write_bundle(export_runs(store, [a, b]), tmp_path / "bundle.json")
    bundle = read_bundle(tmp_path / "bundle.json")
    with ResultStore.open(tmp_path / "fresh.db") as fresh:
        first = import_bundle(fresh, bundle, "bundle.json")
        again = import_bundle(fresh, read_bundle(tmp_path / "bundle.json"), "bundle.json")
        assert len(first.added) == 2 and again.added == [] and again.skipped == first.added
        assert len(run_history(fresh)) == 2  # importing twice does not duplicate
        after = compare_runs(fresh, *first.added).to_dict()
        run = load_run(fresh, first.added[0])
    for doc in (before, after):
        for key in ("run_a", "run_b", "label_a", "label_b"):
            doc.pop(key)
        for row in doc["rows"]:
            row["a"].pop("run_id"), row["b"].pop("run_id")
            row.pop("verdict")
    assert after == before
    assert run.imported_from == "bundle.json" and len(run.trials) == 2


def test_h200_bundle_reproduces_the_recorded_figures(tmp_path):
    with ResultStore.open(tmp_path / "r.db") as store:
        added = import_bundle(store, read_bundle(H200), "h200.json").added
        ops_run, train_run = (load_run(store, i) for i in added)
        report = build_report(store, train_run.id)
    recorded = json.loads((RECORDED / "run.json").read_text())["results"]
    by_key = {t.spec.key: t for t in train_run.trials}
    for row in recorded:
        t = by_key[row["spec_key"]]
        assert t.step_time.median == pytest.approx(row["step_time_s"]["median"])
        assert t.samples_per_second == pytest.approx(row["samples_per_s"], rel=1e-3)
    # The report pairs rounds inside the run (one interleaved group per workload): the
    # speed-up is the paired estimate over the recorded rounds, and lands beside the figure
    # the H200 printed (0.2242, by the ratio of the two sides' medians used then).
    cfg = {(w.workload, c.label): c for w in report.workloads for c in w.configs}
    sp = cfg[("seed-rnn", "jax/gpu:0")].speedup
    ref, gpu = (by_key[k] for k in ("ad31daf0f865ed30", "c989fb178edbb18a"))  # seed-rnn jax
    paired = paired_ratio(ref.round_step_times, gpu.round_step_times)
    assert sp.interleaved and sp.value == pytest.approx(paired.value)
    assert sp.value == pytest.approx(0.22417443996745218, rel=0.05)
    head = {w.workload: w.headline for w in report.workloads}
    assert head["seed-rnn"].answer == "no" and head["mnist-cnn"].answer == "yes"
    # The one accelerator answer: the reference configuration against itself on the GPU.
    assert "gpu:0 is 4.6x SLOWER than the CPU for seed-rnn on jax" in head["seed-rnn"].text
    assert (head["seed-rnn"].accelerator_label, head["seed-rnn"].cpu_label) == (
        "jax/gpu:0", "jax/cpu")
    assert head["seed-rnn"].ratio.value == pytest.approx(sp.value)
    # The op sweep re-analysed from the rebuilt blocks: the recorded crossovers.
    ops = json.loads((RECORDED / "ops.json").read_text())
    want = {(o["op"], p["label"]): p["crossover_size"] for o in ops["ops"] for p in o["paths"]
            if p["device"] != "cpu" and p["speedup_vs_reference"]}
    got = {(o.op, c.label): c.crossover for o in report.ops.ops for c in o.curves}
    assert got == want and len(got) >= 8
    assert ops_run.command == "ops" and report.has_accelerator


def test_history_and_import_errors(tmp_path):
    with ResultStore.open(tmp_path / "r.db") as store:
        assert run_history(store) == []
        with pytest.raises(InputError, match="no run with results"):
            build_report(store, None)
        with pytest.raises(InputError, match="no run 7"):
            build_report(store, 7)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="is not JSON"):
        read_bundle(bad)
    bad.write_text(json.dumps({"format": "devicebench-bundle", "schema_version": 99,
                               "runs": []}))
    with pytest.raises(InputError, match="newer devicebench"):
        read_bundle(bad)
    with pytest.raises(InputError, match="not found"):
        read_bundle(tmp_path / "missing.json")


def test_markdown_escapes_user_strings(tmp_path):
    from devicebench.report.markdown import md_escape, render_markdown

    xss = "<script>alert(1)</script> | *x*"
    assert md_escape(xss) == r"\<script\>alert(1)\</script\> \| \*x\*"
    with ResultStore.open(tmp_path / "r.db") as store:
        add_run(store, snapshot(), [trial(xss, "jax", [1.0, 1.1, 0.9], verdict="reference")])
        md = render_markdown(build_report(store, None))
    assert "<script>" not in md and r"\<script\>" in md


def test_report_modules_import_no_framework():
    import subprocess
    import sys

    code = ("import sys, devicebench.cli.report, devicebench.cli.history, "
            "devicebench.results.run_report, devicebench.results.compare, "
            "devicebench.report.html, devicebench.report.markdown, devicebench.store.bundle; "
            "print([m for m in ('tensorflow', 'jax', 'torch', 'keras') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "[]"


def test_the_report_shows_the_fullest_recent_op_sweep_or_the_one_named(tmp_path):
    """Issue 26: advise's few-second dispatch probe (2 ops x 2 sizes) stored after a full
    sweep used to take the page's op-sweep section."""
    from devicebench.ops.result import OpsPoint, OpsWorkerResult
    from devicebench.store.ops import add_ops_result
    from tests.unit.test_ops import _workers

    with ResultStore.open(tmp_path / "r.db") as store:
        snap = snapshot()
        machine = store.add_machine(snap)
        full = store.start_run(machine, "ops", {"argv": ["ops"]})
        for w in _workers():
            add_ops_result(store, full, w)
        store.finish_run(full)
        training = add_run(store, snap, [trial("seed-rnn", "jax", [0.5, 0.55, 0.48, 0.5])])
        probe = store.start_run(machine, "ops", {"argv": ["(dispatch probe)"]})
        add_ops_result(store, probe, OpsWorkerResult("numpy", "cpu", points=(
            OpsPoint("multiply", "eager", 2, calls_per_block=10,
                     block_seconds=(1e-5, 1.1e-5, 1e-5)),)))
        store.finish_run(probe)
        assert build_report(store, training).ops.run_id == full
        assert build_report(store, training, ops_run_id=probe).ops.run_id == probe
        with pytest.raises(InputError, match="not an op sweep"):
            build_report(store, training, ops_run_id=training)
