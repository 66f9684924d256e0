"""Defects found by running devicebench on users' tutorial scripts
(tests/fixtures/scripts/users/README.md), each shown on the smallest script that has it
(real Keras on JAX in worker processes; the test process imports no framework)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from devicebench.advisor.patch import patch_name, script_patch
from devicebench.jobs.advise_script import fails_before_fit
from devicebench.trials.spec import TrialSpec
from devicebench.workloads.script import capture_script
from tests.conftest import requires_jax, requires_tf
from tests.integration.plain_run import captured_and_plain_losses
from tests.integration.test_advise_script import requires_patch

# The fixture scripts, the per-test capture cache and the copy helper: test_script_capture's.
from tests.integration.test_script_capture import ROOT, _cache, _copy  # noqa: F401


@requires_jax
def test_a_dict_of_loss_objects_with_loss_weights_trains_as_the_script_does(
        tmp_path: Path) -> None:
    """keras.io's multi-output model compiles with ``loss={name: Loss()}`` and
    ``loss_weights={name: w}``: the captured workload rebuilds each output's loss (Keras'
    ``losses.get`` refuses the dict) and keeps the weights, so its first steps from the
    captured weights equal a plain run of the script's own compile."""
    script = _copy("dict_losses.py", tmp_path)
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=str(ROOT))
    cap = capture_script(script, env=env)
    assert cap.info["loss_weights"] == {"priority": 1.0, "department": 0.2}
    steps = (
        "cut = lambda v, i: {k: a[i*16:(i+1)*16] for k, a in v.items()} "
        "if isinstance(v, dict) else v[i*16:(i+1)*16]\n"
        "print('LOSSES', json.dumps([float(m.train_on_batch(cut(x, i), cut(y, i))[0])"
        " for i in range(3)]))\n")
    got = captured_and_plain_losses(cap, script, steps, env, tmp_path)
    assert len(got) == 2 and len(got[0]) == 3 and all(np.isfinite(got[0]))
    np.testing.assert_allclose(got[0], got[1], rtol=1e-6)


@requires_jax
@requires_tf
def test_a_backend_patch_is_checked_by_running_the_script_up_to_fit_there(
        tmp_path: Path) -> None:
    """The quickstart's `model(x).numpy()` runs on TensorFlow and fails on JAX: a
    KERAS_BACKEND=jax patch would break the script, which the trials (a reloaded saved
    model) never see; running the script up to its fit() on that backend finds the line."""
    script = _copy("numpy_before_fit.py", tmp_path)
    failure = fails_before_fit(script, [], "jax", timeout=120)
    assert "AttributeError" in failure and "numpy" in failure
    assert failure.endswith(f"(at {script}:11)")
    assert fails_before_fit(script, [], "tensorflow", timeout=120) == ""


@requires_tf
def test_the_monitor_reads_the_batch_size_of_a_tf_data_pipeline(tmp_path: Path) -> None:
    """TensorFlow's tutorials feed fit() `.batch(n)` pipelines (batch dimension None, so
    Keras' adapter does not know n): the monitor still reports samples/s, from the
    pipeline's last `.batch(n)`, through cache/prefetch/map and
    timeseries_dataset_from_array; a pipeline with no batch says unknown."""
    code = (
        "import numpy as np, tensorflow as tf, keras\n"
        "from devicebench.monitor import TrainingMonitor\n"
        "from devicebench.monitor.probe import dataset_batch_size\n"
        "x = np.zeros((96, 3), 'float32'); y = np.zeros((96, 1), 'float32')\n"
        "ds = tf.data.Dataset.from_tensor_slices((x, y)).map(lambda a, b: (a * 2, b))\n"
        "ts = keras.utils.timeseries_dataset_from_array(x, y[5:], sequence_length=5,"
        " batch_size=24)\n"
        "m = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])\n"
        "m.compile(optimizer='sgd', loss='mse')\n"
        "cb = TrainingMonitor(verbose=0)\n"
        "m.fit(ds.batch(16).cache().prefetch(2), epochs=1, verbose=0, callbacks=[cb])\n"
        "print('SIZES', dataset_batch_size(ts), dataset_batch_size(ds),"
        " cb.log.batch_size, cb.summary().get('samples_per_s') is not None)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120, check=False, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split("SIZES ")[-1].split() == ["24", "None", "16", "True"]


@requires_patch
def test_a_patch_to_a_script_given_by_absolute_path_applies(tmp_path: Path,
                                                           monkeypatch) -> None:
    """`devicebench advise ~/proj/train.py` (the shell makes the path absolute): GNU patch
    ignores absolute names in a diff ("potentially dangerous"); the diff names the file
    as patch can apply it, and the command says where to run it."""
    proj = tmp_path / "proj"
    proj.mkdir()
    script = proj / "train.py"
    script.write_text("import keras\nmodel.fit(x, y)\n")
    elsewhere = tmp_path / "other"  # the user's shell is in another directory
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    base = TrialSpec(str(script), backend="tensorflow")
    p = script_patch(str(script), script.read_text(), base, base.with_(backend="jax"))
    (elsewhere / "devicebench.patch").write_text(p.diff)
    assert p.diff.startswith("--- train.py\n+++ train.py\n")
    assert p.command == f"patch -d {proj} -p0 < devicebench.patch"
    applied = subprocess.run(p.command, shell=True, cwd=elsewhere, capture_output=True,
                             text=True, check=False, timeout=30)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert script.read_text().splitlines()[1] == 'os.environ["KERAS_BACKEND"] = "jax"' \
        "  # devicebench advise"
    # Under the current directory the name stays relative and no -d is needed.
    monkeypatch.chdir(tmp_path)
    assert patch_name(str(script)) == ("proj/train.py", "")
