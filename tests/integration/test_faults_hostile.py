"""The fault suite, round two (issue 27): hostile input and injected faults, end to end
with real worker processes and real SQLite files; numbered as the issue's items. The
pure parts are in tests/unit/test_hostile_input.py."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, requires_jax, run_cli

ROOT = Path(__file__).resolve().parents[2]
W = str(ROOT / "tests" / "fixtures" / "workloads.py")
ONE = ["--backend", "jax", "--rounds", "1", "--budget", "5", "--equivalence-steps", "2"]


def _statuses(db: Path) -> list[str]:
    con = sqlite3.connect(db)
    try:
        return [json.loads(r)["status"] for (r,) in con.execute("SELECT result FROM trials")]
    finally:
        con.close()


# -- 1 and 12: a realistic workload file (constants, a lambda, a sibling import) --------

# -- 1, 12, 5, 11: user code in one real run (one CLI process, one trial per workload) --

REALISTIC = str(ROOT / "tests" / "fixtures" / "user_dir" / "realistic.py") + ":workload"


@pytest.fixture(scope="module")
def user_code_run(tmp_path_factory):
    """A realistic workload file (constants, a lambda, a sibling import), one whose build
    starts a process, one whose layer raises, one whose build returns a str."""
    tmp = tmp_path_factory.mktemp("user_code")
    pidfile, db = tmp / "pids", tmp / "u.db"
    res = run_cli("run", REALISTIC, f"{W}:spawns_sleeper", f"{W}:layer_raises",
                  f"{W}:builds_a_string", *ONE, "--db", str(db),
                  env={"PYTHONPATH": str(ROOT), "DEVICEBENCH_TEST_PIDFILE": str(pidfile)})
    con = sqlite3.connect(db)
    try:
        stored = {json.loads(spec)["workload"].rsplit(":", 1)[-1]: json.loads(result)
                  for spec, result in con.execute("SELECT spec, result FROM trials")}
    finally:
        con.close()
    return res, stored, pidfile


@requires_jax
def test_a_realistic_workload_file_runs(user_code_run):
    res, stored, _ = user_code_run
    assert res.returncode == 1, res.stderr[-2000:]  # the two broken ones, below
    assert "2 of 4 trials did not end ok (error 2)" in res.stderr
    assert stored["workload"]["status"] == "ok", stored["workload"]["error"]


@requires_jax
def test_a_process_the_workload_starts_ends_with_an_ok_trial(user_code_run):
    import psutil

    _, stored, pidfile = user_code_run
    assert stored["spawns_sleeper"]["status"] == "ok"
    pids = [int(p) for p in pidfile.read_text().split()]
    assert pids  # the build ran (in the trial's worker)
    alive = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            if proc.status() != psutil.STATUS_ZOMBIE and "sleep" in proc.name():
                alive.append(proc)
        except psutil.NoSuchProcess:
            pass
    for proc in alive:  # never leave one behind, even when the test fails
        proc.kill()
    assert not alive, f"outlived their trial: {[p.pid for p in alive]}"


@requires_jax
def test_a_layer_error_and_a_non_model_name_their_cause(user_code_run):
    res, stored, _ = user_code_run
    assert stored["layer_raises"]["error"] == \
        "RuntimeError: custom layer exploded on purpose (raised in Boom.call())"
    assert stored["builds_a_string"]["error"].startswith(
        "TypeError: build_model returned str, not a keras.Model")
    flat = " ".join(res.stdout.split())  # the table wraps long lines
    assert "custom layer exploded on purpose" in flat and "has no attribute" not in flat


def test_a_too_long_workload_path_is_one_line():
    assert_one_line_error(run_cli("run", "a" * 5000 + ".py:w"), "File name too long", "fix:")


# -- 2. the store locked at commit time: the result is returned, set aside, imported ----

@pytest.mark.slow  # test_hostile_store holds the locked store (set aside, imported) without TF
@requires_jax
def test_a_store_locked_at_commit_time_loses_nothing(tmp_path, monkeypatch):
    import devicebench
    from devicebench.store import ResultStore, db, pending

    monkeypatch.setattr(db, "BUSY_TIMEOUT_MS", 100)
    monkeypatch.setattr(pending, "RETRY_DELAYS_S", (0.05, 0.1))
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)

    def lock_when_measuring_starts(event):  # the progress seam: after the run is started
        if event.kind == "started":
            holder.execute("BEGIN EXCLUSIVE")

    outcome = devicebench.run(["mlp"], backends=["jax"], rounds=1, budget=5,
                              equivalence_steps=2, db=path,
                              on_progress=lock_when_measuring_starts)
    assert [r.result.status for r in outcome.rows] == ["ok"]  # measured and returned
    assert outcome.store_problems and "locked.db.pending.jsonl" in outcome.store_problems[0]
    holder.execute("ROLLBACK")
    holder.close()
    with ResultStore.open(path) as store:
        stored = store.trials_for_run(outcome.run_id)
    assert [t.block_seconds for t in stored] == [outcome.rows[0].result.block_seconds]
    assert not pending.pending_path(path).exists()


# -- 3. a bad bundle is refused whole; the store stays readable --------------------------

def test_a_bundle_with_a_negative_block_is_refused_and_report_still_works(tmp_path):
    bundle = json.loads((ROOT / "tests" / "fixtures" / "bundles" / "h200.json").read_text())
    bundle["runs"][-1]["trials"][0]["block_seconds"] = [-5.0]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bundle))
    db = ["--db", str(tmp_path / "b.db")]
    assert_one_line_error(run_cli("import", str(path), *db),
                          "bad.json: run 2, trial 1: block_seconds[0] must be positive")
    good = run_cli("import", str(ROOT / "tests" / "fixtures" / "bundles" / "h200.json"), *db)
    assert good.returncode == 0, good.stderr
    res = run_cli("report", *db)  # the default --last: no ValueError from a poisoned row
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-2000:]


# -- 4. doctor reads a piped script once -------------------------------------------------

def test_doctor_on_stdin_reads_the_piped_script():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "devicebench", "doctor", "/dev/stdin",
                           "--frameworks", "none", "--json"],
                          input="import keras\nmodel.compile(run_eagerly=True)\n",
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["script"]["lines"] == 2 and out["script"]["findings"] == 1
    assert "script.run-eagerly" in [f["id"] for f in out["findings"]]


# -- 6 and 15. the CLI's limits are the API's (one table), refused before anything runs --

def test_cli_limits_come_from_the_one_table(tmp_path):
    from devicebench.validate import LIMITS

    db = ["--db", str(tmp_path / "never.db")]
    too_many = str(int(LIMITS["equivalence_steps"].hi) + 1)
    for args, needle in ((["run", "--equivalence-steps", too_many], "--equivalence-steps"),
                         (["run", "--seed", "-1"], "--seed"),
                         (["run", "--rounds", "0"], "--rounds"),
                         (["run", "--backend", ""], "--backend is empty"),
                         (["run", "--device", ","], "--device is empty"),
                         (["advise", "mlp", "--budget", "9"], "--budget"),
                         (["advise", "mlp", "--epochs", "0"], "--epochs"),
                         (["history", "--limit", str(10**20)], "--limit")):
        assert_one_line_error(run_cli(*args, *db), needle)
    assert not (tmp_path / "never.db").exists()


def test_doctor_refuses_frameworks_beside_a_snapshot():
    snap = str(ROOT / "tests" / "fixtures" / "snapshots" / "h200_jax_torch_cuda13.json")
    assert_one_line_error(run_cli("doctor", "--snapshot", snap, "--frameworks", "bogus"),
                          "unknown framework 'bogus'")
    assert_one_line_error(run_cli("doctor", "--snapshot", snap, "--frameworks", "jax"),
                          "frameworks given with a snapshot")


# -- 7. a batch size above the data is refused; samples/s counts what ran ----------------

def test_a_batch_larger_than_the_data_is_refused_before_any_trial(tmp_path):
    db = tmp_path / "b.db"
    res = run_cli("run", "seed-rnn", "--backend", "jax", "--batch-size", "32,100000",
                  "--db", str(db))
    assert_one_line_error(res, "batch size 100,000 is larger than seed-rnn's 7,000 "
                               "training samples", "--batch-size 7000")
    assert not db.exists()
    assert_one_line_error(run_cli("run", "seed-rnn", "--batch-size", "1000000000000"),
                          "batch-size must be from 1 to 2,147,483,647")


# -- 13. the pre-trial load check obeys --timeout and --memory-limit ---------------------

def test_the_load_check_obeys_the_memory_limit_and_the_timeout(tmp_path):
    db = ["--db", str(tmp_path / "m.db")]
    res = run_cli("run", f"{W}:huge_data", "--backend", "jax", "--memory-limit", "500", *db)
    assert_one_line_error(res, "could not be loaded: resident memory reached",
                          "--memory-limit of 500 MiB")
    res = run_cli("run", f"{W}:slow_data", "--backend", "jax", "--timeout", "2", *db,
                  timeout=50)
    assert_one_line_error(res, "could not be loaded: timed out after 2 s")
    assert not (tmp_path / "m.db").exists()


@requires_jax
def test_samples_per_second_counts_the_batch_that_ran():
    from devicebench.trials.engine import RunOptions, run_workload_group
    from devicebench.trials.spec import TrialSpec

    # Past the API's check (an advise candidate may double a batch past a small data
    # set): Keras trains on the 512 samples there are, and the figures say so.
    spec = TrialSpec(f"{W}:tiny", backend="jax", batch_size=100_000)
    opts = RunOptions(min_rounds=1, max_rounds=1, budget_seconds=5, equivalence_steps=2,
                      max_warmup_seconds=2)
    (result,) = run_workload_group([spec], opts)
    assert result.status == "ok", result.error
    assert result.batch_size == 512 and result.steps_per_epoch == 1
    assert result.samples_per_second == pytest.approx(512 / result.step_time.median)


# -- 8. output to a full device: one line, not a traceback -------------------------------

@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_output_to_a_full_device_is_one_line():
    import subprocess
    import sys

    for args in (["workloads"], ["workloads", "--json"], ["--version"]):
        with open("/dev/full", "w") as full:
            proc = subprocess.run([sys.executable, "-m", "devicebench", *args], stdout=full,
                                  stderr=subprocess.PIPE, text=True, timeout=60, check=False)
        assert proc.returncode == 1, proc.stderr
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "No space left on device" in lines[0], proc.stderr


# -- 10. TrainingMonitor's arguments are checked when it is made -------------------------

_MONITOR_ARGS = """
import json, sys
from devicebench.monitor import TrainingMonitor
out = []
for kwargs in json.loads(sys.argv[1]):
    kwargs = {k: (float(v[4:]) if isinstance(v, str) and v.startswith("num:") else v)
              for k, v in kwargs.items()}
    try:
        TrainingMonitor(**kwargs)
        out.append("accepted")
    except ValueError as exc:
        out.append(f"{type(exc).__name__}: {exc}")
    except Exception as exc:
        out.append(f"WRONG {type(exc).__name__}: {exc}")
