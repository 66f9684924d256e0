"""`devicebench advise` on real CPU runs (tiny workloads, short budgets)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import devicebench
from tests.conftest import (
    assert_one_line_error,
    requires_jax,
    requires_tf,
    run_cli,
    save_keras_model,
)

ROOT = Path(__file__).resolve().parents[2]
W = str(ROOT / "tests" / "fixtures" / "workloads.py")


@pytest.mark.slow  # unit tests hold the rejection; the main job runs a real search
@requires_jax
@requires_tf
def test_search_rejects_nan_candidate_and_compares_with_baseline(tmp_path):
    res = run_cli("advise", f"{W}:nan_on_tensorflow", "--baseline", "backend=jax",
                  "--budget", "30", "--json", "--db", str(tmp_path / "a.db"))
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert (doc["schema"], doc["version"]) == ("devicebench.advise", 1)
    cands = {c["spec"]["backend"] + "/" + c["spec"]["jit"]: c for c in doc["candidates"]}
    assert cands["tensorflow/auto"]["rejected"].startswith("nan: ")
    assert "loss became nan" in cands["tensorflow/auto"]["rejected"]
    final = {r["label"]: r for r in doc["final"]}
    assert final["jax/cpu"]["is_reference"] and final["jax/cpu"]["status"] == "ok"
    assert doc["verdict"]
    if doc["recommended"] is not None:
        assert doc["recommended"]["backend"] != "tensorflow"
        sp = doc["speedup_vs_baseline"]
        assert sp["ci95"][0] > 1  # recommended only when significantly faster
        assert doc["code"]
    else:
        assert doc["verdict"].startswith("keep jax/cpu")


@pytest.mark.slow  # test_script_capture and test_fit_figures run saved-model workloads
@requires_jax
def test_python_api_on_a_saved_keras_model_round_trip(tmp_path):
    model_path = tmp_path / "small.keras"
    save_keras_model(model_path, "keras.Input((8,)), keras.layers.Dense(16, activation='relu'),"
                     " keras.layers.Dense(3, activation='softmax')",
                     "sparse_categorical_crossentropy", "keras.optimizers.Adam(0.01)")
    advice = devicebench.advise(str(model_path), budget=20, baseline="backend=jax",
                                db=tmp_path / "b.db")
    assert advice.baseline_row is not None and advice.baseline_row.result.status == "ok"
    assert "synthetic 2048 samples" in advice.data_note
    assert advice.verdict
    assert {o.spec.backend for o in advice.outcomes} - {"jax"}  # other backends were tried
    assert json.loads(json.dumps(advice.to_dict(), default=str))["workload"] == str(model_path)



@requires_jax
def test_user_workload_errors_each_give_their_line(tmp_path):
    db = ["--db", str(tmp_path / "e.db"), "--baseline", "backend=jax"]
    assert_one_line_error(run_cli("advise", "nope/train.py:make", *db), "not found")
    assert_one_line_error(run_cli("advise", f"{W}:no_such_function", *db), "no function")
    assert_one_line_error(run_cli("advise", f"{W}:not_a_workload", *db),
                          "not a devicebench Workload")
    assert_one_line_error(run_cli("advise", f"{W}:misfit", *db), "does not fit the model")
    assert_one_line_error(run_cli("advise", str(tmp_path / "m.keras"), *db), "not found")
    bad = tmp_path / "bad.keras"
    bad.write_text("not a zip")
    assert_one_line_error(run_cli("advise", str(bad), *db), "not a Keras 3 .keras archive")
    assert_one_line_error(run_cli("advise", "seed-rnn", "--baseline", "gpu", "--db",
                             str(tmp_path / "e.db")), "bad --baseline")


@requires_jax
def test_the_dispatch_probe_measures_and_stores_per_op_costs_once(tmp_path):
    """With no `ops` run stored, the main job measures the per-op costs its reasons
    use (a few seconds, real workers) and stores them where advise reads them."""
    from devicebench.advisor.figures import device_figures
    from devicebench.env.probe import probe_host_layer
    from devicebench.jobs.advise import ensure_dispatch_figures
    from devicebench.store import ResultStore
    from devicebench.store.ops import latest_ops_run

    db, snap = tmp_path / "r.db", probe_host_layer()
    events: list = []
    line = ensure_dispatch_figures(db, snap, "jax", on_progress=events.append)
    assert line is not None and "jax on cpu" in line and "ops run #" in line
    # It says what it measures, through the progress protocol: each worker, k of n.
    assert [e.kind for e in events][0] == "started" and events[-1].kind == "finished"
    workers = [e for e in events if e.kind == "progress"]  # the CPU, then any accelerator
    assert [(e.job, e.done, e.total) for e in workers] == [
        ("dispatch probe", i, len(workers)) for i in range(len(workers))]
    assert workers[0].message.startswith("measuring jax/cpu")
    with ResultStore.open(db) as store:
        run_id, workers = latest_ops_run(store, store.add_machine(snap))
    f = device_figures(run_id, workers, "cpu")
    assert f.per_op_seconds["jax"] > 0 and f.call_seconds["jax"] > f.per_op_seconds["jax"]
    assert f.per_op_labels["jax"].startswith("matmul")  # XLA fuses chained multiplies
    # Its 2x2 and 8x8 matmuls time dispatch: no matmul peak (the search bounds a step by
    # FLOPs at the peak; a "peak" of a few MFLOP/s would rule every candidate out).
    assert f.peak_gflops is None
    assert ensure_dispatch_figures(db, snap, "jax") is None  # stored: not measured again
