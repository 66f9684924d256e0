"""A user's script captured at its first fit() (real TF/JAX in worker processes; the test
process imports no framework): what is recorded, the cache, the refusals (one line
each), and the re-run path for a model whose classes live in the script."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from devicebench.errors import InputError
from devicebench.workloads.script import capture_script
from tests.conftest import requires_jax, requires_tf

SCRIPTS = Path(__file__).resolve().parents[1] / "fixtures" / "scripts" / "advise"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEVICEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    monkeypatch.delenv("KERAS_BACKEND", raising=False)


def _copy(name: str, tmp_path: Path) -> str:
    dst = tmp_path / name
    shutil.copy(SCRIPTS / name, dst)
    return str(dst)


@requires_tf
def test_tf_first_script_is_captured_with_its_settings_and_cached(tmp_path: Path) -> None:
    script = _copy("tiny.py", tmp_path)
    cap = capture_script(script)
    i = cap.info
    assert cap.fit_site == f"{script}:13" and i["compile_site"]["line"] == 11
    assert (i["params"], i["batch_size"], i["epochs"]) == (8 * 16 + 16 + 16 + 1, 32, 500)
    # validation_split=0.25 as Keras splits it: the last quarter
    assert (i["samples"], i["validation_samples"]) == (192, 64)
    assert i["keras_backend"] == "tensorflow" and i["reloadable"] and not cap.cached
    with np.load(cap.directory / "data.npz") as d:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((256, 8)).astype("float32")
        np.testing.assert_array_equal(d["x"], x[:192])
        np.testing.assert_array_equal(d["x_val"], x[192:])
    again = capture_script(script)
    assert again.cached and again.directory == cap.directory and again.info == i
    # (another argument list, script content or backend is another key: tests/unit)


@requires_tf
def test_args_after_dashes_a_tf_data_pipeline_and_two_fits(tmp_path: Path) -> None:
    script = _copy("args_tfdata_twofits.py", tmp_path)
    with pytest.raises(InputError) as exc:
        capture_script(script)
    msg = exc.value.message
    assert "needs arguments it was not given" in msg and "--epochs" in msg
    assert f"devicebench advise {script} -- ARGS" in msg
    cap = capture_script(script, ["--epochs", "7", "--batch", "32"])
    i = cap.info
    assert (i["epochs"], i["batch_size"], i["source"]) == (7, 32, "tf.data.Dataset")
    assert i["batches"] == 5 and i["samples"] == 160
    assert i["pipeline_seconds_per_batch"] > 0  # the user's own pipeline, timed apart:
    assert i["pipeline_method"] == "second pass"  # a tf.data.Dataset is iterated again
    assert any("materialised: 5 batches of 32" in n and "not part of the step times" in n
               for n in cap.notes)
    assert "more than once" in cap.notes[0] and f"{script}:19" in cap.notes[0]


@requires_tf
def test_seed000_as_written_is_refused_with_its_error_and_doctors_fix(
        tmp_path: Path) -> None:
    script = tmp_path / "rnn.py"
    script.write_text((ROOT / "tests/fixtures/scripts/seed000_rnn.py").read_text())
    with pytest.raises(InputError) as exc:
        capture_script(str(script))
    msg = exc.value.message
    assert "raised before fit()" in msg and f"{script}:27" in msg
    assert "script.legacy-optimizer" in msg and "\n" not in msg


@requires_tf
def test_custom_train_step_is_refused_with_what_to_do(tmp_path: Path) -> None:
    script = _copy("custom_step.py", tmp_path)
    with pytest.raises(InputError) as exc:
        capture_script(script)
    assert "overrides Custom.train_step" in exc.value.message
    assert "devicebench monitor -- python" in exc.value.message


@requires_tf
def test_graph_mode_is_refused_at_the_line_that_turned_eager_off(tmp_path: Path) -> None:
    """A third-party script (tensorflow_macos#128's tutorial) calls
    disable_eager_execution(): said as such, at its line, not as a data problem."""
    script = _copy("graph_mode.py", tmp_path)
    with pytest.raises(InputError) as exc:
        capture_script(script)
    assert "turned TensorFlow's eager execution off before fit()" in exc.value.message
    assert f"{script}:8" in exc.value.message and "\n" not in exc.value.message


def test_scripts_that_never_reach_fit_are_refused_in_one_line(tmp_path: Path) -> None:
    cases = {"no_fit_loop.py": "ran to its end without calling keras Model.fit()",
             "raises.py": "raised before fit(): KeyError: 'learning_rate'"}
    for name, needle in cases.items():
        script = _copy(name, tmp_path)
        with pytest.raises(InputError) as exc:
            capture_script(script)
        assert needle in exc.value.message and "\n" not in exc.value.message
    assert f"{tmp_path / 'raises.py'}:4" in exc.value.message
    with pytest.raises(InputError) as exc:
        capture_script(_copy("sleeps.py", tmp_path), timeout=3)
    assert "did not call keras Model.fit() within the set-up timeout" in exc.value.message
    assert not list((tmp_path / "cache" / "scripts").glob("*/capture.json"))  # none cached


@requires_jax
def test_subclassed_model_with_custom_layer_reruns_the_script_in_the_worker(
        tmp_path: Path) -> None:
    """Its saved model needs the script's classes: a JAX worker re-runs the script to its
    fit(), loads the captured weights, and trains from the same start as the script's
    own model (its first steps' losses equal to float32 rounding)."""
    import subprocess

    script = _copy("subclassed.py", tmp_path)
    env = dict(os.environ, KERAS_BACKEND="jax")
    cap = capture_script(script, env=env)
    assert not cap.info["reloadable"] and cap.info["model_class"] == "Net"
    assert any("re-runs the script up to fit()" in n for n in cap.notes)
    assert cap.info["validation_samples"] == 32
    probe = (
        "import sys, json, numpy as np, keras\n"
        "from devicebench.workloads.loader import load_workload\n"
        f"w = load_workload({cap.ref!r})\n"
        "m = w.build_model(keras)\n"
        "m.compile(loss=w.loss, optimizer=w.optimizer(keras))\n"
        "d = w.make_data(0)\n"
        "print(json.dumps([float(m.train_on_batch(d.x[i*16:(i+1)*16], d.y[i*16:(i+1)*16]))"
        " for i in range(3)]))\n")
    out = subprocess.run([sys.executable, "-c", probe], env=dict(env, PYTHONPATH=str(ROOT)),
                         capture_output=True, text=True, timeout=120, check=True,
                         cwd=tmp_path)
    losses = [float(v) for v in out.stdout.strip().splitlines()[-1].strip("[]").split(",")]
    # (the script is unseeded: its weights, and so whether 3 steps lower the loss, vary)
    assert len(losses) == 3 and all(np.isfinite(losses))
    # the script's own model from the same weights, as a plain run trains it
    plain = (
        "import runpy, sys, json, keras, numpy as np\n"
        f"npz = np.load({str(cap.directory / 'weights.npz')!r})\n"
        "def fit(self, x, y, **kw):\n"
        "    self(x[:1])\n"
        "    self.set_weights([npz[f'arr_{i}'] for i in range(len(npz.files))])\n"
        "    print(json.dumps([float(self.train_on_batch(x[i*16:(i+1)*16], y[i*16:(i+1)*16]))"
        " for i in range(3)]))\n"
        "    sys.exit(0)\n"
        "keras.Model.fit = fit\n"
        f"runpy.run_path({script!r}, run_name='__main__')\n")
    ref = subprocess.run([sys.executable, "-c", plain], env=env, capture_output=True,
                         text=True, timeout=120, check=True, cwd=tmp_path)
    want = [float(v) for v in ref.stdout.strip().splitlines()[-1].strip("[]").split(",")]
    np.testing.assert_allclose(losses, want, rtol=1e-5)


@pytest.mark.slow  # 10 s
@requires_jax
def test_a_candidates_precision_applies_to_the_captured_model(tmp_path: Path) -> None:
    """The saved layers carry float32; a mixed-precision candidate must compute in its
    own policy (and a float32 one in float32), from the same captured weights."""
    import subprocess

    script = _copy("tiny.py", tmp_path)
    env = dict(os.environ, KERAS_BACKEND="jax")
    cap = capture_script(script, env=env)
    probe = (
        "import keras, numpy as np\n"
        "from devicebench.workloads.loader import load_workload\n"
        f"w = load_workload({cap.ref!r})\n"
        "npz = np.load("
        f"{str(cap.directory / 'weights.npz')!r})\n"
        "for policy in ('mixed_bfloat16', 'float32'):\n"
        "    keras.config.set_dtype_policy(policy)\n"
        "    m = w.build_model(keras)\n"
        "    same = all(np.array_equal(np.asarray(v), npz[f'arr_{i}'])\n"
        "               for i, v in enumerate(m.get_weights()))\n"
        "    print(policy, m.layers[0].compute_dtype, same)\n")
    out = subprocess.run([sys.executable, "-c", probe], env=dict(env, PYTHONPATH=str(ROOT)),
                         capture_output=True, text=True, timeout=120, check=True)
    lines = out.stdout.strip().splitlines()[-2:]
    assert lines == ["mixed_bfloat16 bfloat16 True", "float32 float32 True"], out.stdout


@pytest.mark.slow  # the captured-model precision test covers the same rebuild
@requires_jax
def test_a_saved_model_workload_takes_the_trials_precision_too(tmp_path: Path) -> None:
    """`advise model.keras`: a mixed_bfloat16 trial of a model saved in float32 computes
    in bfloat16 (it did not: its layers kept the saved float32 policy)."""
    import subprocess

    from tests.conftest import save_keras_model

    path = tmp_path / "m.keras"
    save_keras_model(path, "keras.Input((4,)), keras.layers.Dense(3)", "mse", "'sgd'")
    probe = (
        "import keras\n"
        "from devicebench.workloads.saved import keras_file_workload\n"
        f"w = keras_file_workload({str(path)!r})\n"
        "ref = w.build_model(keras).get_weights()\n"
        "keras.config.set_dtype_policy('mixed_bfloat16')\n"
        "m = w.build_model(keras)\n"
        "print(m.layers[0].compute_dtype, all((a == b).all() for a, b in "
        "zip(ref, m.get_weights())))\n")
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "bfloat16 True", out.stdout
