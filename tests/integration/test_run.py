"""`devicebench run` end to end: real worker processes, real TF/JAX on the CPU, a real
SQLite file. Trials are tiny and rounds few; nothing here asserts a wall-clock time."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from devicebench.advisor.equivalence import loss_check
from devicebench.store import ResultStore
from tests.conftest import (
    assert_one_line_error,
    requires_jax,
    requires_tf,
    requires_torch,
    requires_torch_cuda,
    run_cli,
)

ROOT = Path(__file__).resolve().parents[2]
W = str(ROOT / "tests" / "fixtures" / "workloads.py")
FAST = ["--rounds", "3", "--budget", "5", "--equivalence-steps", "10"]


def _trials(db: Path) -> dict[str, str]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT spec, status FROM trials").fetchall()
    finally:
        con.close()
    return {json.loads(spec)["workload"].rsplit(":", 1)[-1]: status for spec, status in rows}


@requires_tf
@requires_jax
def test_seed_rnn_tensorflow_vs_jax_same_loss_with_ci(tmp_path):
    db = tmp_path / "r.db"
    res = run_cli("run", "seed-rnn", "--backend", "tensorflow,jax", *FAST, "--json",
                  "--db", str(db))
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert (doc["schema"], doc["version"]) == ("devicebench.run", 2)
    rows = {r["spec"]["backend"]: r for r in doc["results"]}
    assert rows["tensorflow"]["is_reference"] and rows["tensorflow"]["status"] == "ok"
    jax = rows["jax"]
    assert jax["status"] == "ok", jax["error"]
    assert jax["loss_verdict"] == "same", jax["loss_detail"]
    sp = jax["speedup_vs_reference"]
    assert sp["ci95"][0] <= sp["value"] <= sp["ci95"][1] and sp["rounds"] == 3
    for r in rows.values():
        st = r["step_time_s"]
        assert st["ci95"][0] <= st["median"] <= st["ci95"][1]
        # One synced block per round in each of its worker processes (two where the
        # budget held a second process for the verdict's configurations).
        assert len(r["raw"]["block_seconds"]) == 3 * st["processes"]
        assert r["train_epoch_s"] == pytest.approx(st["median"] * 219)
        # seed 000 validates on 2,000 samples each epoch: Keras' epoch holds both passes
        assert r["validation_s"] > 0 and r["fit"]["validation_samples"] == 2000
        assert r["epoch_s"] == pytest.approx(r["train_epoch_s"] + r["validation_s"])
        assert r["fit"]["epochs"] == 20 and r["fit"]["fit_s"] >= 20 * r["fit"]["mean_epoch_s"]
        assert r["flops_per_step"] > 0 and r["peak_rss_bytes"] > 0
        assert r["peak_device_memory_bytes"] is None  # CPU: unknown, never 0
        assert r["first_step_s"] > 0 and r["warmup_s"] >= 0
        assert "the forum script's generator" in r["data_note"]
    assert rows["tensorflow"]["jit_resolved"] is False and jax["jit_resolved"] is True
    # TF's placement audit of the first step: every op of this CPU trial on the CPU.
    placed = rows["tensorflow"]["placement"]["ops_by_device"]
    assert set(placed) == {"CPU:0"} and placed["CPU:0"] > 10
    # The RNN's while-loop body (run once per timestep) is part of the graph, and the
    # input's (timesteps, features) shape is kept for the dispatch reason.
    assert 0 < rows["tensorflow"]["placement"]["loop_ops"] < placed["CPU:0"]
    assert rows["tensorflow"]["placement"]["input_shape"] == [50, 1]
    # JAX: kernels per step counted in the program XLA compiled for the train step; its
    # two loops (forward and backward over the 50 timesteps) run 50 times each.
    kp = jax["placement"]
    assert kp["loop_trips"] == 50 and 0 < kp["loop_kernels"] < kp["kernels_in_program"]
    assert kp["kernels_per_step"] > 50 * kp["loop_kernels"]
    for r in rows.values():  # the input pipeline, timed alone
        assert 0 < r["input_s_per_batch"] < r["step_time_s"]["median"] * 100
    with ResultStore.open(db) as store:
        stored = store.trials_for_run(doc["run_id"])
    assert {r.spec.backend: r.status for r in stored} == {"tensorflow": "ok", "jax": "ok"}
    assert all(len(r.block_seconds) == 3 * r.processes for r in stored)


@requires_jax
def test_faults_are_recorded_and_other_trials_survive(tmp_path):
    db = tmp_path / "f.db"
    names = ["tiny", "raises", "aborts", "hangs", "allocates", "produces_nan", "tiny2"]
    res = run_cli("run", *[f"{W}:{n}" for n in names], "--backend", "jax", *FAST,
                  "--timeout", "25", "--memory-limit", "1500", "--db", str(db))
    assert res.returncode == 1, res.stderr[-3000:]  # some trials failed
    assert "5 of 7 trials did not end ok" in res.stderr
    assert _trials(db) == {
        "tiny": "ok", "raises": "error", "aborts": "crashed", "hangs": "timeout",
        "allocates": "oom", "produces_nan": "nan", "tiny2": "ok",
    }
    assert "boom" in res.stdout and "SIGABRT" in res.stdout
    assert "process group killed" in res.stdout


@requires_jax
def test_sigint_keeps_finished_trials_and_resume_completes_the_rest(tmp_path):
    db = tmp_path / "s.db"
    cmd = [sys.executable, "-m", "devicebench", "run", f"{W}:tiny", f"{W}:hangs", f"{W}:tiny2",
           "--backend", "jax", *FAST, "--timeout", "300", "--db", str(db)]
    # A shell starting CI in the background (`cmd &`) runs it with SIGINT ignored, and
    # a child inherits that; give the command Ctrl-C's default, as in a terminal.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if db.exists() and _trials(db).get("tiny") == "ok":
                break
        except sqlite3.OperationalError:  # the run is still creating the schema
            pass
        time.sleep(0.5)
    assert _trials(db) == {"tiny": "ok"}, proc.stderr.read() if proc.poll() is not None else ""
    time.sleep(1)  # let the hanging trial's worker start
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    assert _trials(db) == {"tiny": "ok"}

    res = run_cli("run", f"{W}:tiny", f"{W}:tiny2", "--backend", "jax", *FAST, "--resume",
                  "--db", str(db))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "stored result reused" in res.stdout
    assert _trials(db) == {"tiny": "ok", "tiny2": "ok"}
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM trials").fetchone()[0] == 2  # tiny not re-run
    con.close()
    # Stored results are shown as stored, apart: never paired round by round with trials
    # of another run, never a second "reference".
    res = run_cli("run", f"{W}:tiny", f"{W}:tiny2", "--backend", "jax", *FAST, "--resume",
                  "--json", "--db", str(db))
    rows = json.loads(res.stdout)["results"]
    assert [r["loss_verdict"] for r in rows] == ["stored", "stored"]
    assert not any(r["is_reference"] or "speedup_vs_reference" in r for r in rows)



def test_bad_run_inputs_give_one_line_and_exit_2(tmp_path):
    db = ["--db", str(tmp_path / "ok.db")]
    assert_one_line_error(run_cli("run", "seed-rnm", *db), "unknown workload")
    assert_one_line_error(run_cli("run", "seed-rnn", "--backend", "caffe", *db), "unknown backend")
    assert_one_line_error(run_cli("run", "seed-rnn", "--device", "gpu:7", *db), "no device")
    assert_one_line_error(run_cli("run", "seed-rnn", "--device", "cuda", *db), "unknown device")
    assert_one_line_error(run_cli("run", "seed-rnn", "--precision", "fp8", *db), "precision")
    assert_one_line_error(run_cli("run", "seed-rnn", "--batch-size", "0", *db), "batch-size")
    assert_one_line_error(run_cli("run", "seed-rnn", "--batch-size", "x", *db), "batch-size")
    assert_one_line_error(run_cli("run", f"{W}:missing", *db), "no function 'missing'")
    assert_one_line_error(run_cli("run", "nope.py:f", *db), "not found")
    assert_one_line_error(run_cli("run", "seed-rnn", "--db", str(tmp_path)), "directory")
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not a database" * 100)
    assert_one_line_error(run_cli("run", "seed-rnn", "--db", str(corrupt)), "corrupt.db")
    newer = tmp_path / "newer.db"
    con = sqlite3.connect(newer)
    con.execute("PRAGMA user_version = 99")
    con.close()
    assert_one_line_error(run_cli("run", "seed-rnn", "--db", str(newer)), "upgrade")


def test_workloads_command_lists_flops():
    res = run_cli("workloads", "--json")
    assert res.returncode == 0, res.stderr
    rows = {r["name"]: r for r in json.loads(res.stdout)["workloads"]}
    assert {"seed-rnn", "mnist-cnn", "lstm-forecast", "mlp", "small-resnet",
            "tiny-transformer"} <= set(rows)
    assert all(r["flops_per_step"] and r["flops_per_step"] > 0 for r in rows.values())


@requires_tf
def test_a_live_group_prunes_a_trial_and_switches_how_blocks_are_cut(tmp_path):
    """What the advisor's search does with real workers: set up once, two K-step
    rounds, finish (prune) one trial, then whole-epoch rounds for the rest."""
    from devicebench.trials.engine import RunOptions, TrialGroup
    from devicebench.trials.spec import TrialSpec

    base = TrialSpec(f"{W}:tiny")
    other = base.with_(jit="on")
    stored = []
    with TrialGroup(base, RunOptions(equivalence_steps=50, max_warmup_seconds=2),
                    equivalence_seconds=0.0, on_result=stored.append,
                    loss_check=loss_check) as group:
        group.add([base, other])
        # The time cap leaves the fewest equivalence steps, and the verdict says so.
        assert len(group.results[base].equivalence_losses) == 10
        assert group.results[other].loss_verdict == "same"
        assert "of 10" in group.results[other].loss_detail
        group.measure(RunOptions(min_rounds=2, max_rounds=2, whole_epoch_seconds=0.0))
        k_step = group.results[base].steps_per_block
        assert group.rounds_done == 2 and k_step <= group.results[base].steps_per_epoch
        group.finish([other])
        assert [r.spec for r in stored] == [other]  # final as soon as it is pruned
        assert len(group.results[other].block_seconds) == 2
        group.measure(RunOptions(min_rounds=3, max_rounds=3, whole_epoch_seconds=10.0))
        r = group.results[base]
        # Blocks now hold whole epochs; the K-step blocks were dropped, not mixed in.
        assert r.steps_per_block % r.steps_per_epoch == 0
        assert len(r.block_seconds) == 3 and r.block_rounds == (2, 3, 4)
        group.finish()
    assert [x.spec for x in stored] == [other, base] and r.status == "ok"


@pytest.mark.slow  # the screening rule is held by unit tests on a fake group
@requires_tf
@requires_jax
def test_set_up_step_times_and_early_stop_under_a_screening_threshold():
    """Each trial's set-up times its steps (on JAX, whose train_on_batch copies every
    variable each call, with short fits); under a screening threshold a trial already
    slower stops its equivalence steps early and its loss verdict says over how many."""
    from devicebench.trials.blocks import SCREEN_MIN_STEPS
    from devicebench.trials.engine import RunOptions, TrialGroup
    from devicebench.trials.spec import TrialSpec

    base = TrialSpec(f"{W}:tiny")
    jax, xla = base.with_(backend="jax"), base.with_(jit="on")
    with TrialGroup(base, RunOptions(equivalence_steps=30, max_warmup_seconds=1),
                    loss_check=loss_check) as group:
        group.add([base, jax])
        r = group.results
        assert r[base].setup_step_method == "train_on_batch" and r[base].setup_steps == 29
        assert r[jax].setup_step_method == "fit" and r[jax].setup_step_seconds > 0
        assert r[jax].loss_verdict == "same" and "of 30" in r[jax].loss_detail
    # A threshold no step can be under (a factor of 1e-9 x the fastest so far).
    with TrialGroup(base, RunOptions(equivalence_steps=30, max_warmup_seconds=1),
                    screen_factor=1e-9, loss_check=loss_check) as group:
        group.add([base, xla])
        r = group.results
        assert len(r[base].equivalence_losses) == 30  # the reference is never cut short
        assert len(r[xla].equivalence_losses) == SCREEN_MIN_STEPS
        assert r[xla].loss_verdict == "same" and f"of {SCREEN_MIN_STEPS}" in r[xla].loss_detail


@requires_torch
def test_a_torch_trial_counts_the_ops_one_step_dispatches(tmp_path):
    """On the torch backend one set-up step runs under torch.profiler: what it
    dispatched (top-level ATen ops on a CPU, kernels on CUDA) is the trial's count."""
    res = run_cli("run", f"{W}:tiny", "--backend", "torch", *FAST, "--json",
                  "--db", str(tmp_path / "r.db"))
    assert res.returncode == 0, res.stderr[-3000:]
    (row,) = json.loads(res.stdout)["results"]
    assert row["status"] == "ok", row["error"]
    p = row["placement"]
    assert p["kernels_per_step"] > 5 and "ATen ops" in p["kernel_source"]
    assert row["step_time_s"]["median"] > 0


