"""Pure parts of capturing a script's fit() input that is not one array: a dict or list
of arrays (stored and rebuilt, sliced by rows), the user's own input pipeline against the
step (figures, the finding, the rendered line), and what ``history`` shows of a run on a
captured script (its path and the capture directory)."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from devicebench.advisor.pipeline import pipeline_figures
from devicebench.workloads import arrays as A


def test_dicts_and_lists_of_arrays_round_trip_through_one_npz(tmp_path: Path) -> None:
    x = {"image": np.arange(12.0).reshape(6, 2), "meta": np.arange(6)}
    y = [np.arange(6.0), np.ones((6, 3))]
    stored, structures = {}, {}
    for name, value in (("x", x), ("y", y), ("w", np.zeros(6))):
        flat, structures[name] = A.to_npz(name, value)
        stored.update(flat)
    np.savez(tmp_path / "d.npz", **stored)
    structures = json.loads(json.dumps(structures))  # as capture.json holds them
    with np.load(tmp_path / "d.npz") as npz:
        back = {n: A.from_npz(n, dict(npz), structures[n]) for n in ("x", "y", "w")}
    assert list(back["x"]) == ["image", "meta"] and isinstance(back["y"], list)
    np.testing.assert_array_equal(back["x"]["image"], x["image"])
    np.testing.assert_array_equal(back["y"][1], y[1])
    assert A.n_samples(back["x"]) == 6 and A.n_samples(back["w"]) == 6
    part = A.take(back["x"], 2, 4)
    assert part["meta"].tolist() == [2, 3] and part["image"].shape == (2, 2)
    joined = A.concat([A.take(y, 0, 2), A.take(y, 2, 6)])
    np.testing.assert_array_equal(joined[0], y[0])
    assert A.describe(x) == "a dict of 2 arrays (image, meta)"
    with pytest.raises(ValueError, match="more than one level deep"):
        A.check_flat({"a": [np.zeros(2)]}, "inputs")
    with pytest.raises(ValueError, match="keys are not all strings"):
        A.check_flat({1: np.zeros(2)}, "inputs")


@dataclass
class _Stat:
    median: float


@dataclass
class _Result:
    step_time: _Stat | None


@dataclass
class _Row:
    result: _Result


def _row(seconds: float) -> _Row:
    return _Row(_Result(_Stat(seconds)))


INFO = {"source": "tf.data.Dataset", "pipeline_seconds_per_batch": 0.004,
        "pipeline_first_pass_seconds_per_batch": 0.006, "pipeline_batches_timed": 9,
        "pipeline_method": "second pass", "batches": 10}


def test_a_pipeline_slower_than_the_step_is_a_finding() -> None:
    slow = pipeline_figures(INFO, _row(0.002), _row(0.001))
    assert slow["slower_than_step"] and slow["slower_than_recommended"]
    assert slow["line"].startswith("input pipeline: 4.00 ms/batch vs step 2.00 ms "
                                   "(your script as written; recommended 1.00 ms)")
    assert "second pass" in slow["line"] and "9 batches" in slow["line"]
    assert "slower than the training step" in slow["finding"] and "prefetch" in slow["finding"]
    assert "about 4.00 ms/step at best" in slow["finding"]
    assert slow["verdict_note"].startswith("your input pipeline (4.00 ms/batch) is slower")
    # faster than the script's step but not than the recommended one: the speed-up is capped
    capped = pipeline_figures(INFO, _row(0.008), _row(0.001))
    assert not capped["slower_than_step"] and "capped" in capped["finding"]
    assert capped["verdict_note"].startswith("capped by your input pipeline")
    fine = pipeline_figures(INFO, _row(0.008), _row(0.005))
    assert fine["finding"] == "" and fine["step_seconds"] == 0.008 and "verdict_note" not in fine
    # arrays (nothing to time) and an untimed pipeline give nothing
    assert pipeline_figures({"source": "arrays"}, _row(0.1)) is None
    assert pipeline_figures({"source": "generator"}, _row(0.1)) is None
    once = pipeline_figures({**INFO, "source": "generator", "pipeline_method": "first pass"},
                            _row(0.1))
    assert "read once" in once["line"] and once["recommended_step_seconds"] is None


def test_the_pipeline_line_and_finding_are_printed() -> None:
    from rich.console import Console

    from devicebench.report.script import render_pipeline

    buf = io.StringIO()
    render_pipeline(pipeline_figures(INFO, _row(0.002)), Console(file=buf, width=300))
    out = buf.getvalue()
    assert "input pipeline: 4.00 ms/batch vs step 2.00 ms" in out
    assert "finding: your tf.data.Dataset is slower than the training step" in out
    buf = io.StringIO()
    render_pipeline(None, Console(file=buf))
    assert buf.getvalue() == ""


def test_history_shows_a_captured_scripts_path_and_capture_directory(tmp_path: Path) -> None:
    from devicebench.store import ResultStore
    from devicebench.store.runs import run_history
    from devicebench.trials.spec import TrialSpec
    from devicebench.workloads.script import captured_script
    from tests.unit.test_store import make_result, make_snapshot

    capture = tmp_path / "cache" / "scripts" / "abc123"
    capture.mkdir(parents=True)
    (capture / "capture.json").write_text(json.dumps(
        {"script_path": "/home/u/train.py", "args": ["--epochs", "3"],
         "fit_site": {"line": 31}}))
    (capture / "workload.py").write_text("")
    ref = f"{capture / 'workload.py'}:workload"
    gone = f"{tmp_path / 'cache' / 'scripts' / 'deleted' / 'workload.py'}:workload"
    with ResultStore.open(tmp_path / "r.db") as store:
        machine = store.add_machine(make_snapshot())
        run = store.start_run(machine, "advise", {"argv": ["advise", "train.py"]})
        for workload in (ref, gone, "seed-rnn"):
            store.add_trial(run, make_result(spec=TrialSpec(workload, backend="tensorflow")))
        row = run_history(store)[0]
    assert [s["workload"] for s in row.scripts] == [ref, gone]
    assert row.to_dict()["scripts"][0] == {
        "workload": ref, "script": "/home/u/train.py", "args": ["--epochs", "3"],
        "capture_dir": str(capture), "capture_exists": True, "fit_site": 31}
    assert row.workload_labels() == [
        f"/home/u/train.py -- --epochs 3 (capture {capture})",
        f"(script unknown) (capture {tmp_path / 'cache' / 'scripts' / 'deleted'}, since "
        "deleted)", "seed-rnn"]
    assert captured_script("seed-rnn") is None and captured_script("x.py:workload") is None


def test_an_endless_pydataset_is_read_to_the_bound_and_timed_on_a_second_pass() -> None:
    from devicebench.workloads import capture_worker as cw

    class PyDataset:  # as keras.utils.PyDataset looks to the capture (by class name)
        workers, use_multiprocessing = 4, False

        def __init__(self) -> None:
            self.reads = 0

        @property
        def num_batches(self) -> None:
            return None  # endless

        def __getitem__(self, i: int) -> tuple:
            self.reads += 1
            x = np.full((4, 2), i, dtype="float32")
            return {"a": x, "b": x[:, :1]}, x[:, 0]

    class Batches(PyDataset):
        pass

    source = Batches()
    info = cw._data({"x": source, "steps_per_epoch": 7})
    assert (info["source"], info["batches"], info["total_batches"]) == ("PyDataset", 7, None)
    assert info["arrays"]["x"]["b"][:, 0].tolist() == [i for i in range(7) for _ in range(4)]
    assert source.reads == 14  # materialised once, then read again to time it alone
    assert info["pipeline_method"] == "second pass" and info["pipeline_batches_timed"] == 6
    assert info["pipeline_workers"] == 4  # said: its fit() reads it with 4 workers
    assert "which this did not" in pipeline_figures(info, _row(0.1))["line"]
    endless = cw._data({"x": Batches()})
    assert endless["batches"] == cw.MAX_BATCHES
