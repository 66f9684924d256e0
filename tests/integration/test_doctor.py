"""doctor end to end: the real probe on this machine, the real CLI in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from devicebench.env.finding import SEVERITIES
from devicebench.env.probe import probe_environment
from devicebench.env.snapshot import SCHEMA_VERSION, load_snapshot
from tests.conftest import assert_one_line_error, requires_jax, requires_tf, run_cli

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


@pytest.fixture(scope="module")
def tf_snapshot():
    return probe_environment(["tensorflow"], timeout=120)


@requires_tf
def test_real_probe_finds_tensorflow_cpu_and_keras(tf_snapshot):
    tf = tf_snapshot.frameworks["tensorflow"]
    assert tf.status == "ok", tf.error
    assert tf.version == tf_snapshot.distributions["tensorflow"]
    assert any(d.kind == "CPU" for d in tf.physical_devices)
    assert tf.keras_version.startswith("3."), tf.keras_error
    # Keras 3 resolves jit_compile="auto" to False on TF without an accelerator.
    assert tf.keras_jit_auto is False
    assert tf.import_seconds and tf.import_seconds > 0
    # TF 2.21 on a CPU reads zeros on some hosts and raises on others: both are "unknown"
    # (tests/unit/test_memory_stats.py replays each); a GPU build on a GPU reports bytes.
    assert tf.memory_stats in ("unknown", "works"), tf.memory_stats
    if tf.memory_stats == "unknown":
        assert "get_memory_info" in tf.memory_stats_detail


@requires_jax
def test_real_probe_jax_memory_stats_unknown_on_cpu():
    snap = probe_environment(["jax"], timeout=120)
    jax = snap.frameworks["jax"]
    assert jax.status == "ok", jax.error
    assert jax.physical_devices[0].kind == "CPU"
    assert jax.memory_stats == "unknown"  # None on CPU: unknown, never 0
    assert "returned None" in jax.memory_stats_detail
    assert jax.keras_jit_auto is True


def test_host_layer_never_imports_a_framework():
    code = (
        "import sys\n"
        "from devicebench.env.probe import probe_host_layer\n"
        "import devicebench.cli\n"
        "snap = probe_host_layer()\n"
        "bad = [m for m in ('tensorflow', 'jax', 'torch', 'keras') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_crashing_framework_import_becomes_data(tmp_path, monkeypatch):
    """A framework whose import aborts (a Metal plugin's "Symbol not found") is a finding."""
    fake = tmp_path / "tensorflow"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "import os, sys\n"
        "sys.stderr.write('dlopen(libmetal_plugin.dylib): Symbol not found: _TF_Foo\\n')\n"
        "sys.stderr.flush()\n"
        "os.abort()\n"
    )
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{ROOT}")
    snap = probe_environment(["tensorflow"], timeout=60)
    tf = snap.frameworks["tensorflow"]
    assert tf.status == "crashed"
    assert "SIGABRT" in tf.error and "Symbol not found" in tf.error


@requires_jax
def test_a_broken_or_crashing_extension_is_named_and_the_framework_still_probed(
        tmp_path, monkeypatch):
    """The real JAX probe worker imports the packages that extend JAX after it: one raising
    what dynamax raised on jax 0.4.24 and one aborting the process. JAX's own result stands;
    both packages are named, each with the fix its kind of error calls for."""
    from devicebench.env.checks import run_checks

    (tmp_path / "flax").mkdir()
    (tmp_path / "flax" / "__init__.py").write_text(
        "raise AttributeError(\"module 'jax.random' has no attribute 'KeyArray'\")\n")
    (tmp_path / "chex").mkdir()
    (tmp_path / "chex" / "__init__.py").write_text("import os\nos.abort()\n")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{ROOT}")
    snap = probe_environment(["jax"], timeout=120)
    jax = snap.frameworks["jax"]
    assert jax.status == "ok", jax.error
    assert jax.physical_devices and jax.physical_devices[0].kind == "CPU"
    errors = jax.extra["extension_errors"]
    assert errors["flax"] == "AttributeError: module 'jax.random' has no attribute 'KeyArray'"
    assert errors["chex"].startswith("the process died importing it after jax")
    found = {f.title.split(" fails")[0]: f for f in run_checks(snap)
             if f.id == "package.extension-import-fails"}
    flax = next(f for k, f in found.items() if k.startswith("flax"))
    assert flax.severity == "warning" and "`jax.random` has no `KeyArray`" in flax.fix
    chex = next(f for k, f in found.items() if k.startswith("chex"))
    assert 'python -c "import jax, chex"' in chex.fix


def test_hanging_framework_import_times_out(tmp_path, monkeypatch):
    fake = tmp_path / "jax"
    fake.mkdir()
    (fake / "__init__.py").write_text("import time\ntime.sleep(600)\n")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{ROOT}")
    snap = probe_environment(["jax"], timeout=3)
    assert snap.frameworks["jax"].status == "timeout"


@requires_tf
def test_cli_json_lists_cpu_device_and_versions():
    res = run_cli("doctor", "--json", "--frameworks", "tensorflow")
    assert res.returncode in (0, 1), res.stderr
    doc = json.loads(res.stdout)
    snap = doc["snapshot"]
    tf = snap["frameworks"]["tensorflow"]
    assert [d["kind"] for d in tf["physical_devices"]] == ["CPU"]
    assert snap["distributions"]["keras"] == tf["keras_version"]
    assert res.returncode == (1 if any(f["severity"] == "error" for f in doc["findings"]) else 0)
    assert all({"id", "severity", "observed", "why", "fix"} <= set(f) for f in doc["findings"])


