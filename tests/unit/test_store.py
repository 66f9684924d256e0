"""The results store on real SQLite files in tmp_path."""

from __future__ import annotations

import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from devicebench.env.snapshot import (
    DeviceInfo,
    EnvSnapshot,
    FrameworkProbe,
    HostInfo,
    NvidiaGpu,
    NvidiaSmi,
)
from devicebench.errors import StoreError
from devicebench.ops.result import OpsPoint, OpsWorkerResult
from devicebench.store import (
    CURRENT_SCHEMA,
    ResultStore,
    default_db_path,
    machine_fingerprint,
    schema,
)
from devicebench.store import db as db_module
from devicebench.store.ops import add_ops_result, latest_ops_run, load_ops_results
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec

V1_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "results_v1.db"


def make_snapshot(tf: str = "2.21.0", gpu: str = "NVIDIA H200", **host: object) -> EnvSnapshot:
    info = dict(os="Linux", os_version="Debian 12", machine="x86_64", python_arch="x86_64",
                python_version="3.11.7", python_implementation="CPython",
                cpu_model="Xeon", cpu_cores_physical=8, cpu_cores_logical=16)
    info.update(host)
    return EnvSnapshot(
        created_at="2026-05-10T09:00:00+00:00", host=HostInfo(**info),
        distributions={"tensorflow": tf, "keras": "3.15.0", "jax": "0.7.2", "numpy": "2.1"},
        nvidia_smi=NvidiaSmi(gpus=[NvidiaGpu(index=0, name=gpu)]),
        env_vars={"CUDA_VISIBLE_DEVICES": "0"},
    )


def make_result(backend: str = "tensorflow", status: str = "ok", **changes: object) -> TrialResult:
    fields = dict(
        spec=TrialSpec("seed-rnn", backend=backend, jit="on", batch_size=64, seed=3),
        status=status, import_seconds=2.5, setup_seconds=0.6, first_step_seconds=1.3,
        warmup_seconds=0.2, warmup_blocks=2, steps_per_block=20, batch_size=64,
        steps_per_epoch=110, block_seconds=[0.1262, 0.1198, 0.1311, 0.12250000000000001],
        block_rounds=[0, 1, 2, 3], flops_per_step=28_800.0, peak_device_memory_bytes=None,
        peak_rss_bytes=900_000_000, loss_checkpoints={"0": 0.21, "100": 0.05},
        equivalence_losses=[0.21, 0.2, 0.19], final_loss=0.031, nonfinite=False,
        jit_resolved=True, data_note="synthetic", loss_verdict="same", loss_detail="1e-7",
    )
    fields.update(changes)
    return TrialResult(**fields)  # type: ignore[arg-type]


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "results.db"


@pytest.fixture
def store(db_path: Path):
    with ResultStore.open(db_path) as s:
        yield s


def test_round_trip_keeps_every_field_raw_samples_and_spec_key(store: ResultStore) -> None:
    machine = store.add_machine(make_snapshot())
    run = store.start_run(machine, "devicebench run seed-rnn", {"rounds": 4})
    ok = make_result()
    failed = make_result("jax", status="error", error="boom", traceback_tail="Trace...",
                         block_seconds=[], block_rounds=[], final_loss=None)
    store.add_trial(run, ok)
    store.add_trial(run, failed)

    assert store.trials_for_run(run) == [ok, failed]
    assert store.latest_result(machine, ok.spec.key) == ok
    assert store.latest_result(machine, failed.spec.key) is None  # default: ok results only
    assert store.latest_result(machine, failed.spec.key, status=None) == failed
    keys = [r[0] for r in store.connection.execute("SELECT spec_key FROM trials ORDER BY id")]
    assert keys == [ok.spec.key, failed.spec.key]
    samples = store.connection.execute(
        "SELECT round, seconds, steps FROM samples ORDER BY trial_id, idx").fetchall()
    assert samples == [(r, s, 20) for r, s in zip(ok.block_rounds, ok.block_seconds,
                                                   strict=True)]


def test_a_result_comes_back_with_its_run_and_group(store: ResultStore) -> None:
    run = store.start_run(store.add_machine(make_snapshot()), "run", {})
    store.add_trial(run, make_result(group_id="3f9c2a", run_id=None))
    (back,) = store.trials_for_run(run)
    assert (back.run_id, back.group_id) == (run, "3f9c2a")
    row = store.connection.execute("SELECT result FROM trials").fetchone()[0]
    assert "run_id" not in json.loads(row)  # the row's own column says it