print(json.dumps(out))
"""


@requires_jax
def test_training_monitor_refuses_bad_arguments_with_one_clear_error():
    import subprocess
    import sys

    cases = [({"batch_size": 2.5}, "batch_size must be an integer"),
             ({"batch_size": "32"}, "batch_size must be an integer"),
             ({"target_block_seconds": "num:nan"}, "target_block_seconds must be > 0"),
             ({"stall_factor": "num:nan"}, "stall_factor must be > 1"),
             ({"stall_factor": "x"}, "stall_factor must be a number"),
             ({"nvml_interval": 0}, "nvml_interval must be > 0"),
             ({"nvml_interval": -1}, "nvml_interval must be > 0"),
             ({"verbose": "loud"}, "verbose must be 0, 1 or 2"),
             ({"block_steps": "3"}, "block_steps must be an integer"),
             ({"stop_on_nan": "yes"}, "stop_on_nan must be True or False"),
             ({"csv_path": 3}, "csv_path must be a path"),
             ({}, "accepted")]
    proc = subprocess.run([sys.executable, "-c", _MONITOR_ARGS,
                           json.dumps([c for c, _ in cases])], capture_output=True,
                          text=True, timeout=120, check=False,
                          env={**os.environ, "KERAS_BACKEND": "jax"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    for (kwargs, needle), line in zip(cases, got, strict=True):
        assert needle in line and "WRONG" not in line, (kwargs, line)
        assert line == "accepted" or line.startswith("ArgumentError: "), line


# -- 14. SIGTERM cleans up as Ctrl-C does ------------------------------------------------

@requires_jax
def test_sigterm_leaves_no_temporary_directories(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "devicebench", "run", f"{W}:hangs",
                             "--backend", "jax", "--timeout", "300",
                             "--db", str(tmp_path / "t.db")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(tmp)})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not (
            list(tmp.glob("devicebench-worker-*")) and list(tmp.glob("devicebench-weights-*"))):
        time.sleep(0.2)
    assert proc.poll() is None, proc.stderr.read()
    time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "Traceback" not in err, err
    assert sorted(p.name for p in tmp.iterdir()) == [], "left behind in TMPDIR"


def test_monitor_of_an_empty_command_says_so():
    assert_one_line_error(run_cli("monitor", "--", ""), "no command to monitor")


# -- 17. compare --workload NAME that neither run has -------------------------------------

def test_compare_with_an_unknown_workload_names_those_there_are(tmp_path):
    db = ["--db", str(tmp_path / "c.db")]
    bundle = str(ROOT / "tests" / "fixtures" / "bundles" / "h200.json")
    assert run_cli("import", bundle, *db).returncode == 0
    assert_one_line_error(run_cli("compare", "1", "2", "--workload", "nope", *db),
                          "no measured 'nope' in run 1 or 2", "mnist-cnn")


# -- 18. history and report read; they never create or need to write ---------------------

def test_history_of_a_missing_database_creates_nothing(tmp_path):
    res = run_cli("history", "--db", str(tmp_path / "nope" / "x.sqlite"))
    assert_one_line_error(res, "no results database at", "fix:")
    assert not (tmp_path / "nope").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_history_and_report_read_a_read_only_database(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    db = shared / "r.db"
    bundle = str(ROOT / "tests" / "fixtures" / "bundles" / "h200.json")
    assert run_cli("import", bundle, "--db", str(db)).returncode == 0
    for f in shared.iterdir():
        f.chmod(0o444)
    shared.chmod(0o555)
    try:
        for args in (["history"], ["report"], ["report", "--run", "1"]):
            res = run_cli(*args, "--db", str(db))
            assert res.returncode == 0, res.stderr
    finally:
        shared.chmod(0o755)