@requires_tf
def test_cli_terminal_output_shows_device_table():
    res = run_cli("doctor", "--frameworks", "tensorflow")
    assert res.returncode in (0, 1), res.stderr
    assert "tensorflow" in res.stdout and "CPU" in res.stdout
    assert "Findings" in res.stdout


def test_save_then_diagnose_snapshot(tmp_path):
    out = tmp_path / "env.json"
    res = run_cli("doctor", "--frameworks", "none", "--save", str(out))
    assert res.returncode in (0, 1), res.stderr
    snap = load_snapshot(out)
    assert snap.schema_version == SCHEMA_VERSION
    again = run_cli("doctor", "--snapshot", str(out), "--json")
    assert again.returncode == res.returncode
    assert json.loads(again.stdout)["snapshot"]["host"] == json.loads(out.read_text())["host"]


def test_fixture_snapshot_with_metal_mismatch_exits_1():
    res = run_cli("doctor", "--snapshot", str(FIXTURES / "snapshots" / "m1_tf218_metal110.json"))
    assert res.returncode == 1, res.stderr
    assert "Symbol not found" in res.stdout



def test_bad_inputs_give_one_line_and_exit_2(tmp_path):
    assert_one_line_error(run_cli("doctor", "--snapshot", str(tmp_path / "nope.json")),
                           "not found", "nope.json")
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"schema_version": 1, "host": ')
    assert_one_line_error(run_cli("doctor", "--snapshot", str(corrupt)), "not valid JSON")
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1}))
    assert_one_line_error(run_cli("doctor", "--snapshot", str(newer)), "newer", "upgrade")
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"schema_version": 1, "host": "x86"}))
    assert_one_line_error(run_cli("doctor", "--snapshot", str(wrong)),
                          "field host:", "expected an object")
    null = tmp_path / "null.json"
    null.write_text(json.dumps({"schema_version": 1, "host": {"os_version": None}}))
    assert_one_line_error(run_cli("doctor", "--snapshot", str(null)),
                          "host.os_version", "expected a string, got null")
    binary = tmp_path / "binary.json"
    binary.write_bytes(bytes(range(256)))
    assert_one_line_error(run_cli("doctor", "--snapshot", str(binary)), "not a text file")
    assert_one_line_error(run_cli("doctor", "--snapshot", str(tmp_path)), "directory")
    broken = tmp_path / "train.py"
    broken.write_text("def f(:\n    pass\n")
    assert_one_line_error(run_cli("doctor", str(broken), "--frameworks", "none"), "train.py")
    assert_one_line_error(run_cli("doctor", str(tmp_path), "--frameworks", "none"), "directory")
    assert_one_line_error(run_cli("doctor", "--frameworks", "tensorflw"), "tensorflw")


def test_script_check_through_cli_reports_line():
    script = FIXTURES / "scripts" / "seed000_rnn.py"
    res = run_cli("doctor", str(script), "--frameworks", "none", "--json")
    assert res.returncode == 1, res.stderr
    doc = json.loads(res.stdout)
    legacy = [f for f in doc["findings"] if f["id"] == "script.legacy-optimizer"]
    lineno = next(i for i, ln in enumerate(script.read_text().splitlines(), 1)
                  if "optimizers.legacy" in ln)
    assert legacy and legacy[0]["location"].endswith(f":{lineno}")


def test_rosetta_header_keeps_the_bracketed_architecture():
    res = run_cli("doctor", "--snapshot", str(FIXTURES / "snapshots" / "rosetta_intel_python.json"))
    assert "[arm64, Python built for x86_64 (Rosetta)]" in res.stdout, res.stdout[:600]


def test_h200_snapshot_table_and_keras_backend_error():
    snap = FIXTURES / "snapshots" / "h200_jax_torch_cuda13.json"
    res = run_cli("doctor", "--snapshot", str(snap))
    assert res.returncode == 1, res.stderr
    assert "2.11.0+cu130 ok" in res.stdout and "cu130ok" not in res.stdout
    assert "keras.backend-missing" in res.stdout and "export KERAS_BACKEND=jax" in res.stdout


@requires_tf
def test_this_machine_has_no_errors(tf_snapshot):
    from devicebench.env.checks import run_checks

    errors = [f.id for f in run_checks(tf_snapshot) if f.severity == "error"]
    assert errors == []
    assert tf_snapshot.host.os != "Darwin" or tf_snapshot.host.macos_version


def test_script_read_and_finding_count_are_shown():
    script = FIXTURES / "scripts" / "seed000_rnn.py"
    doc = json.loads(run_cli("doctor", str(script), "--frameworks", "none", "--json").stdout)
    n = sum(f["id"].startswith("script.") for f in doc["findings"])
    n_lines = len(script.read_text().splitlines())
    assert n >= 3
    assert doc["script"] == {"path": str(script), "kind": "script", "lines": n_lines,
                             "code_cells": 0, "skipped_cells": [], "findings": n}
    res = run_cli("doctor", str(script), "--frameworks", "none")
    assert res.returncode == 1, res.stderr
    assert f"Script   {script} ({n_lines} lines, read with ast, never run): {n} findings" in (
        res.stdout.replace("\n", " ")), res.stdout


def test_the_python_api_doctor_checks_a_saved_snapshot_and_a_script(tmp_path):
    """devicebench.doctor: the library call behind `devicebench doctor`."""
    import devicebench

    snap = FIXTURES / "snapshots" / "h200_jax_torch_cuda13.json"
    script = tmp_path / "train.py"
    script.write_text("import keras\nmodel = keras.Sequential()\nmodel.fit(x, y)\n")
    result = devicebench.doctor(script, snapshot=snap)
    assert result.snapshot.nvidia_smi.gpus and result.script is not None
    assert result.findings and all(f.severity in SEVERITIES for f in result.findings)
    assert result.errors == [f for f in result.findings if f.severity == "error"]