def test_nan_loss_survives_the_round_trip(store: ResultStore) -> None:
    run = store.start_run(store.add_machine(make_snapshot()), "run", {})
    store.add_trial(run, make_result(status="nan", final_loss=float("nan"), nonfinite=True))
    (back,) = store.trials_for_run(run)
    assert back.status == "nan" and back.nonfinite and math.isnan(back.final_loss)


def test_machine_upsert_is_idempotent_and_fingerprint_tracks_the_stack(
        store: ResultStore) -> None:
    first = store.add_machine(make_snapshot())
    later = make_snapshot()
    later.created_at = "2027-01-01T00:00:00+00:00"
    later.env_vars = {}
    assert store.add_machine(later) == first
    assert store.add_machine(make_snapshot(tf="2.22.0")) != first
    assert store.add_machine(make_snapshot(gpu="NVIDIA A100")) != first
    count = store.connection.execute("SELECT count(*) FROM machines").fetchone()[0]
    assert count == 3


def test_fingerprint_hashes_cpu_gpu_os_python_and_framework_versions() -> None:
    fp, ident = machine_fingerprint(make_snapshot())
    assert ident == {
        "cpu": "Xeon", "cores": {"physical": 8, "logical": 16}, "gpus": ["NVIDIA H200"],
        "os": "Linux Debian 12 x86_64", "python": "CPython 3.11.7 x86_64",
        "frameworks": {"tensorflow": "2.21.0", "keras": "3.15.0", "jax": "0.7.2"},
    }
    assert machine_fingerprint(make_snapshot())[0] == fp
    assert machine_fingerprint(make_snapshot(python_version="3.12.1"))[0] != fp
    apple = EnvSnapshot(host=HostInfo(apple_chip="Apple M1 Ultra"))
    assert machine_fingerprint(apple)[1]["gpus"] == ["Apple M1 Ultra"]
    # Without nvidia-smi or an Apple chip, the frameworks' GPU descriptions name the GPU.
    metal = EnvSnapshot(frameworks={"tensorflow": FrameworkProbe(
        physical_devices=[DeviceInfo(kind="GPU", description="METAL"),
                          DeviceInfo(kind="CPU", description="cpu")])})
    assert machine_fingerprint(metal)[1]["gpus"] == ["METAL"]


def test_completed_specs_counts_only_ok_trials_of_this_machine(store: ResultStore) -> None:
    here = store.add_machine(make_snapshot())
    there = store.add_machine(make_snapshot(gpu="NVIDIA A100"))
    run_here = store.start_run(here, "run", {})
    ok = make_result("tensorflow")
    store.add_trial(run_here, ok)
    store.add_trial(run_here, make_result("jax", status="crashed"))
    store.add_trial(run_here, make_result("torch", status="timeout"))
    store.add_trial(store.start_run(there, "run", {}), make_result("jax"))

    assert store.completed_specs(here) == {ok.spec.key}
    assert store.completed_specs(there) == {make_result("jax").spec.key}


def test_each_trial_is_durable_before_finish_run(store: ResultStore, db_path: Path) -> None:
    run = store.start_run(store.add_machine(make_snapshot()), "run", {})
    result = make_result()
    store.add_trial(run, result)
    other = sqlite3.connect(db_path)
    try:
        spec_key, status = other.execute("SELECT spec_key, status FROM trials").fetchone()
        n_samples = other.execute("SELECT count(*) FROM samples").fetchone()[0]
        finished = other.execute("SELECT finished_at FROM runs").fetchone()[0]
    finally:
        other.close()
    assert (spec_key, status, n_samples) == (result.spec.key, "ok", len(result.block_seconds))
    assert finished is None
    store.finish_run(run)
    assert store.runs()[0].finished_at is not None


