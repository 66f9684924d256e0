"""Every built-in workload builds, compiles and trains on each installed Keras backend.

One subprocess per backend (the Keras backend is fixed at import), running all workloads.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from devicebench.workloads import workload_names
from tests.conftest import has_module

MARKER = "WORKLOADS_JSON:"

# Runs in the child: build, compile, 3 train_on_batch steps on the first batch of each
# workload's own data; the result goes out on one marked line (frameworks log freely).
CHILD = r"""
import json
import keras
import numpy as np
from devicebench.workloads import BUILTIN_WORKLOADS

keras.utils.set_random_seed(0)
out = {}
for name, wl in BUILTIN_WORKLOADS.items():
    data = wl.make_data(wl.default_seed)
    x, y = data.x[: wl.batch_size], data.y[: wl.batch_size]
    model = wl.build_model(keras)
    model.compile(optimizer=wl.optimizer(keras), loss=wl.loss, metrics=list(wl.metrics))
    losses = [float(model.train_on_batch(x, y, return_dict=True)["loss"]) for _ in range(3)]
    out[name] = {
        "losses": losses,
        "output_shape": list(model.outputs[0].shape),
        "y_shape": list(y.shape),
        "y_max": float(np.max(y)),
        "note": data.note,
    }
print("MARKER" + json.dumps(out))
""".replace("MARKER", MARKER)

BACKENDS = [
    pytest.param(
        # slow: the TensorFlow build of every workload stays in the default run
        "jax", marks=[pytest.mark.skipif(not has_module("jax"), reason="jax not installed"),
                      pytest.mark.slow]
    ),
    pytest.param(
        "tensorflow",
        marks=pytest.mark.skipif(not has_module("tensorflow"), reason="tensorflow not installed"),
    ),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_workload_builds_and_trains(backend, tmp_path):
    env = dict(os.environ)
    env.update(
        KERAS_BACKEND=backend,
        KERAS_HOME=str(tmp_path / "keras_home"),  # synthetic MNIST: no download, seeded
        CUDA_VISIBLE_DEVICES="",
        TF_CPP_MIN_LOG_LEVEL="2",
        JAX_PLATFORMS="cpu",
    )
    proc = subprocess.run(
        [sys.executable, "-c", CHILD],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARKER)]
    assert lines, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = json.loads(lines[-1][len(MARKER) :])

    assert sorted(results) == sorted(workload_names())
    for name, res in results.items():
        losses = res["losses"]
        assert len(losses) == 3 and all(math.isfinite(v) for v in losses), (name, losses)
        # Three Adam steps on one batch (seeded) lower its loss.
        assert losses[-1] < losses[0], (name, losses)
        out, y_shape = res["output_shape"], res["y_shape"]
        assert out[0] is None, (name, out)  # any batch size
        if len(y_shape) == 1:  # sparse labels: one softmax unit per class
            assert out[1] > res["y_max"], (name, out, res["y_max"])
        else:  # regression: output matches the target's trailing shape
            assert out[1:] == y_shape[1:], (name, out, y_shape)
    assert "synthetic" in results["mnist-cnn"]["note"]
