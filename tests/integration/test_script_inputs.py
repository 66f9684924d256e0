"""A script's first fit() fed something other than one array (real TF/JAX workers on the
CPU; the test process imports no framework): a dict of arrays (named inputs) captured and
measured, a list of arrays (two inputs, two outputs) trained from the captured start
exactly as a plain run trains it, a PyDataset and a generator materialised to a bounded
sample with the user's own pipeline timed apart, and the history of a run on a script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from devicebench.workloads.script import capture_script
from tests.conftest import requires_jax, requires_tf
from tests.integration.plain_run import captured_and_plain_losses

# The fixture scripts, the per-test capture cache and the copy helper: test_script_capture's.
from tests.integration.test_script_capture import ROOT, SCRIPTS, _cache, _copy  # noqa: F401


@requires_tf
def test_named_inputs_are_captured_measured_and_listed_in_history(tmp_path: Path) -> None:
    import devicebench
    from devicebench.store import ResultStore
    from devicebench.store.runs import run_history

    script = _copy("dict_inputs.py", tmp_path)
    cap = capture_script(script)
    i = cap.info
    assert i["source"] == "arrays" and i["structures"]["x"] == {"dict": ["image", "meta"]}
    assert (i["samples"], i["validation_samples"], i["batch_size"]) == (72, 24, 16)
    assert "its inputs: a dict of 2 arrays (image, meta), kept as given" in cap.notes
    with np.load(cap.directory / "data.npz") as d:
        rng = np.random.default_rng(2)
        image = rng.standard_normal((96, 8)).astype("float32")
        np.testing.assert_array_equal(d["x.0"], image[:72])  # validation_split's rows
        np.testing.assert_array_equal(d["x_val.0"], image[72:])
    db = tmp_path / "r.db"
    out = devicebench.run([script], backends=["tensorflow"], rounds=2, replicate=False, db=db)
    (row,) = out.rows
    assert row.result.status == "ok" and row.result.spec.workload == script
    assert len(row.result.equivalence_losses) > 0 and row.result.validation_samples == 24
    with ResultStore.open(db, read_only=True) as store:
        (hist,) = run_history(store)
    assert [s["script"] for s in hist.scripts] == [os.path.realpath(script)]
    assert hist.scripts[0]["capture_dir"] == str(cap.directory)
    assert hist.workload_labels() == [f"{os.path.realpath(script)} (capture {cap.directory})"]
    shown = subprocess.run([sys.executable, "-m", "devicebench", "history", "--db", str(db),
                            "--json"], capture_output=True, text=True, timeout=60,
                           check=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert json.loads(shown.stdout)["runs"][0]["scripts"][0]["capture_dir"] == str(cap.directory)


@pytest.mark.slow  # test_user_scripts: a two-output model's steps equal the plain script's
@requires_jax
def test_lists_of_inputs_and_outputs_train_as_the_plain_script_does(tmp_path: Path) -> None:
    """Two inputs and two outputs as lists: the captured workload's first steps equal a
    plain run of the script from the same weights on the same batches."""
    script = _copy("list_io.py", tmp_path)
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=str(ROOT))
    cap = capture_script(script, env=env)
    assert cap.info["structures"] == {"x": {"list": 2}, "y": {"list": 2},
                                      "x_val": {"list": 2}, "y_val": {"list": 2}}
    steps = (
        "first = lambda out: float(out[0] if isinstance(out, (list, tuple)) else out)\n"
        "cut = lambda v, i: [a[i*16:(i+1)*16] for a in v]\n"
        "print('LOSSES', json.dumps([first(m.train_on_batch(cut(x, i), cut(y, i)))"
        " for i in range(3)]))\n")
    got = captured_and_plain_losses(cap, script, steps, env, tmp_path)
    assert len(got) == 2
    assert len(got[0]) == 3 and all(np.isfinite(got[0]))
    np.testing.assert_allclose(got[0], got[1], rtol=1e-6)


@requires_tf
def test_a_pydataset_and_a_generator_are_materialised_and_their_pipeline_timed(
        tmp_path: Path) -> None:
    ds = capture_script(_copy("pydataset.py", tmp_path))
    i = ds.info
    assert (i["source"], i["batches"], i["total_batches"], i["batch_size"]) == (
        "PyDataset", 6, 6, 16)
    assert i["structures"]["x"] == {"dict": ["tokens", "extra"]} and i["samples"] == 96
    # re-iterable: timed on a second pass of its own, apart from the materialising one
    assert i["pipeline_method"] == "second pass" and i["pipeline_batches_timed"] == 5
    assert i["pipeline_seconds_per_batch"] > 0 and i["pipeline_first_pass_seconds_per_batch"] > 0
    assert any("materialised: 6 batches of 16;" in n and "not part of the step times" in n
               for n in ds.notes)
    said = ds.to_dict()  # --json's "script"
    assert (said["source"], said["batches"], said["total_batches"]) == ("PyDataset", 6, 6)
    assert said["structures"]["x"] == {"dict": ["tokens", "extra"]}
    gen = capture_script(_copy("generator.py", tmp_path))
    g = gen.info
    assert (g["source"], g["batches"], g["total_batches"], g["samples"]) == (
        "generator", 5, None, 80)  # steps_per_epoch bounds an endless generator
    assert g["pipeline_method"] == "first pass" and g["pipeline_batches_timed"] == 4
    assert any("5 batches of 16 (of an unknown number)" in n and "read, once" in n
               for n in gen.notes)


@pytest.mark.slow  # an advise end to end; the figures and the line: tests/unit
@requires_tf
@requires_jax
def test_advise_json_carries_the_input_pipeline_against_the_step(tmp_path: Path) -> None:
    shutil.copy(SCRIPTS / "pydataset.py", tmp_path / "train.py")
    env = dict(os.environ, DEVICEBENCH_CACHE_DIR=str(tmp_path / "cache"),
               DEVICEBENCH_DB=str(tmp_path / "r.db"), TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=str(ROOT))
    env.pop("KERAS_BACKEND", None)
    res = subprocess.run([sys.executable, "-m", "devicebench", "advise", "train.py",
                          "--budget", "10", "--json"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=400, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout)
    p = out["input_pipeline"]
    assert p["source"] == "PyDataset" and p["method"] == "second pass"
    assert p["step_seconds"] > 0 and p["line"].startswith("input pipeline: ")
    assert p["slower_than_step"] == (p["seconds_per_batch"] > p["step_seconds"])
    assert bool(p["finding"]) == (p["slower_than_step"] or p["slower_than_recommended"])
    assert ("your input pipeline" in out["verdict"]) == bool(p["finding"])
