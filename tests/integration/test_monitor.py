"""TrainingMonitor on short real fits on TensorFlow, JAX and torch (CPU, tiny models,
seconds).

Each fit runs in a fresh process (the Keras backend is fixed at import). NVML is fed by
a fake reader at the callback's seam here (this machine has no NVIDIA GPU); the `gpu`
test uses the real one.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devicebench.monitor.sinks import read_scalars
from devicebench.store import ResultStore
from devicebench.store.monitor import load_monitor_blocks
from tests.conftest import has_module, requires_jax, requires_tf, run_cli

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "fixtures" / "scripts" / "monitor_fit.py"
requires_tbx = pytest.mark.skipif(not has_module("tensorboardX"),
                                  reason="tensorboardX not installed")
requires_torch = pytest.mark.skipif(not has_module("torch"), reason="torch not installed")
requires_tb = pytest.mark.skipif(not has_module("tensorboard"),
                                 reason="tensorboard (its event reader) not installed")


def tb_scalars(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar under ``logdir``, read by tensorboard's own EventAccumulator."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)]
            for tag in acc.Tags()["scalars"]}


def _env(backend: str) -> dict[str, str]:
    env = dict(os.environ)
    env["KERAS_BACKEND"] = backend
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["DEVICEBENCH_MONITOR"] = ""
    return env


def fit(backend: str, tmp_path: Path, **cfg) -> dict:
    out = tmp_path / f"report-{backend}.json"
    cfg["out"] = str(out)
    res = subprocess.run([sys.executable, str(SCRIPT), json.dumps(cfg)], env=_env(backend),
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(out.read_text())


BACKENDS = [pytest.param("tensorflow", marks=requires_tf),
            pytest.param("jax", marks=requires_jax),
            pytest.param("torch", marks=requires_torch)]


@requires_tbx
@requires_tb
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_real_fit_gives_positive_figures_in_logs_csv_tensorboard_and_store(
        backend: str, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    rep = fit(backend, tmp_path, epochs=3, validation=True, fake_nvml=[3.0, 84_000_000],
              monitor={"csv_path": str(tmp_path / "m.csv"), "db": str(db),
                       "tensorboard_dir": str(tmp_path / "tb"),
                       "target_block_seconds": 0.02, "nvml_interval": 0.002})
    s = rep["summary"]
    assert s["steady_step_seconds"] > 0 and s["samples_per_s"] > 0 and s["batch_size"] == 16
    assert s["steps"] == 3 * 32 and s["steady_blocks"] >= 2
    # torch runs eagerly: no compilation, its first epoch need not be slower at all.
    assert s["compile_seconds"] is not None and s["compile_seconds"] >= 0
    if backend != "torch":
        assert s["compile_seconds"] > 0
    assert s["peak_memory_bytes"] > 0 and s["memory_label"] == "process RSS"
    assert s["gpu_busy"] == pytest.approx(0.03) and s["nvml"] == "on"
    assert s["epochs"][0]["warmup"] is True and len(s["epochs"]) == 3
    assert s["monitor_overhead_seconds"] >= 0 and s["alerts"] == []
    (line,) = rep["lines"]
    assert line.startswith("steady ") and "GPU busy 3% of the step" in line
    assert "first epoch included" in line and "(process RSS)" in line
    # Keras logs: History (and the progress bar) carry the monitor's figures.
    hist = rep["history"]
    assert len(hist["step_ms"]) == 3 and all(v > 0 for v in hist["step_ms"])
    assert all(v > 0 for v in hist["samples_per_s"]) and "val_loss" in hist
    # The blocks: the first execution alone, every step counted once per epoch.
    kinds = [b["kind"] for b in rep["blocks"]]
    assert kinds[0] == "first" and rep["blocks"][0]["steps"] == 1
    for epoch in range(3):
        assert sum(b["steps"] for b in rep["blocks"] if b["epoch"] == epoch) == 32
    # CSV read back.
    rows = list(csv.DictReader((tmp_path / "m.csv").open()))
    blocks = [r for r in rows if r["row"] == "block"]
    assert len(blocks) == len(rep["blocks"]) and [r["row"] for r in rows].count("epoch") == 3
    assert all(float(r["ms_per_step"]) > 0 for r in blocks)
    assert all(float(r["loss"]) > 0 for r in blocks)
    # TensorBoard, read back with tensorboard's own event reader: where Keras' callback
    # writes (DIR/train, DIR/validation), loss beside the step times, compilation apart.
    train, val = tb_scalars(tmp_path / "tb" / "train"), tb_scalars(tmp_path / "tb" / "validation")
    assert len(train["monitor/ms_per_step"]) == len(rep["blocks"]) - 1
    assert all(v > 0 for _, v in train["monitor/ms_per_step"])
    assert [v for _, v in train["monitor/first_step_seconds"]] == pytest.approx(
        [rep["blocks"][0]["seconds"]])
    assert [st for st, _ in train["monitor/epoch_train_seconds"]] == [0, 1, 2]
    assert [v for _, v in train["epoch_loss"]] == pytest.approx(hist["loss"], rel=1e-5)
    assert [v for _, v in val["epoch_loss"]] == pytest.approx(hist["val_loss"], rel=1e-5)
    assert len(train["batch_loss"]) == len(rep["blocks"]) - 1
    assert train["monitor/gpu_busy_pct"][-1][1] == pytest.approx(3.0)
    assert set(read_scalars(tmp_path / "tb")) >= {"monitor/ms_per_step", "epoch_loss"}
    # The store: a run tagged "monitor" with every block.
    with ResultStore.open(db) as store:
        (run,) = store.runs()
        assert run.command == "monitor" and run.id == rep["store_run_id"]
        assert len(load_monitor_blocks(store, run.id)) == len(rep["blocks"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_steps_per_execution_and_no_validation(backend: str, tmp_path: Path) -> None:
    spe = 1 if backend == "torch" else 4  # Keras: steps_per_execution must be 1 on torch
    rep = fit(backend, tmp_path, epochs=2, spe=spe, nvml=False,
              monitor={"target_block_seconds": 0.01, "nvml": False})
    s = rep["summary"]
    assert s["steps"] == 2 * 40 and s["steady_step_seconds"] > 0
    assert rep["blocks"][0]["steps"] == spe  # the first execution alone: compilation
    assert all(b["steps"] % spe == 0 for b in rep["blocks"])
    for epoch in range(2):
        assert sum(b["steps"] for b in rep["blocks"] if b["epoch"] == epoch) == 40
    assert "val_loss" not in rep["history"] and len(rep["history"]["step_ms"]) == 2
    assert all(v > 0 for v in rep["history"]["step_ms"])
    # Without validation an epoch's last block closes at on_epoch_end, on the loss Keras
    # has just fetched (no probe of its own): the block's loss is the epoch's loss.
    for epoch, loss in enumerate(rep["history"]["loss"]):
        last = [b for b in rep["blocks"] if b["epoch"] == epoch][-1]
        assert last["loss"] == pytest.approx(loss)
    # The monitor leaves Keras' asynchronous batch-end dispatch as it finds it: on where
    # Keras declares the backend thread-safe (JAX, torch), off on TensorFlow anyway.
    assert rep["async_train"] == rep["async_train_without"]
    assert rep["async_train"] is (backend != "tensorflow")


@requires_jax
@pytest.mark.parametrize("stop", [True, False])
def test_an_injected_nan_raises_the_alert_and_stops_when_asked(stop: bool,
                                                                tmp_path: Path) -> None:
    rep = fit("jax", tmp_path, epochs=4, nan_from=320,
              monitor={"stop_on_nan": stop, "target_block_seconds": 0.01, "nvml": False})
    nan = [a for a in rep["summary"]["alerts"] if a["kind"] == "nan"]
    assert nan and nan[0]["epoch"] == 0 and "loss is nan" in nan[0]["message"]
    assert any("loss is nan" in line for line in rep["lines"])
    assert rep["epochs_run"] == (1 if stop else 4)
    if stop:
        assert any("stopping training" in line for line in rep["lines"])


@pytest.mark.parametrize("backend", [pytest.param("tensorflow", marks=requires_tf),
                                     pytest.param("torch", marks=requires_torch)])
def test_nan_on_tensorflow_and_torch_stops_too(backend: str, tmp_path: Path) -> None:
    rep = fit(backend, tmp_path, epochs=3, nan_from=320,
              monitor={"stop_on_nan": True, "nvml": False, "target_block_seconds": 0.01})
    (alert,) = rep["summary"]["alerts"]  # one per epoch, however many blocks saw the NaN
    assert rep["epochs_run"] == 1 and alert["kind"] == "nan" and alert["epoch"] == 0
    assert sum("loss is nan" in line for line in rep["lines"]) == 1


@requires_jax
def test_monitor_cli_attaches_to_an_unmodified_script(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import numpy as np, keras\n"
        "x = np.random.rand(256, 4).astype('float32'); y = x.sum(1, keepdims=True)\n"
        "m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])\n"
        "m.compile('sgd', 'mse')\n"
        "m.fit(x, y, epochs=2, batch_size=16, verbose=0)\n"
        "m.fit(x, y, epochs=1, batch_size=16, verbose=0)\n"
        "print('trained')\n")
    env = _env("jax")
    env.pop("DEVICEBENCH_MONITOR")
    res = run_cli("monitor", "--csv", str(tmp_path / "m.csv"), "--db", str(tmp_path / "r.db"),
                  "--", sys.executable, str(script), env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "trained" in res.stdout
    assert res.stderr.count("devicebench monitor: ") == 2  # one end line per fit
    assert (tmp_path / "m.csv").exists() and (tmp_path / "m-fit2.csv").exists()
    with ResultStore.open(tmp_path / "r.db") as store:
        assert [r.command for r in store.runs()] == ["monitor", "monitor"]


def test_a_script_with_no_keras_fit_is_told_nothing_was_timed(tmp_path: Path) -> None:
    """A custom loop (here plain Python; a PyTorch loop is the same to the monitor) used to
    end with no line at all: the user could not tell "attached, nothing to time" from "not
    attached". Now one line says so and points at doctor; the script's exit code is kept."""
    script = tmp_path / "loop.py"
    script.write_text("total = sum(i * i for i in range(1000))\nprint('done', total)\n"
                      "raise SystemExit(3)\n")
    env = _env("jax")
    env.pop("DEVICEBENCH_MONITOR")
    res = run_cli("monitor", "--no-store", "--", sys.executable, str(script), env=env)
    assert res.returncode == 3 and "done 332833500" in res.stdout
    line, = [ln for ln in res.stderr.splitlines() if ln.startswith("devicebench monitor: ")]
    assert line.startswith("devicebench monitor: no Keras fit() ran, so nothing was timed")
    assert f"`devicebench doctor {script}`" in line


