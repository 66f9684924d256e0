"""The fault suite: bad input and injected faults, with real worker processes and real
SQLite files. One test (or more) per item of issue 12; nothing asserts a wall-clock time
beyond generous upper bounds on how long a process may outlive its parent."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from devicebench.errors import InputError, SpecError, cause_line, strip_ansi
from devicebench.launch import MemoryWatch
from tests.conftest import assert_one_line_error, requires_jax, requires_tf, run_cli

ROOT = Path(__file__).resolve().parents[2]
W = str(ROOT / "tests" / "fixtures" / "workloads.py")
FAST = ["--rounds", "2", "--budget", "5", "--equivalence-steps", "5"]
MIB = 2**20


def _stored(db: Path) -> dict[tuple[str, str], dict]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT spec, result FROM trials").fetchall()
    finally:
        con.close()
    out = {}
    for spec, result in rows:
        s = json.loads(spec)
        out[(s["workload"].rsplit(":", 1)[-1], s["backend"])] = json.loads(result)
    return out


# -- 1. memory limit: resident memory watched by the parent -----------------------------

_GROW = """
import time, numpy as np
hoard = []
while True:
    hoard.append(np.ones(32 * 2**20, dtype=np.uint8)); time.sleep(0.05)
"""


def test_memory_watch_kills_a_growing_process_near_the_limit_and_spares_a_small_one():
    limit = 300 * MIB
    grow = subprocess.Popen([sys.executable, "-c", _GROW], start_new_session=True)
    watch = MemoryWatch(grow.pid, limit)
    assert grow.wait(timeout=60) == -signal.SIGKILL
    watch.stop()
    assert watch.exceeded
    # Sampled every 0.1 s while growing ~0.6 GB/s: killed within a few samples.
    assert limit <= watch.peak_bytes < limit + 200 * MIB
    assert "300 MiB" in watch.describe() and "--memory-limit" in watch.describe()

    calm = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"],
                            start_new_session=True)
    watch = MemoryWatch(calm.pid, 2048 * MIB)
    assert calm.wait(timeout=30) == 0
    watch.stop()
    assert not watch.exceeded and 0 < watch.peak_bytes < 2048 * MIB


@requires_tf
@requires_jax
def test_memory_limit_runaway_is_oom_with_its_peak_healthy_trial_unaffected(tmp_path):
    db = tmp_path / "mem.db"
    limit = 2000
    res = run_cli("run", f"{W}:tiny", f"{W}:allocates", "--backend", "tensorflow,jax", *FAST,
                  "--memory-limit", str(limit), "--timeout", "120", "--db", str(db))
    assert res.returncode == 1, res.stderr[-3000:]  # two trials were not ok
    stored = _stored(db)
    for backend in ("tensorflow", "jax"):
        healthy, runaway = stored[("tiny", backend)], stored[("allocates", backend)]
        assert healthy["status"] == "ok", healthy["error"]
        assert runaway["status"] == "oom", runaway["error"]
        assert "resident memory reached" in runaway["error"]
        # Killed at the first sample over the limit, not seconds later.
        assert limit * MIB <= runaway["peak_rss_bytes"] < (limit + 300) * MIB
    assert "oom: resident memory reached" in res.stdout


# -- 2. one spec validation for every entry point ----------------------------------------

def test_advise_baseline_on_a_missing_device_is_refused_like_run(tmp_path):
    db = ["--db", str(tmp_path / "v.db")]
    run = run_cli("run", "seed-rnn", "--device", "gpu:7", *db)
    adv = run_cli("advise", "seed-rnn", "--baseline", "backend=jax,device=gpu:7", *db)
    assert_one_line_error(run, "no device 'gpu:7'")
    assert_one_line_error(adv, "no device 'gpu:7'")
    assert run.stderr == adv.stderr  # the same function, the same words
    assert not (tmp_path / "v.db").exists() or _stored(tmp_path / "v.db") == {}
    assert_one_line_error(run_cli("advise", "seed-rnn", "--baseline",
                                  "backend=jax,device=mps", *db), "'mps'")


def test_python_api_refuses_a_missing_device():
    import devicebench

    with pytest.raises(SpecError, match="no device 'gpu:7'"):
        devicebench.advise("seed-rnn", baseline="backend=jax,device=gpu:7", budget=10)


# -- 3. training data checked once, before any trial -------------------------------------

@requires_jax
@pytest.mark.parametrize("fixture, needle", [
    ("nan_data", "2048 NaN and 0 Inf values"),
    ("inf_labels", "0 NaN and 1 Inf values"),
    ("text_data", "dtype <U"),
])
def test_bad_training_data_is_one_line_before_any_trial(tmp_path, fixture, needle):
    db = tmp_path / "d.db"
    res = run_cli("run", f"{W}:{fixture}", "--backend", "jax", *FAST, "--db", str(db))
    assert_one_line_error(res, needle, "fix:")
    assert not db.exists() or _stored(db) == {}  # no trial ran


@requires_jax
def test_advise_refuses_nan_data_too(tmp_path):
    res = run_cli("advise", f"{W}:nan_data", "--baseline", "backend=jax",
                  "--db", str(tmp_path / "a.db"))
    assert_one_line_error(res, "NaN")


# -- 4. user-code errors: the line naming the cause, stored without escape codes ---------

def test_cause_line_skips_keras_wrappers_and_colour_codes():
    keras_msg = ("Exception encountered when calling Sequential.call().\n\n"
                 "\x1b[1mInput 0 of layer \"dense\" is incompatible with the layer: expected "
                 "axis -1 of input shape to have value 8, but received input with shape "
                 "(32, 16)\x1b[0m\n\nArguments received by Sequential.call():\n  • inputs=x")
    assert cause_line(keras_msg).startswith("Input 0 of layer \"dense\" is incompatible")
    assert "\x1b" not in cause_line(keras_msg)
    assert strip_ansi("\x1b[31mred\x1b[0m") == "red"
    graph = ("Graph execution error:\n\nDetected at node x defined at (most recent call "
             "last):\n  File \"a.py\", line 1\nIncompatible shapes: [32,1] vs. [32,5]\n\t "
             "[[{{node sub}}]]")
    assert cause_line(graph) == "Incompatible shapes: [32,1] vs. [32,5]"
    assert cause_line("plain") == "plain"


@requires_jax
def test_a_model_error_shows_its_cause_and_is_stored_without_escape_codes(tmp_path):
    db = tmp_path / "c.db"
    res = run_cli("run", f"{W}:misfit", "--backend", "jax", *FAST, "--db", str(db))
    assert res.returncode == 1, res.stderr[-2000:]
    stored = _stored(db)[("misfit", "jax")]
    assert stored["status"] == "error"
    assert "expected axis -1" in stored["error"], stored["error"]
    assert "Exception encountered" not in stored["error"]
    assert "expected axis -1" in res.stdout
    for key in ("error", "traceback_tail", "stderr_tail"):
        assert "\x1b[" not in (stored[key] or ""), key


# -- 5. the Python API validates its arguments -------------------------------------------

@pytest.mark.parametrize("kwargs, needle", [
    ({"budget": -1}, "at least 10"),
    ({"budget": "abc"}, "number of seconds"),
    ({"budget": float("nan")}, "at least 10"),
    ({"budget": True}, "number of seconds"),
    ({"baseline": 3}, "baseline must be a string"),
    ({"db": 5}, "db must be a path"),
    ({"allow_batch_change": "yes"}, "allow_batch_change"),
])
def test_python_api_raises_devicebench_errors_for_bad_arguments(kwargs, needle):
    import devicebench

    with pytest.raises(InputError, match=needle):
        devicebench.advise("seed-rnn", **kwargs)


# -- 6. workers die with their parent ----------------------------------------------------

def _worker_pids(parent: psutil.Process) -> list[int]:
    try:
        return [c.pid for c in parent.children(recursive=True)
                if "devicebench.trials.worker" in " ".join(c.cmdline())]
    except psutil.NoSuchProcess:
        return []


@requires_jax
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_workers_die_with_their_parent(tmp_path, sig):
    cmd = [sys.executable, "-m", "devicebench", "run", f"{W}:hangs", "--backend", "jax",
           "--timeout", "300", "--db", str(tmp_path / "o.db")]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    parent = psutil.Process(proc.pid)
    deadline = time.monotonic() + 120
    pids: list[int] = []
    while time.monotonic() < deadline and not pids and proc.poll() is None:
        time.sleep(0.2)
        pids = _worker_pids(parent)
    assert pids, "no worker started"
    workers = [psutil.Process(p) for p in pids]
    # Past its import (a worker still importing dies on its first reply, on the broken
    # pipe): now it sleeps in the workload's build, reading nothing.
    while time.monotonic() < deadline and not any(
            "jaxlib" in m.path for m in workers[0].memory_maps()):
        time.sleep(0.2)
    time.sleep(3)
    proc.send_signal(sig)
    proc.wait(timeout=30)
    gone, alive = psutil.wait_procs(workers, timeout=5)
    for p in alive:  # never leave one behind, even when the test fails
        p.kill()
    assert not alive, f"workers outlived their parent by 5 s: {[p.pid for p in alive]}"
    con = sqlite3.connect(tmp_path / "o.db")
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        con.close()


# -- 7. smaller items ---------------------------------------------------------------------

def test_typer_usage_errors_are_one_line():
    assert_one_line_error(run_cli("run", "--budget", "-1"), "--budget", "fix:")
    assert_one_line_error(run_cli("run", "--bogus"), "No such option", "fix:")
    assert_one_line_error(run_cli("advise"), "Missing argument")


def test_a_wrong_return_type_is_exit_2_from_run_and_advise_with_one_fix(tmp_path):
    db = ["--db", str(tmp_path / "t.db")]
    for command in (["run", f"{W}:not_a_workload", "--backend", "jax"],
                    ["advise", f"{W}:not_a_workload", "--baseline", "backend=jax"]):
        res = run_cli(*command, *db)
        assert_one_line_error(res, "not a devicebench Workload")
        assert res.stderr.count("fix:") == 1, res.stderr


def test_a_non_python_file_reference_says_so(tmp_path):
    data = tmp_path / "x.sqlite"
    data.write_bytes(b"SQLite format 3\x00")
    assert_one_line_error(run_cli("run", f"{data}:build", "--db", str(tmp_path / "r.db")),
                          "is not a Python file")


def test_devicebench_db_variable_is_the_default_results_file(tmp_path):
    corrupt = tmp_path / "from-env.db"
    corrupt.write_bytes(b"this is not a database" * 100)
    res = run_cli("run", "seed-rnn", env={"DEVICEBENCH_DB": str(corrupt)})
    assert_one_line_error(res, "from-env.db")  # read (and refused untouched)
    assert corrupt.read_bytes() == b"this is not a database" * 100
    other = tmp_path / "flag.db"
    other.write_bytes(b"also not a database" * 100)
    res = run_cli("run", "seed-rnn", "--db", str(other), env={"DEVICEBENCH_DB": str(corrupt)})
    assert_one_line_error(res, "flag.db")  # --db wins


def test_the_import_has_its_own_timeout_apart_from_the_setup_timeout():
    from devicebench.trials.engine import RunOptions, run_workload_group
    from devicebench.trials.spec import TrialSpec

    waits: list[tuple[str, float]] = []

    class Recorder:
        def __init__(self, spec):
            self.sent = None

        def send(self, message):
            self.sent = message

        def receive(self, timeout):
            return self.request(self.sent, timeout)

        def request(self, message, timeout):
            waits.append((message["cmd"], timeout))
            if message["cmd"] == "setup":
                return {"ok": True, "equivalence_losses": [1.0], "epoch_estimate_seconds": 0.1}
            if message["cmd"] == "measure":
                return {"ok": True, "block_seconds": [0.01], "steps_per_block": 1}
            return {"ok": True}

        def begin_close(self):
            pass

        def close(self, timeout=10):
            pass

        def kill(self):
            pass

    opts = RunOptions(min_rounds=1, max_rounds=1, setup_timeout=7, import_timeout=900)
    run_workload_group([TrialSpec("seed-rnn", backend="jax")], opts, start_worker=Recorder)
    assert ("prepare", 900) in waits and ("setup", 7) in waits


def test_runs_data_check_loads_the_workload_without_building_it():
    from devicebench.launch import run_worker

    out = run_worker("devicebench.workloads.check_worker", [f"{W}:tiny", "--no-fit"],
                     timeout=60, env=dict(os.environ, KERAS_BACKEND="jax"))
    assert out.status == "ok" and out.result == {"ok": True, "samples": 512}


_ORPHAN = """
import sys
sys.platform = "darwin"  # no prctl: the re-parenting watcher alone
from devicebench.launch.child import die_with_parent
die_with_parent()
import time
time.sleep(120)
"""
_MIDDLE = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], start_new_session=True)
print(child.pid, flush=True)
time.sleep(1)
os._exit(0)
"""


def test_without_prctl_a_worker_still_ends_when_reparented():
    middle = subprocess.run([sys.executable, "-c", _MIDDLE, _ORPHAN], capture_output=True,
                            text=True, timeout=60, check=True)
    try:
        orphan = psutil.Process(int(middle.stdout.strip()))
    except psutil.NoSuchProcess:
        return  # already gone
    gone, alive = psutil.wait_procs([orphan], timeout=5)
    for p in alive:
        p.kill()
    assert not alive
