"""`devicebench advise train.py` end to end (real workers), and the patch to a script:
`patch -p0` applies it and the patched script runs with the recommended settings."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devicebench.advisor.patch import script_patch
from devicebench.trials.spec import TrialSpec
from tests.conftest import requires_jax, requires_tf

SCRIPTS = Path(__file__).resolve().parents[1] / "fixtures" / "scripts" / "advise"
ROOT = Path(__file__).resolve().parents[2]
requires_patch = pytest.mark.skipif(shutil.which("patch") is None, reason="no patch(1)")


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ, DEVICEBENCH_CACHE_DIR=str(tmp_path / "cache"),
               DEVICEBENCH_DB=str(tmp_path / "r.db"), TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("KERAS_BACKEND", None)
    return env


@requires_tf
@requires_jax
@requires_patch
def test_advise_a_script_names_its_fit_and_gives_a_patch_that_applies(
        tmp_path: Path) -> None:
    shutil.copy(SCRIPTS / "tiny.py", tmp_path / "train.py")
    res = subprocess.run([sys.executable, "-m", "devicebench", "advise", "train.py",
                          "--budget", "10", "--json"], cwd=tmp_path, env=_env(tmp_path),
                         capture_output=True, text=True, timeout=400, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout)
    s = out["script"]
    assert out["workload"] == "train.py" and s["measured_fit"] == "train.py:13"
    assert (s["params"], s["batch_size"], s["epochs"]) == (161, 32, 500)
    assert out["baseline"]["backend"] == "tensorflow" and out["epochs"] == 500
    assert out["verdict"]
    if out["recommended"] is not None and out["patch"]:
        assert out["patch"].startswith("--- train.py\n+++ train.py\n")
        applied = subprocess.run(["patch", "-p0", "--dry-run"], input=out["patch"],
                                 cwd=tmp_path, capture_output=True, text=True, check=False)
        assert applied.returncode == 0, applied.stdout + applied.stderr


SCRIPT = '''"""A small script."""
import numpy as np
import keras

x = np.random.default_rng(0).standard_normal((64, 4)).astype("float32")
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd",
              loss="mse",)
model.fit(x, x[:, :1], epochs=1, batch_size=16, verbose=0)
print(keras.backend.backend(), model.jit_compile, keras.config.dtype_policy().name)
'''


@requires_jax
@requires_patch
def test_the_patch_applies_with_patch_p0_and_the_patched_script_runs(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    base = TrialSpec("train.py", backend="tensorflow")
    rec = base.with_(backend="jax", jit="on", precision="mixed_bfloat16")
    p = script_patch("train.py", SCRIPT, base, rec, compile_line=7, fit_line=9)
    assert len(p.changes) == 3 and not p.not_patched
    applied = subprocess.run(["patch", "-p0"], input=p.diff, cwd=tmp_path,
                             capture_output=True, text=True, check=False)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    patched = (tmp_path / "train.py").read_text()
    assert patched.index('os.environ["KERAS_BACKEND"] = "jax"') < patched.index("import keras")
    assert patched.startswith('"""A small script."""\n')  # the docstring stays first
    assert "loss=\"mse\", jit_compile=True)" in patched
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("KERAS_BACKEND", None)
    run = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-3:] == ["jax", "True", "mixed_bfloat16"]


def test_a_script_that_already_sets_its_backend_is_changed_in_place() -> None:
    src = 'import os\nos.environ["KERAS_BACKEND"] = "tensorflow"\nimport keras\n'
    base = TrialSpec("t.py", backend="tensorflow")
    p = script_patch("t.py", src, base, base.with_(backend="jax"))
    assert '-os.environ["KERAS_BACKEND"] = "tensorflow"' in p.diff
    assert '+os.environ["KERAS_BACKEND"] = "jax"' in p.diff
    assert "+import os" not in p.diff
    assert script_patch("t.py", src, base, base).diff == ""


def _advise_json(tmp_path: Path, name: str, *args: str) -> dict:
    shutil.copy(SCRIPTS / name, tmp_path / name)
    res = subprocess.run([sys.executable, "-m", "devicebench", "advise", name, "--budget",
                          "30", "--json", *args], cwd=tmp_path, env=_env(tmp_path),
                         capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout)


@pytest.mark.slow
@requires_tf
@requires_jax
def test_seed_scripts_are_advised_as_written(tmp_path: Path) -> None:
    """The SimpleRNN forum script (Keras 3 form) and the MNIST tutorial script (synthetic
    data of MNIST's shapes, fewer samples through its own --samples argument)."""
    rnn = _advise_json(tmp_path, "seed000_keras3.py")
    s = rnn["script"]
    assert s["measured_fit"] == "seed000_keras3.py:31" and s["validation"] == "validation_data"
    assert (s["params"], s["batch_size"], s["epochs"], s["samples"]) == (3, 32, 20, 7000)
    assert rnn["verdict"].startswith("for the fit() at seed000_keras3.py:31: ")
    mnist = _advise_json(tmp_path, "seed001_mnist.py", "--", "--samples", "2048")
    s = mnist["script"]
    assert s["measured_fit"] == "seed001_mnist.py:31" and s["args"] == ["--samples", "2048"]
    assert (s["params"], s["batch_size"], s["epochs"], s["samples"]) == (54410, 256, 5, 2048)
    for out in (rnn, mnist):
        if out["patch"]:
            ok = subprocess.run(["patch", "-p0", "--dry-run"], input=out["patch"],
                                cwd=tmp_path, capture_output=True, text=True, check=False)
            assert ok.returncode == 0, ok.stdout + ok.stderr


@pytest.mark.slow
@requires_tf
@requires_jax
def test_the_main_job_on_a_script_runs_doctor_then_advise(tmp_path: Path) -> None:
    shutil.copy(SCRIPTS / "tiny.py", tmp_path / "train.py")
    res = subprocess.run([sys.executable, "-m", "devicebench", "train.py", "--budget", "10"],
                         cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True,
                         timeout=600, check=False)
    assert res.returncode in (0, 1), res.stderr[-3000:]
    out = res.stdout
    assert out.index("findings; `devicebench doctor train.py`") < out.index(
        "measuring its fit() at train.py:13")
    assert "Verdict" in out


def test_the_python_api_routes_a_script_to_its_capture(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    import devicebench
    from devicebench.errors import InputError

    monkeypatch.setenv("DEVICEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    shutil.copy(SCRIPTS / "raises.py", tmp_path / "raises.py")
    with pytest.raises(InputError, match=r"raised before fit\(\): KeyError"):
        devicebench.advise(str(tmp_path / "raises.py"), budget=10)
    with pytest.raises(InputError, match="script not found"):
        devicebench.advise(str(tmp_path / "none.py"), budget=10)


@pytest.mark.slow
@requires_tf
@requires_jax
def test_the_python_api_and_run_on_a_script(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import devicebench

    for key, value in _env(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    shutil.copy(SCRIPTS / "tiny.py", tmp_path / "train.py")
    monkeypatch.chdir(tmp_path)
    result = devicebench.advise("train.py", budget=10)
    assert result.capture.fit_site == "train.py:13" and result.capture.info["epochs"] == 500
    assert result.verdict.startswith("for the fit() at train.py:13: ")
    assert result.to_dict()["script"]["measured_fit"] == "train.py:13"
    out = devicebench.run(["train.py"], backends=["tensorflow", "jax"], rounds=3)
    assert {r.result.spec.workload for r in out.rows} == {"train.py"}
    assert all(r.result.status == "ok" for r in out.rows)
