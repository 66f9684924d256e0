"""The attach seam (devicebench.backends.fit_seam) finds fit() whatever the script's
import style: `devicebench monitor -- python s.py` on tiny real TF and JAX fits, one
fresh process per style (the import order is the point). Each script writes the class
its Keras backend; only the TrainingMonitor writes the CSV, so a miss leaves none."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import requires_jax, requires_tf

ROOT = Path(__file__).resolve().parents[2]

FIT = """
rng = np.random.default_rng(0)
x = rng.standard_normal((64, 4)).astype("float32")
y = x.sum(axis=1, keepdims=True)
model = {K}.Sequential([{K}.Input((4,)), {K}.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
model.fit(x, y, epochs=2, batch_size=16, verbose=0)
open(OUT, "w").write(json.dumps({{"backend": {K}.backend.backend()}}))
"""

HEAD = "import json, sys\nimport numpy as np\nOUT = sys.argv[1]\n"

STYLES = {
    # seed 000's and the TF tutorials' style: TensorFlow first, then tf.keras
    "tf_then_tf_keras": ("import tensorflow as tf\n", "tf.keras", None),
    "from_tensorflow_import_keras": ("from tensorflow import keras\n", "keras", None),
    "tf_first_then_keras": ("import tensorflow as tf\nimport keras\n", "keras", None),
    "keras_on_jax_env": ("import keras\n", "keras", "jax"),
    "backend_set_in_script": ('import os\nos.environ["KERAS_BACKEND"] = "jax"\n'
                              "import tensorflow as tf\nimport keras\n", "keras", "unset"),
}
# `import keras` on the default backend: tests/integration/test_monitor.py's CLI test.


def _script(tmp_path: Path, style: str) -> Path:
    imports, k, _ = STYLES[style]
    body = FIT.format(K=k)
    if style == "keras_on_jax_env":  # Keras imported inside a function, on JAX
        body = "def train():\n    import keras\n" + "".join(
            f"    {ln}\n" for ln in FIT.format(K="keras").strip().splitlines()) + "train()\n"
        imports = ""
    path = tmp_path / f"{style}.py"
    path.write_text(HEAD + imports + body)
    return path


@pytest.mark.parametrize("style", [
    pytest.param(s, marks=[requires_tf] + ([requires_jax] if STYLES[s][2] else []))
    for s in STYLES])
def test_monitor_attaches_in_every_import_style(style: str, tmp_path: Path) -> None:
    script = _script(tmp_path, style)
    seen = tmp_path / "seen.json"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("KERAS_BACKEND", None)
    backend = STYLES[style][2]
    if backend and backend != "unset":
        env["KERAS_BACKEND"] = backend
    steps = tmp_path / "steps.csv"
    res = subprocess.run([sys.executable, "-m", "devicebench", "monitor", "--no-store",
                          "--csv", str(steps), "--", sys.executable, str(script), str(seen)],
                         env=env, capture_output=True, text=True, timeout=240, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(seen.read_text())["backend"] == ("jax" if backend else "tensorflow")
    assert "steady " in res.stderr + res.stdout  # the monitor's summary line
    with steps.open() as f:
        rows = list(csv.DictReader(f))
    assert rows, "the monitor wrote no CSV rows"


SAVE_LOAD = """
import json, sys, warnings
import numpy as np
import tensorflow as tf
from tensorflow import keras
rng = np.random.default_rng(0)
x = rng.standard_normal((64, 4)).astype("float32")
y = x.sum(axis=1, keepdims=True)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
model.fit(x, y, epochs=1, batch_size=16, verbose=0)
model.save(sys.argv[2])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    loaded = keras.models.load_model(sys.argv[2])
loss = loaded.evaluate(x, y, verbose=0)  # raises on a model loaded uncompiled
open(sys.argv[1], "w").write(json.dumps({
    "compiled": bool(loaded.compiled), "loss": float(loss),
    "custom_compile_warning": any("compile()" in str(w.message) for w in caught)}))
"""


@requires_tf
def test_a_model_saved_and_loaded_under_the_monitor_comes_back_compiled(tmp_path: Path):
    """keras-io's timeseries example (a user script, TF imported first) saves the best
    model and loads it again: under `monitor` the loaded model was left uncompiled, with
    Keras's "compile() method is custom" warning, because the seam's compile wrapper sat
    on Model instead of the class that defines compile (Keras 3: Trainer)."""
    script = tmp_path / "save_load.py"
    script.write_text(SAVE_LOAD)
    seen = tmp_path / "seen.json"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("KERAS_BACKEND", None)
    res = subprocess.run([sys.executable, "-m", "devicebench", "monitor", "--no-store", "--",
                          sys.executable, str(script), str(seen), str(tmp_path / "m.keras")],
                         env=env, capture_output=True, text=True, timeout=240, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(seen.read_text())
    assert got["compiled"] and not got["custom_compile_warning"], got
    assert "steady " in res.stderr + res.stdout