@pytest.mark.gpu
@requires_torch_cuda
def test_torch_tf32_on_the_gpu_is_loss_checked_and_counts_gpu_kernels(tmp_path):
    res = run_cli("run", f"{W}:tiny", "--backend", "torch", "--device", "gpu:0",
                  "--precision", "float32,tf32", *FAST, "--json", "--db", str(tmp_path / "r.db"))
    assert res.returncode == 0, res.stderr[-3000:]
    rows = {r["spec"]["precision"]: r for r in json.loads(res.stdout)["results"]}
    assert rows["tf32"]["status"] == "ok" and rows["tf32"]["loss_verdict"] == "same"
    assert "GPU kernels" in rows["float32"]["placement"]["kernel_source"]


@requires_jax
def test_the_python_api_runs_what_the_cli_runs(tmp_path):
    """devicebench.run: the library call behind `devicebench run`, typed results."""
    import devicebench
    from devicebench.errors import DevicebenchError

    out = devicebench.run([f"{W}:tiny"], backends=["jax"], rounds=3, budget=5,
                          equivalence_steps=10, db=tmp_path / "r.db")
    (row,) = out.rows
    assert row.result.status == "ok" and row.is_reference and out.failed == []
    assert len(row.result.block_seconds) == 3 * row.result.processes
    assert row.result.run_id == out.run_id
    with ResultStore.open(tmp_path / "r.db") as store:
        assert [t.spec for t in store.trials_for_run(out.run_id)] == [row.result.spec]
    with pytest.raises(DevicebenchError, match="no device 'gpu:7'"):
        devicebench.run([f"{W}:tiny"], devices=["gpu:7"], db=tmp_path / "r.db")
