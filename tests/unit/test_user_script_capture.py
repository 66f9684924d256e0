"""Pure parts of capturing a user's script, from defects found on tutorial scripts
(tests/fixtures/scripts/users/README.md)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from devicebench.advisor.explain import Evidence, explain
from devicebench.advisor.patch import backend_blocker
from devicebench.script_check import check_source
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec
from devicebench.workloads.capture_worker import plain_weights
from devicebench.workloads.script import weighting_notes
from devicebench.workloads.script_workload import capture_tags


def test_loss_weights_are_kept_as_json_numbers_or_dropped_whole() -> None:
    assert plain_weights({"priority": 1, "department": np.float32(0.2)}) == {
        "priority": 1.0, "department": float(np.float32(0.2))}
    assert plain_weights([1.0, 0.5]) == [1.0, 0.5]
    assert plain_weights(None) is None
    # Anything not made of numbers is dropped whole (Keras' default, all 1), never half-kept.
    assert plain_weights({"a": 1.0, "b": "heavy"}) is None


def test_class_weight_left_out_of_the_candidates_is_said() -> None:
    # The imbalanced-data tutorial's fit(..., class_weight={0: w0, 1: w1}).
    (note,) = weighting_notes({"class_weight": "{0: np.float64(0.51), 1: np.float64(29.3)}",
                               "batch_size": "2048"})
    assert note.startswith("its fit() passes `class_weight`: the candidates train without it")
    assert weighting_notes({"batch_size": "2048", "sample_weight": "None"}) == []


def test_input_shape_fix_is_spelled_as_the_script_spells_keras() -> None:
    # TensorFlow's beginner quickstart: `tf.keras.layers.Flatten(input_shape=(28, 28))`, and
    # no `keras` name in the script: the fix must not tell it to call `keras.Input`.
    source = ("import tensorflow as tf\n"
              "model = tf.keras.models.Sequential([\n"
              "    tf.keras.layers.Flatten(input_shape=(28, 28)),\n"
              "    tf.keras.layers.Dense(10)])\n")
    (finding,) = [f for f in check_source(source) if f.id == "script.input-shape"]
    assert finding.fix.startswith("make `tf.keras.Input(shape=(28, 28))` the first layer")
    assert "`tf.keras.Sequential([tf.keras.Input(shape=(28, 28)), tf.keras.layers.Flatten(" \
        in finding.fix


def test_a_backend_blocker_names_the_line_and_every_numpy_call() -> None:
    source = ("import keras\npredictions = model(x[:1]).numpy()\n"
              "print(loss_fn(y[:1], predictions).numpy())\nmodel.fit(x, y)\n")
    line = backend_blocker("jax", "t.py raised before fit(): AttributeError: "
                           "'jaxlib._jax.ArrayImpl' object has no attribute 'numpy' (at t.py:2)",
                           source)
    assert line.startswith("on the jax backend your script fails before its fit(): t.py raised")
    assert "`keras.ops.convert_to_numpy(x)`" in line and "at lines 2, 3)" in line
    tf_only = "import tensorflow as tf\n" + source.split("\n", 1)[1]  # the quickstart's
    assert "`tf.keras.ops.convert_to_numpy(x)`" in backend_blocker("jax", line, tf_only)
    other = backend_blocker("torch", "t.py raised before fit(): TypeError: boom (at t.py:9)",
                            source)
    assert other.endswith("; change that line so it runs on torch too, then apply the patch")


def test_an_embedding_models_loss_difference_across_backends_is_explained() -> None:
    # keras.io's text classification from scratch (Embedding + Conv1D, Adam): jax/cpu was
    # rejected, loss 1.4e-03 off the TF baseline's at step 12 — with no reason given.
    base = TrialSpec("text.py")
    jax = base.with_(backend="jax")

    def res(spec: TrialSpec, verdict: str) -> TrialResult:
        return TrialResult(spec, status="ok", steps_per_block=10, batch_size=32,
                           steps_per_epoch=20, block_seconds=[0.1, 0.1, 0.1],
                           block_rounds=[0, 1, 2], loss_verdict=verdict,
                           loss_detail="max relative difference 1.4e-03")

    results = {base: res(base, "reference"), jax: res(jax, "differs")}
    ev = Evidence(baseline=results[base], results=results, workload_tags=("embedding",))
    (reason,) = [r for r in explain(ev) if r.id == "sparse-embedding"]
    assert reason.text.startswith("embedding: from the same initial weights jax/cpu reached a")
    assert "tf.IndexedSlices" in reason.text
    # No Embedding, or the candidate's loss is the same: nothing to explain.
    assert not [r for r in explain(replace(ev, workload_tags=()))
                if r.id == "sparse-embedding"]
    same = {base: results[base], jax: res(jax, "same")}
    assert not [r for r in explain(replace(ev, results=same)) if r.id == "sparse-embedding"]


def test_the_advisor_and_the_workload_read_the_same_tags_from_a_capture(tmp_path) -> None:
    # The keras.io multi-output ticket model (two Embeddings): its capture's "embedding" must
    # reach the advisor's facts, not only the worker's Workload.
    from devicebench.workloads.script import capture_facts

    (tmp_path / "capture.json").write_text('{"embedding": true, "batch_size": 32}')
    facts = capture_facts(f"{tmp_path / 'workload.py'}:workload")
    assert facts["workload_tags"] == capture_tags({"embedding": True}) == ("embedding",)
