"""Pure parts of advising a script: which references are scripts, the capture cache key,
the facts the advisor reads from a capture, and the one-line refusals for bad paths."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from devicebench.errors import InputError
from devicebench.workloads.script import (
    cache_key,
    capture_facts,
    capture_script,
    is_script_ref,
)


def test_a_python_file_without_a_function_is_a_script() -> None:
    assert is_script_ref("train.py") and is_script_ref("dir/my train.py")
    assert not is_script_ref("train.py:workload") and not is_script_ref("seed-rnn")
    assert not is_script_ref("model.keras::data.npz")


def test_the_cache_key_follows_content_arguments_and_backend() -> None:
    env = {"KERAS_BACKEND": "jax"}
    key = cache_key(b"print(1)\n", [], env)
    assert key == cache_key(b"print(1)\n", [], env)
    assert key != cache_key(b"print(2)\n", [], env)
    assert key != cache_key(b"print(1)\n", ["--epochs", "3"], env)
    assert key != cache_key(b"print(1)\n", [], {})


def test_capture_facts_come_from_a_capture_directory_only(tmp_path: Path) -> None:
    (tmp_path / "workload.py").write_text("")
    (tmp_path / "capture.json").write_text(json.dumps(
        {"batch_size": 32, "epochs": 20, "recurrent": True, "timesteps": 50}))
    facts = capture_facts(f"{tmp_path / 'workload.py'}:workload")
    assert facts == {"workload_batch_size": 32, "workload_tags": ("recurrent",),
                     "workload_epochs": 20, "workload_timesteps": 50}
    assert capture_facts("seed-rnn") == {} and capture_facts("x.py:f") == {}


def test_missing_directory_and_unparsable_scripts_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def (:\n")
    for path, needle in ((tmp_path / "none.py", "script not found"),
                         (tmp_path, "is a directory"), (bad, "does not parse (line 1)")):
        with pytest.raises(InputError) as exc:
            capture_script(str(path))
        assert needle in exc.value.message


def test_a_generator_is_materialised_to_a_bounded_sample_and_said_so() -> None:
    from devicebench.workloads import capture_worker as cw

    rng = np.random.default_rng(0)

    def batches():
        while True:  # an endless generator, as Keras users write them
            x = rng.standard_normal((8, 3)).astype("float32")
            yield x, x.sum(axis=1)

    info = cw._data({"x": batches(), "steps_per_epoch": 4})
    a = info["arrays"]
    assert a["x"].shape == (32, 3) and a["y"].shape == (32,)
    assert (info["source"], info["batch_size"], info["batches"]) == ("generator", 8, 4)
    assert "4 batches of 8 (of an unknown number)" in info["notes"][0]
    assert "not part of the step times" in info["notes"][0]
    assert info["pipeline_seconds_per_batch"] > 0  # the generator itself, timed
    endless = cw._data({"x": batches()})
    assert endless["batches"] == cw.MAX_BATCHES


def test_validation_split_takes_the_last_fraction_as_keras_does() -> None:
    from devicebench.workloads import capture_worker as cw

    x = np.arange(10, dtype="float32")[:, None]
    info = cw._data({"x": x, "y": x, "validation_split": 0.25})
    a = info["arrays"]
    assert a["x"][:, 0].tolist() == [0, 1, 2, 3, 4, 5, 6] and len(a["x_val"]) == 3
    assert info["validation"] == "validation_split=0.25"
    # named inputs (a dict of arrays) split the same way, every array at the same row
    named = cw._data({"x": {"a": x, "b": 2 * x}, "y": x, "validation_split": 0.25})["arrays"]
    assert named["x"]["b"][:, 0].tolist() == [0, 2, 4, 6, 8, 10, 12]
    assert named["x_val"]["a"][:, 0].tolist() == [7, 8, 9]
    with pytest.raises(ValueError, match="more than one level deep"):
        cw._data({"x": {"a": {"inner": x}}, "y": x})