def test_a_killed_parent_loses_no_finished_trial(db_path: Path) -> None:
    child = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_store import make_result, make_snapshot
        from devicebench.store import ResultStore
        store = ResultStore.open({str(db_path)!r})
        run = store.start_run(store.add_machine(make_snapshot()), "run", {{}})
        store.add_trial(run, make_result())
        os.kill(os.getpid(), signal.SIGKILL)  # no close, no finish_run
    """)
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr.decode()
    with ResultStore.open(db_path) as store:
        (summary,) = store.runs()
        assert summary.finished_at is None and summary.trials == 1
        assert store.trials_for_run(summary.id) == [make_result()]


def test_migrates_the_committed_version_1_database(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(V1_FIXTURE, path)
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 1
    v1 = {i: json.loads(r) for i, r in raw.execute("SELECT id, result FROM trials")}
    raw.close()
    assert len(v1) == 2 and all(len(r["block_seconds"]) >= 3 for r in v1.values())

    with ResultStore.open(path) as store:
        c = store.connection
        assert c.execute("PRAGMA user_version").fetchone()[0] == CURRENT_SCHEMA == 5
        tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"samples", "ops_runs", "ops_points", "monitor_blocks"} <= tables
        assert load_ops_results(store, 1) == []
        for trial_id, old in v1.items():
            rows = c.execute("SELECT round, seconds, steps FROM samples WHERE trial_id = ? "
                             "ORDER BY idx", (trial_id,)).fetchall()
            assert [r[0] for r in rows] == old["block_rounds"]
            assert [r[1] for r in rows] == old["block_seconds"]
            assert {r[2] for r in rows} == {old["steps_per_block"]}
        assert c.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND "
                         "name = 'trials_spec_status'").fetchone()
        loaded = store.trials_for_run(1)
        assert loaded == [TrialResult.from_dict(v1[1]), TrialResult.from_dict(v1[2])]
        assert [r.spec.backend for r in loaded] == ["tensorflow", "jax"]
        assert store.completed_specs(1) == {r.spec.key for r in loaded}
        # Stored before results carried their group: one group per run and workload.
        assert {(r.run_id, r.group_id) for r in loaded} == {(1, "run1")}


def test_a_failing_migration_rolls_back_whole(db_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_v2(conn: sqlite3.Connection) -> None:
        conn.execute(schema.V2_STATEMENTS[0])  # creates samples, then fails
        conn.execute("CREATE INDEX broken ON no_such_table(x)")

    monkeypatch.setitem(schema.MIGRATIONS, 2, broken_v2)
    with pytest.raises(StoreError):
        ResultStore.open(db_path)
    raw = sqlite3.connect(db_path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 1
    assert raw.execute("SELECT name FROM sqlite_master WHERE name = 'samples'").fetchone() is None
    raw.close()
    monkeypatch.undo()
    with ResultStore.open(db_path) as store:
        assert store.connection.execute("PRAGMA user_version").fetchone()[0] == CURRENT_SCHEMA


def test_a_newer_schema_says_upgrade(db_path: Path) -> None:
    ResultStore.open(db_path).close()
    raw = sqlite3.connect(db_path)
    raw.execute("PRAGMA user_version = 99")
    raw.close()
    with pytest.raises(StoreError, match="upgrade devicebench") as info:
        ResultStore.open(db_path)
    assert "99" in str(info.value) and info.value.exit_code == 2


def test_a_corrupt_file_is_a_store_error(db_path: Path) -> None:
    db_path.write_bytes(b"definitely not sqlite \x00\xff" * 200)
    with pytest.raises(StoreError, match="not a usable results database"):
        ResultStore.open(db_path)


def test_another_programs_sqlite_file_is_refused(db_path: Path) -> None:
    raw = sqlite3.connect(db_path)
    raw.execute("CREATE TABLE machines (x)")
    raw.close()
    with pytest.raises(StoreError, match="some other program"):
        ResultStore.open(db_path)


def test_a_directory_path_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is a directory"):
        ResultStore.open(tmp_path)


def test_a_path_under_a_regular_file_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    with pytest.raises(StoreError, match="cannot create the directory"):
        ResultStore.open(tmp_path / "afile" / "results.db")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root can write anywhere")
def test_a_read_only_directory_is_a_store_error(tmp_path: Path) -> None:
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        with pytest.raises(StoreError, match="cannot write"):
            ResultStore.open(locked / "results.db")
    finally:
        locked.chmod(0o755)


def test_a_lock_held_past_the_busy_timeout_is_a_store_error(db_path: Path) -> None:
    with ResultStore.open(db_path) as store:
        assert store.connection.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
        run = store.start_run(store.add_machine(make_snapshot()), "run", {})
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with ResultStore.open(db_path, busy_timeout_ms=100) as store:
            with pytest.raises(StoreError, match="is locked.*another devicebench process"):
                store.add_trial(run, make_result())
            holder.execute("ROLLBACK")
            store.add_trial(run, make_result())
            assert len(store.trials_for_run(run)) == 1
    finally:
        holder.close()


def test_wal_mode_and_foreign_keys_are_on(store: ResultStore, db_path: Path) -> None:
    raw = sqlite3.connect(db_path)
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    raw.close()
    assert store.connection.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    with pytest.raises(StoreError, match="refers to a machine or run"):
        store.add_trial(12345, make_result())
    assert store.connection.execute("SELECT count(*) FROM trials").fetchone()[0] == 0


def test_default_path_is_created_in_the_user_data_dir(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(db_module.platformdirs, "user_data_dir",
                        lambda app: str(tmp_path / "data" / app))
    assert default_db_path() == tmp_path / "data" / "devicebench" / "results.db"
    with ResultStore.open(None) as store:
        assert store.path == str(default_db_path())
    assert default_db_path().is_file()


def test_runs_summarise_newest_first_and_finish_run_checks_the_id(store: ResultStore) -> None:
    machine = store.add_machine(make_snapshot())
    first = store.start_run(machine, "devicebench run a", {"x": 1})
    store.add_trial(first, make_result())
    store.add_trial(first, make_result("jax", status="oom"))
    store.finish_run(first)
    second = store.start_run(machine, "devicebench run b", {})
    summaries = store.runs()
    assert [(s.id, s.command, s.trials, s.ok) for s in summaries] == [
        (second, "devicebench run b", 0, 0), (first, "devicebench run a", 2, 1)]
    assert summaries[1].finished_at and summaries[0].finished_at is None
    assert summaries[0].gpu == "NVIDIA H200"
    assert len(store.runs(limit=1)) == 1
    with pytest.raises(StoreError, match="no run 999"):
        store.finish_run(999)


def test_ops_results_round_trip_with_raw_blocks(store: ResultStore) -> None:
    run = store.start_run(store.add_machine(make_snapshot()), "ops", {"sizes": [2, 64]})
    tf = OpsWorkerResult("tensorflow", "cpu", info={"version": "2.21.0"}, points=[
        OpsPoint("multiply", "eager", 2, calls_per_block=300, block_seconds=(0.0051, 0.0049),
                 first_call_seconds=0.01),
        OpsPoint("multiply", "in-graph", 2, calls_per_block=20, chain=16,
                 block_seconds=(0.006, 0.0062, 0.0058)),
        OpsPoint("matmul", "eager", 4096, status="skipped", reason="over the limit"),
    ])
    gpu = OpsWorkerResult("torch", "gpu:0", status="unavailable", error="no CUDA")
    add_ops_result(store, run, tf)
    add_ops_result(store, run, gpu)
    assert load_ops_results(store, run) == [tf, gpu]
    median = store.connection.execute(
        "SELECT median_call_seconds FROM ops_points WHERE mode = 'eager' AND size = 2"
    ).fetchone()[0]
    assert median == pytest.approx(0.005 / 300)
    with pytest.raises(StoreError, match="refers to a machine or run"):
        add_ops_result(store, 999, tf)


def test_latest_ops_run_is_the_newest_finished_one_of_this_machine(store: ResultStore
                                                                  ) -> None:
    machine = store.add_machine(make_snapshot())
    assert latest_ops_run(store, machine) is None
    ok = OpsWorkerResult("numpy", "cpu", points=[
        OpsPoint("matmul", "eager", 64, calls_per_block=10, block_seconds=(0.001, 0.001))])
    older = store.start_run(machine, "ops", {})
    add_ops_result(store, older, ok)
    store.finish_run(older)
    failed = store.start_run(machine, "ops", {})  # finished, but measured nothing
    add_ops_result(store, failed, OpsWorkerResult("torch", "gpu:0", status="unavailable"))
    store.finish_run(failed)
    interrupted = store.start_run(machine, "ops", {})  # never finished
    add_ops_result(store, interrupted, ok)
    store.finish_run(store.start_run(machine, "run", {}))
    run_id, workers = latest_ops_run(store, machine)
    assert run_id == older and workers == [ok]
    other = make_snapshot(cpu_model="Another CPU")
    assert latest_ops_run(store, store.add_machine(other)) is None


def test_a_failing_v3_migration_leaves_version_2(db_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_v3(conn: sqlite3.Connection) -> None:
        conn.execute(schema.V3_STATEMENTS[0])  # creates ops_runs, then fails
        conn.execute("CREATE INDEX broken ON no_such_table(x)")

    monkeypatch.setitem(schema.MIGRATIONS, 3, broken_v3)
    with pytest.raises(StoreError):
        ResultStore.open(db_path)
    raw = sqlite3.connect(db_path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 2
    assert raw.execute("SELECT name FROM sqlite_master WHERE name = 'ops_runs'").fetchone() is None
    raw.close()