def test_a_script_with_its_own_training_monitor_is_not_told_nothing_ran(tmp_path: Path
                                                                         ) -> None:
    script = tmp_path / "own.py"
    script.write_text(
        "import numpy as np, keras\n"
        "from devicebench.keras import TrainingMonitor\n"
        "x = np.random.rand(64, 4).astype('float32'); y = x.sum(1, keepdims=True)\n"
        "m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])\n"
        "m.compile('sgd', 'mse')\n"
        "m.fit(x, y, epochs=1, batch_size=16, verbose=0, callbacks=[TrainingMonitor()])\n")
    env = _env("jax")
    env.pop("DEVICEBENCH_MONITOR")
    res = run_cli("monitor", "--no-store", "--", sys.executable, str(script), env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "no Keras fit() ran" not in res.stderr


def _has_nvidia() -> bool:
    return shutil.which("nvidia-smi") is not None and has_module("pynvml")


@pytest.mark.gpu
@pytest.mark.skipif(not _has_nvidia(), reason="needs an NVIDIA GPU and nvidia-ml-py")
@pytest.mark.parametrize("backend", BACKENDS)
def test_on_an_nvidia_gpu_nvml_and_device_memory_are_read(backend: str,
                                                          tmp_path: Path) -> None:
    rep = fit(backend, tmp_path, epochs=2, samples=6400, check_gpu=True,
              monitor={"nvml": True, "target_block_seconds": 0.05})
    if not rep["gpu_visible"]:
        pytest.skip(f"{backend} is installed without GPU support here")
    s = rep["summary"]
    assert s["nvml"] == "on" and s["gpu_busy"] is not None and 0 <= s["gpu_busy"] <= 1
    assert s["memory_label"].startswith("device") and s["peak_memory_bytes"] > 0
    assert all((b["memory_peak"] or 0) > 0 for b in rep["blocks"])
    assert "GPU busy" in rep["lines"][0] and "(device" in rep["lines"][0]
