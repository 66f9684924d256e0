"""`devicebench ops` end to end through the real CLI: real TensorFlow and JAX workers on
the CPU, numpy as the reference, a real SQLite file. Asserts structure and internal
consistency, never a wall-clock value."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devicebench.ops.analysis import PEAK_MIN_SIZE, PEAK_MODES
from devicebench.ops.spec import op_flops
from devicebench.store import ResultStore
from devicebench.store.ops import load_ops_results
from tests.conftest import requires_jax, requires_tf, requires_torch_cuda, run_cli

ROOT = Path(__file__).resolve().parents[2]
SIZES = [2, 4, 8, 16, 32, 64, 128, 256]
FAST = ["--blocks", "3", "--block-ms", "2"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    db = tmp_path_factory.mktemp("ops") / "r.db"
    res = run_cli("ops", "--ops", "multiply,matmul", "--backend", "tensorflow,jax,numpy",
                  "--sizes", "2..256", *FAST, "--json", "--db", str(db), timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout), db


def _paths(doc, op):
    (entry,) = [o for o in doc["ops"] if o["op"] == op]
    return entry, {p["label"]: p for p in entry["paths"]}


@requires_tf
@requires_jax
def test_sweep_structure_every_backend_mode_and_size(sweep):
    doc, _ = sweep
    assert (doc["schema"], doc["version"]) == ("devicebench.ops", 2)
    assert doc["accelerators"] == []
    assert any("no accelerator found" in n for n in doc["notes"])
    assert [(w["backend"], w["status"]) for w in doc["workers"]] == [
        ("numpy", "ok"), ("tensorflow", "ok"), ("jax", "ok")]
    assert {o["op"] for o in doc["ops"]} == {"multiply", "matmul"}
    for op in ("multiply", "matmul"):
        entry, paths = _paths(doc, op)
        expected = {"numpy/cpu eager"} | {f"{b}/cpu {m}" for b in ("tensorflow", "jax")
                                          for m in ("naive", "eager", "compiled", "in-graph")}
        assert set(paths) == expected
        for label, path in paths.items():
            measured = [p["size"] for p in path["points"]]
            skipped = [s["size"] for s in path["skipped"]]
            assert sorted(measured + skipped) == SIZES, label
            assert not path["errors"], path["errors"]
        assert entry["verdict"] and entry["verdict"][-1].startswith("No accelerator")
        assert "per TensorFlow eager call on the CPU" in entry["verdict"][0]


@requires_tf
@requires_jax
def test_figures_are_internally_consistent(sweep):
    doc, _ = sweep
    for op in ("multiply", "matmul"):
        _, paths = _paths(doc, op)
        for label, path in paths.items():
            for p in path["points"]:
                lo, hi = p["ci95_s"]
                assert p["q1_s"] <= p["median_s"] <= p["q3_s"], label
                assert lo <= p["median_s"] <= hi, label
                assert len(p["samples_s"]) >= 2 and p["calls_per_block"] >= 1
                if path["mode"] != "in-graph":
                    assert p["median_s"] > 0 and p["resolved"]
            fit = path["fit"]
            if path["mode"] != "in-graph":
                assert fit is not None, label
            if fit is not None:
                assert fit["overhead_s"] >= 0
                assert fit["rate_per_s"] is None or fit["rate_per_s"] > 0
            ref = path["reference"]
            if path["backend"] == "numpy":
                assert ref is None and path["speedup_vs_reference"] == []
                continue
            assert ref == "numpy/cpu eager"
            ref_points = {p["size"]: p for p in paths[ref]["points"]}
            mine = {p["size"]: p for p in path["points"]}
            for s in path["speedup_vs_reference"]:
                lo, hi = s["ci95"]
                assert lo <= s["value"] <= hi
                assert s["value"] == pytest.approx(
                    ref_points[s["size"]]["median_s"] / mine[s["size"]]["median_s"])
            cross = path["crossover_size"]
            if cross is not None:
                assert all(s["ci95"][0] > 1 for s in path["speedup_vs_reference"]
                           if s["size"] >= cross)
    # The peak is the fastest eager/compiled matmul measured at a size it is taken from
    # (a small one can be faster per FLOP on a noisy CPU, and is not a peak).
    _, paths = _paths(doc, "matmul")
    rates = [op_flops("matmul", p["size"]) / p["median_s"] for path in paths.values()
             if path["mode"] in PEAK_MODES for p in path["points"] if p["size"] >= PEAK_MIN_SIZE]
    assert doc["matmul_peak"]["cpu"]["flops_per_s"] == pytest.approx(max(rates))


@requires_tf
@requires_jax
def test_results_are_in_the_store(sweep):
    doc, db = sweep
    with ResultStore.open(db) as store:
        workers = load_ops_results(store, doc["run_id"])
        (summary,) = store.runs()
    assert summary.command == "ops" and summary.finished_at is not None
    assert [w.label for w in workers] == ["numpy/cpu", "tensorflow/cpu", "jax/cpu"]
    by_label = {w.label: w for w in workers}
    for op in ("multiply", "matmul"):
        _, paths = _paths(doc, op)
        for path in paths.values():
            stored = [p for p in by_label[f"{path['backend']}/cpu"].points
                      if p.op == op and p.mode == path["mode"] and p.status == "ok"]
            assert len(stored) == len(path["points"])


@pytest.mark.parametrize(("args", "needle"), [
    (["--ops", "fft"], "unknown op 'fft'"),
    (["--modes", "lazy"], "unknown mode 'lazy'"),
    (["--backend", "mxnet"], "unknown backend 'mxnet'"),
    (["--sizes", "2..x"], "bad --sizes range"),
    (["--sizes", "0,4"], "size 0 is out of range"),
    (["--sizes", "abc"], "--sizes must be integers"),
    (["--device", "gpu:7"], "no device 'gpu:7'"),
    (["--chain", "1"], "chain must be 2 or more"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, needle):
    res = run_cli("ops", *args, "--db", str(tmp_path / "r.db"), timeout=60)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("devicebench: error:"), res.stderr
    assert needle in lines[0]
    assert not (tmp_path / "r.db").exists()  # nothing ran, nothing stored


def test_the_parent_side_imports_no_framework():
    code = ("import sys\n"
            "import devicebench.cli.ops, devicebench.ops.runner, devicebench.ops.analysis\n"
            "import devicebench.ops.verdict, devicebench.report.ops, devicebench.store.ops\n"
            "bad = [m for m in ('tensorflow', 'jax', 'torch', 'keras') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.gpu
@requires_torch_cuda
def test_torch_on_the_gpu_is_synced_and_compared_with_the_cpu(tmp_path):
    res = run_cli("ops", "--ops", "matmul", "--backend", "torch", "--device", "cpu,gpu:0",
                  "--modes", "naive,eager", "--sizes", "2..2048:4", *FAST, "--json",
                  "--db", str(tmp_path / "r.db"), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert doc["accelerators"] == ["gpu:0"]
    _, paths = _paths(doc, "matmul")
    gpu = paths["torch/gpu:0 eager"]
    assert gpu["reference"] == "torch/cpu eager" and gpu["speedup_vs_reference"]
    assert any("On gpu:0" in line for line in _paths(doc, "matmul")[0]["verdict"])
    # Unsynced launches return before the work: naive must not be slower than synced.
    big = {p["size"]: p["median_s"] for p in paths["torch/gpu:0 naive"]["points"]}
    synced = {p["size"]: p["median_s"] for p in gpu["points"]}
    assert big[2048] <= synced[2048] * 1.2


@pytest.mark.slow  # unit tests hold the figures; the main job runs the dispatch probe
@requires_tf
def test_advise_uses_the_stored_ops_figures(sweep, tmp_path):
    """advise reads the newest ops run of this machine from the same store: the device
    rate behind "overhead-bound" and, when the in-graph per-op cost was resolved, the
    dispatch reason (ops per step x per-op cost)."""
    from devicebench.advisor.figures import device_figures

    doc, db = sweep
    db_copy = tmp_path / "r.db"
    shutil.copy(db, db_copy)  # the module's sweep stays as it was
    tiny = f"{ROOT / 'tests' / 'fixtures' / 'workloads.py'}:tiny"
    res = run_cli("advise", tiny, "--baseline", "backend=tensorflow", "--budget", "20",
                  "--json", "--db", str(db_copy), timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    advice = json.loads(res.stdout)
    reasons = {r["id"]: r["text"] for r in advice["reasons"]}
    source = f"devicebench ops run #{doc['run_id']}"
    assert source in reasons["overhead-bound"]
    with ResultStore.open(db) as store:
        figures = device_figures(doc["run_id"], load_ops_results(store, doc["run_id"]), "cpu")
    if figures.per_op_seconds.get("tensorflow"):
        assert source in reasons["dispatch-cost"] and "TensorFlow ops run per step" in (
            reasons["dispatch-cost"])
        assert not any("devicebench ops --backend" in n for n in advice["notes"])
    else:  # TF's per-op cost was lost in the noise: no dispatch claim, and a pointer
        assert "dispatch-cost" not in reasons
        assert any("did not resolve TensorFlow's per-op cost" in n for n in advice["notes"])


def test_the_python_api_runs_the_op_sweep(tmp_path):
    """devicebench.api.ops: the library call behind `devicebench ops` (numpy only)."""
    from devicebench.api import ops

    out = ops(ops=("multiply",), modes=("eager",), backends=["numpy"],
                          sizes=(2, 64), db=tmp_path / "r.db")
    (worker,) = out.results
    assert worker.status == "ok" and [p.size for p in worker.points] == [2, 64]
    assert out.to_dict()["run_id"] == out.run_id and out.analysis.ops[0].op == "multiply"
