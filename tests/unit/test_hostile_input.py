"""Hostile input, round two (issue 27): each test reproduces one defect on the pure
parts (no worker process); the end-to-end reproductions are in
tests/integration/test_faults_hostile.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from devicebench.errors import SpecError
from devicebench.workloads.loader import validate_workload_ref

# -- 1. a top-level assignment, a lambda, an import: names a file defines ---------------

@pytest.mark.parametrize("source, name", [
    ("N = 1\ndef w(): return 42\n", "w"),
    ("w = lambda: 42\n", "w"),
    ("N: int = 1\nw: object = None\n", "w"),
    ("a, (b, w) = 1, (2, 3)\n", "w"),
    ("from good import w\n", "w"),
    ("from good import x as w\n", "w"),
    ("import good as w\n", "w"),
    ("try:\n    from fast import w\nexcept ImportError:\n    from slow import w\n", "w"),
    ("if True:\n    def w(): pass\n", "w"),
    ("class w: pass\n", "w"),
    ("from good import *\n", "anything"),
])
def test_a_reference_to_any_top_level_name_is_accepted(tmp_path, source, name):
    path = tmp_path / "w.py"
    path.write_text(source)
    validate_workload_ref(f"{path}:{name}")  # no AttributeError, no SpecError


def test_a_missing_name_is_still_refused(tmp_path):
    path = tmp_path / "w.py"
    path.write_text("N = 1\nx = lambda: 0\ndef helper(): pass\n")
    with pytest.raises(SpecError, match="no function 'w'"):
        validate_workload_ref(f"{path}:w")


# -- 8. a 5,000-character workload path --------------------------------------------------

def test_a_too_long_workload_path_is_one_spec_error():
    with pytest.raises(SpecError, match="cannot be read: File name too long") as info:
        validate_workload_ref("a" * 5000 + ".py:w")
    assert len(info.value.message) < 300


# -- 4, 21, 8, 9, 16: doctor SCRIPT reads once, boundedly ---------------------------------

SNAPSHOT = Path(__file__).resolve().parents[1] / "fixtures" / "snapshots" / \
    "h200_jax_torch_cuda13.json"
PITFALL = "import keras\nmodel.compile(run_eagerly=True)\n"


def test_doctor_reads_a_pipe_once(tmp_path):
    import os
    import threading

    import devicebench

    fifo = tmp_path / "script.py"
    os.mkfifo(fifo)

    def write_once():
        with open(fifo, "w") as fh:  # blocks until doctor opens it; then the pipe is spent
            fh.write(PITFALL)

    writer = threading.Thread(target=write_once, daemon=True)
    writer.start()
    result = devicebench.doctor(fifo, snapshot=SNAPSHOT)
    writer.join(5)
    assert result.script.lines == 2
    assert [f.id for f in result.script.findings] == ["script.run-eagerly"]


def test_a_fifo_with_no_writer_is_refused_after_a_bounded_wait(tmp_path, monkeypatch):
    import os

    from devicebench.errors import InputError
    from devicebench.script_check import read_script, source

    monkeypatch.setattr(source, "PIPE_WAIT_S", 0.3)
    fifo = tmp_path / "nobody.py"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="a pipe that sent nothing in 0 s"):
        read_script(fifo)


def test_an_endless_device_is_read_only_up_to_the_bound():
    from devicebench.errors import InputError
    from devicebench.script_check import read_script

    with pytest.raises(InputError, match="/dev/zero is over 64 MiB"):
        read_script("/dev/zero")


def test_one_pitfall_on_many_lines_is_listed_ten_times_with_the_count(tmp_path):
    from devicebench.script_check import inspect_script

    script = tmp_path / "gen.py"
    script.write_text("import keras\n" + "model.compile(run_eagerly=True)\n" * 2000)
    findings = inspect_script(script).findings
    assert len(findings) == 10
    assert "(and 1,990 more like it: " in findings[-1].observed
    assert f"{script}:12, {script}:13, {script}:14, ...)" in findings[-1].observed


def test_a_script_over_the_size_bound_is_refused(tmp_path, monkeypatch):
    import devicebench.script_check as sc
    from devicebench.errors import InputError

    monkeypatch.setattr(sc, "MAX_SOURCE_CHARS", 1000)
    script = tmp_path / "big.py"
    script.write_text("x = 1\n" * 400)
    with pytest.raises(InputError, match="over the 0 MB devicebench reads"):
        sc.read_script(script)


@pytest.mark.parametrize("src", [7, [1, 2], {"a": "b"}])
def test_a_notebook_cell_whose_source_is_not_text_is_refused(tmp_path, src):
    from devicebench.errors import InputError
    from devicebench.script_check import read_script

    nb = tmp_path / "n.ipynb"
    nb.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": "# hi"},
                                        {"cell_type": "code", "source": src}]}))
    with pytest.raises(InputError, match="cell 2's source is"):
        read_script(nb)


# -- 6. one validation for the CLI and the API, before anything starts -------------------

@pytest.mark.parametrize("kwargs, needle", [
    ({"rounds": "3"}, "rounds must be an integer, got '3'"),
    ({"rounds": 0}, "rounds must be from 1 to 1,000, got 0"),
    ({"rounds": 2.5}, "rounds must be an integer, got 2.5"),
    ({"budget": "abc"}, "budget must be a number, got 'abc'"),
    ({"budget": -1}, "budget must be at least 1, got -1"),
    ({"budget": float("nan")}, "budget must be at least 1, got nan"),
    ({"equivalence_steps": 0}, "equivalence_steps must be from 1 to 1,000"),
    ({"equivalence_steps": 10**9}, "equivalence_steps must be from 1 to 1,000"),
    ({"timeout": 0}, "timeout must be at least 1, got 0"),
    ({"memory_limit_mib": -5}, "memory_limit_mib must be at least 1, got -5"),
    ({"seed": -1}, "seed must be from 0 to 4,294,967,295, got -1"),
    ({"backends": []}, "backends must be a non-empty list of names"),
    ({"backends": [""]}, "backends must be a non-empty list of names"),
    ({"devices": "cpu"}, "devices must be a non-empty list of names"),
    ({"batch_sizes": [0]}, "batch_sizes[0] must be from 1"),
    ({"threads": ["4"]}, "threads[0] must be an integer"),
    ({"resume": "yes"}, "resume must be True or False"),
    ({"db": 5}, "db must be a path"),
    ({"workloads": [3]}, "workloads must be a non-empty list of names"),
])
def test_run_refuses_a_bad_argument_before_anything_starts(tmp_path, kwargs, needle):
    import devicebench
    from devicebench.errors import InputError

    db = tmp_path / "never.db"
    with pytest.raises(InputError, match=re.escape(needle)):
        devicebench.run(**{"workloads": ["mlp"], "db": db, **kwargs})
    assert not db.exists()  # no store opened, no run left "interrupted"


@pytest.mark.parametrize("kwargs, needle", [
    ({"epochs": "x"}, "epochs must be an integer, got 'x'"),
    ({"epochs": 0}, "epochs must be from 1 to 1,000,000, got 0"),
    ({"budget": 5}, "budget must be at least 10"),
])
def test_advise_refuses_a_bad_argument_before_its_budget(tmp_path, kwargs, needle):
    import devicebench
    from devicebench.errors import InputError

    with pytest.raises(InputError, match=re.escape(needle)):
        devicebench.advise("mlp", **{"db": tmp_path / "a.db", "budget": 60, **kwargs})
    assert not (tmp_path / "a.db").exists()


@pytest.mark.parametrize("kwargs, needle", [
    ({"frameworks": ["bogus"]}, "unknown framework 'bogus'"),
    ({"frameworks": "jax"}, "frameworks must be a list of names"),
    ({"timeout": 0}, "timeout must be at least 1, got 0"),
    ({"script": 42}, "script must be a path, got 42"),
    ({"concurrent": None}, "concurrent must be True or False"),
    ({"frameworks": ["jax"], "snapshot": SNAPSHOT}, "frameworks given with a snapshot"),
])
def test_doctor_refuses_a_bad_argument_before_probing(kwargs, needle):
    import devicebench
    from devicebench.errors import InputError

    with pytest.raises(InputError, match=re.escape(needle)):
        devicebench.doctor(**kwargs)


# -- 8 and 15: a truncated data file, an empty data path ---------------------------------

def test_a_truncated_data_file_is_one_input_error(tmp_path):
    import numpy as np

    from devicebench.errors import InputError
    from devicebench.workloads.saved import _load_arrays

    path = tmp_path / "data.npz"
    np.savez(path, x=np.zeros((64, 8), "float32"), y=np.zeros(64, "float32"))
    path.write_bytes(path.read_bytes()[:300])  # cut short: a BadZipFile inside numpy
    with pytest.raises(InputError, match="cannot read arrays x and y from"):
        _load_arrays(path)


def test_an_empty_data_path_after_the_separator_is_refused():
    from devicebench.errors import InputError
    from devicebench.workloads.saved import split_ref

    with pytest.raises(InputError, match="no data file after '::'"):
        split_ref("model.keras::")
    assert split_ref("model.keras") == (Path("model.keras"), None)


# -- 11. the cause of a layer's error, not Keras' wrapper --------------------------------

def test_the_cause_inside_keras_could_not_infer_wrapper_is_shown():
    from devicebench.errors import cause_line

    keras_msg = ("Exception encountered when calling Boom.call().\n\n\x1b[1mCould not "
                 "automatically infer the output shape / dtype of 'boom' (of type Boom). "
                 "Either the `Boom.call()` method is incorrect, or you need to implement "
                 "the `Boom.compute_output_spec() / compute_output_shape()` method. Error "
                 "encountered:\n\ncustom layer exploded on purpose\x1b[0m\n\nArguments "
                 "received by Boom.call():\n  • args=('<KerasTensor>',)")
    assert cause_line(keras_msg) == "custom layer exploded on purpose (raised in Boom.call())"


# -- 15. a baseline is one configuration ---------------------------------------------------

def test_a_baseline_giving_a_key_twice_is_refused():
    from devicebench.advisor.advice import parse_baseline

    with pytest.raises(SpecError, match="--baseline gives backend twice"):
        parse_baseline("backend=jax,backend=tensorflow", "mlp", "jax")
    assert parse_baseline("backend=jax,device=cpu", "mlp", "tensorflow").backend == "jax"


# -- 16. a snapshot must describe a machine ------------------------------------------------

def _snapshot_dict() -> dict:
    return json.loads(SNAPSHOT.read_text())


@pytest.mark.parametrize("patch, needle", [
    (lambda d: d.pop("host"), "snapshot has no host"),
    (lambda d: d.update(host={}), "snapshot has no host"),
    (lambda d: d["frameworks"]["jax"].update(physical_devices=[{"bogus": 1}]),
     "frameworks.jax.physical_devices[0]: expected an object with DeviceInfo's fields"),
    (lambda d: d["host"].update(cpu_cores_logical=-4),
     "host.cpu_cores_logical: expected a count >= 0, got -4"),
])
def test_a_snapshot_that_describes_no_machine_is_refused(patch, needle):
    from devicebench.env.snapshot import EnvSnapshot
    from devicebench.errors import SnapshotError

    data = _snapshot_dict()
    patch(data)
    with pytest.raises(SnapshotError, match=re.escape(needle)):
        EnvSnapshot.from_dict(data)
    EnvSnapshot.from_dict(_snapshot_dict())  # the untouched file still loads


# -- 17. an ops sweep that measured nothing is not a success ------------------------------

def test_an_ops_sweep_whose_every_point_failed_exits_1(monkeypatch):
    from typer.testing import CliRunner

    import devicebench.cli.ops
    from devicebench.api import OpsOutcome
    from devicebench.cli import app
    from devicebench.ops.analysis import analyse
    from devicebench.ops.result import OpsPoint, OpsWorkerResult

    worker = OpsWorkerResult("numpy", "cpu", points=[
        OpsPoint("matmul", "compiled", 64, status="error", reason="boom"),
        OpsPoint("matmul", "eager", 64, status="skipped", reason="n/a")])

    def fake_ops(**kwargs):  # the launcher seam: a worker ran, every point failed
        return OpsOutcome(1, {}, [worker], analyse([worker]))

    monkeypatch.setattr(devicebench.cli.ops, "ops_job", fake_ops)
    res = CliRunner().invoke(app, ["ops", "--json"])
    assert res.exit_code == 1, res.output
    assert "no op was measured (1 of 2 points failed" in res.output


# -- 17. a kill -9 without memory pressure is not called oom ------------------------------

def test_a_sigkill_is_oom_only_when_memory_is_short(monkeypatch):
    import signal
    import subprocess
    import sys

    from devicebench.launch import process

    monkeypatch.setattr(process, "memory_short", lambda: False)
    assert process.exit_status(-signal.SIGKILL) == ("crashed", "SIGKILL")
    assert process.exit_status(-signal.SIGSEGV) == ("crashed", "SIGSEGV")
    monkeypatch.setattr(process, "memory_short", lambda: True)
    assert process.exit_status(-signal.SIGKILL) == ("oom", "SIGKILL")
    monkeypatch.setattr(process, "memory_short", lambda: False)
    # A real process killed by SIGKILL: crashed, and the words say who did not send it.
    proc = subprocess.run([sys.executable, "-c", "import os, signal; "
                           "os.kill(os.getpid(), signal.SIGKILL)"], check=False)
    status, name = process.exit_status(proc.returncode)
    assert (status, name) == ("crashed", "SIGKILL")
    words = process.sigkill_detail(status)
    assert "not sent by devicebench" in words and "GiB of memory was free" in words


# -- 20. a replay's baseline must be in the profile ----------------------------------------

def test_a_replay_baseline_the_profile_lacks_is_refused_up_front():
    from devicebench.advisor.advice import parse_baseline
    from devicebench.errors import InputError
    from devicebench.profiles import load_profile
    from devicebench.profiles.replay import replay_advise

    prof = load_profile("h200")
    spec = parse_baseline("backend=tensorflow,device=gpu:0", "seed-rnn", "tensorflow")
    with pytest.raises(InputError, match="profile h200 has no seed-rnn trial for the "
                                         "baseline tensorflow/gpu:0") as info:
        replay_advise(prof, "seed-rnn", budget_s=40, baseline=spec)
    assert "jax/cpu" in info.value.message


# -- 17. a parser MemoryError still says what happened ------------------------------------

def test_a_parser_memory_error_has_a_reason(tmp_path, monkeypatch):
    import types

    import devicebench.script_check as sc
    from devicebench.errors import InputError

    script = tmp_path / "deep.py"
    script.write_text("x = 1\n")

    def parse(*args, **kwargs):
        raise MemoryError()  # what CPython's parser raises on a too-deeply nested file

    monkeypatch.setattr(sc, "ast", types.SimpleNamespace(parse=parse))  # this module's
    with pytest.raises(InputError, match=r"cannot be parsed: MemoryError"):
        sc.read_script(script)


def test_a_workload_named_twice_is_measured_once():
    from devicebench.validate import check_run_request

    args = dict(workloads=["mlp", "seed-rnn", "mlp"], backends=None, devices=None,
                precisions=None, jits=None, batch_sizes=None, pipelines=None, threads=None,
                steps_per_execution=1, seed=None, rounds=None, budget=60.0,
                equivalence_steps=50, timeout=600.0, memory_limit_mib=None, resume=False,
                db=None, argv=None)
    req = check_run_request(args)
    assert req["workloads"] == ["mlp", "seed-rnn"] and req["repeated"] == ["mlp"]
    assert check_run_request({**args, "workloads": "mlp"})["workloads"] == ["mlp"]
