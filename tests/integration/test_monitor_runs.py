"""Monitored runs are first-class (a real tiny TF fit, TensorFlow imported first as in
the TF tutorials, through `devicebench monitor` with its summary line, CSV and
TensorBoard files; a real SQLite file): history shows the
script, fit, steps and steady step time; `report RUN` renders the fit's own blocks (not
another run's training figures, even with a training run on the same machine); export
and import carry the blocks."""

from __future__ import annotations

import csv
import json
import os
import re
import sys
from pathlib import Path

import pytest

from devicebench.store import ResultStore
from devicebench.store.bundle import import_bundle, read_bundle
from devicebench.store.monitor import load_monitor_blocks
from tests.conftest import has_module, requires_tf, run_cli

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "fixtures" / "bundles" / "h200.json"

SCRIPT = """
import tensorflow as tf
import numpy as np
x = np.random.default_rng(0).standard_normal((512, 4)).astype("float32")
y = x.sum(axis=1, keepdims=True)
model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
model.fit(x, y, epochs=3, batch_size=16, verbose=0)
print("trained")
"""


@pytest.mark.slow  # 14 s; history, report, export and import are each held by faster tests
@requires_tf
def test_history_report_export_import_of_a_monitored_fit(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with ResultStore.open(db) as store:  # a training run, moved onto this machine below
        import_bundle(store, read_bundle(H200))
        (training_id,) = [r.id for r in store.runs() if r.command == "run"]
    script = tmp_path / "train_mlp.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("KERAS_BACKEND", None)
    res = run_cli("monitor", "--db", str(db), "--csv", str(tmp_path / "steps.csv"),
                  "--tensorboard", str(tmp_path / "tb"), "--", sys.executable, str(script),
                  env=env)
    assert res.returncode == 0 and "trained" in res.stdout, res.stderr[-3000:]
    (summary_line,) = [ln for ln in res.stderr.splitlines() if "devicebench monitor:" in ln]
    # The unit follows the figure (971 µs/step on a quiet run here, ms under load).
    assert re.search(r"steady [\d.,]+ (µs|ms|s)/step", summary_line), summary_line
    with (tmp_path / "steps.csv").open() as f:
        assert sum(r["row"] == "epoch" for r in csv.DictReader(f)) == 3
    if has_module("tensorboard"):
        from tests.integration.test_monitor import tb_scalars

        assert len(tb_scalars(tmp_path / "tb" / "train")["epoch_loss"]) == 3
    with ResultStore.open(db) as store:
        monitor_id = store.runs(1)[0].id
        blocks = load_monitor_blocks(store, monitor_id)
        mine = store.connection.execute("SELECT machine_id FROM runs WHERE id = ?",
                                        (monitor_id,)).fetchone()[0]
        store.connection.execute("UPDATE runs SET machine_id = ? WHERE id = ?",
                                 (mine, training_id))
    assert blocks and sum(b["steps"] for b in blocks) == 3 * 32

    # history: script, fit, steps, steady step time
    res = run_cli("history", "--json", "--db", str(db))
    rows = {r["id"]: r for r in json.loads(res.stdout)["runs"]}
    m = rows[monitor_id]["monitor"]
    assert m["script"] == "train_mlp.py" and m["fit"] == 1 and m["steps"] == 96
    assert m["steady_step_seconds"] > 0 and m["ended"] == "completed"
    assert rows[training_id]["monitor"] is None
    res = run_cli("history", "--db", str(db), env={"COLUMNS": "200"})
    (line,) = [ln for ln in res.stdout.splitlines() if "train_mlp.py" in ln]
    assert "fit 1: 96 steps, steady " in line and "/step" in line

    # report: the fit's own blocks, no other run's training figures
    res = run_cli("report", str(monitor_id), "--json", "--db", str(db))
    rep = json.loads(res.stdout)
    assert rep["workloads"] == [] and rep["ops"] is None
    assert not any("training figures from run" in n for n in rep["notes"])
    mon = rep["monitor"]
    assert mon["steps"] == 96 and len(mon["points"]) == len(blocks) - 1
    assert mon["first_step_s"] == pytest.approx(blocks[0]["seconds"])
    assert [p["step"] for p in mon["points"]][-1] == 96
    assert all(p["ms_per_step"] > 0 and p["samples_per_s"] > 0 for p in mon["points"])
    assert mon["steady_step_s"] == pytest.approx(m["steady_step_seconds"])
    newest = json.loads(run_cli("report", "--json", "--db", str(db)).stdout)
    assert newest["run_id"] == monitor_id  # --last: the newest run with results
    md = run_cli("report", str(monitor_id), "--db", str(db)).stdout
    assert "Monitored fit" in md and "train\\_mlp.py" in md and "The answer" not in md
    assert "seed-rnn" not in md and "mnist-cnn" not in md  # the H200 run's workloads
    if has_module("matplotlib"):
        html = tmp_path / "r.html"
        res = run_cli("report", str(monitor_id), "--html", str(html), "--db", str(db))
        assert res.returncode == 0, res.stderr
        page = html.read_text()
        assert 'id="monitor-blocks"' in page and page.count("monitor-blocks-series-") >= 2

    # export / import carry the blocks
    bundle = tmp_path / "b.json"
    assert run_cli("export", str(monitor_id), "-o", str(bundle), "--db", str(db)).returncode == 0
    other = tmp_path / "other.db"
    res = run_cli("import", str(bundle), "--db", str(other))
    assert res.returncode == 0, res.stderr
    with ResultStore.open(other) as store:
        (run,) = store.runs()
        assert load_monitor_blocks(store, run.id) == blocks
    res = run_cli("history", "--json", "--db", str(other))
    (row,) = json.loads(res.stdout)["runs"]
    assert row["monitor"]["steps"] == 96 and row["imported_from"] == "b.json"
    again = run_cli("import", str(bundle), "--db", str(other))
    assert "already here" in again.stdout
