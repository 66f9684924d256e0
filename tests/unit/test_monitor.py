"""TrainingMonitor's framework-free parts: bookkeeping on recorded H200 block times,
NVML sampling at its seam, the store, the env-var options and the CLI's bad input.

The block times, steps per block, first-step times and peak device memory come from
``tests/fixtures/recorded/h200_blocks.json`` (copied from a real H200 run). NVML was not
recorded there: the utilisation values fed to the fake reader below (3% for the
dispatch-bound seed-rnn on the GPU, 65% for mnist-cnn) are invented, shaped to the story
those step times tell, and say nothing about a real GPU.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from devicebench.env.snapshot import EnvSnapshot
from devicebench.monitor.attach import install_from_env, parse_options
from devicebench.monitor.core import BLOCK, FIRST, TAIL, Block, BlockPlanner, MonitorLog
from devicebench.monitor.nvml import NvmlSampler
from devicebench.store import ResultStore
from devicebench.store.monitor import latest_monitor_run, load_monitor_blocks, save_monitor_run
from tests.conftest import assert_one_line_error, run_cli

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "recorded" / "h200_blocks.json"
RECORDED = {r["label"] + " " + r["workload"]: r for r in json.loads(FIXTURE.read_text())["results"]}


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def replay(rec: dict, busy_pct: float | None = None, epochs: int = 2) -> MonitorLog:
    """Feed a recorded trial's blocks through MonitorLog as `epochs` epochs, the first
    starting with the recorded first step; NVML samples every 50 ms of fake time."""
    log = MonitorLog(batch_size=rec["batch_size"])
    clock = FakeClock()
    sampler = NvmlSampler(lambda: (busy_pct, 80_000_000), clock=clock) if busy_pct else None
    per_epoch = len(rec["block_seconds"]) // epochs
    step_in_epoch = 0

    def run(seconds: float) -> tuple[float, float]:
        t0 = clock.t
        while clock.t + 0.05 < t0 + seconds:
            clock.t += 0.05
            if sampler:
                sampler.sample_once()
        clock.t = t0 + seconds
        return t0, clock.t

    for epoch in range(epochs):
        step_in_epoch = 0
        if epoch == 0:
            t0, t1 = run(rec["first_step_s"])
            log.add_block(Block(0, 0, 1, t1 - t0, FIRST, memory_peak=None))
            step_in_epoch = 1
        for s in rec["block_seconds"][epoch * per_epoch:(epoch + 1) * per_epoch]:
            t0, t1 = run(s)
            busy = sampler.busy_between(t0, t1) if sampler else None
            log.add_block(Block(epoch, step_in_epoch, rec["steps_per_block"], s, BLOCK,
                                memory_peak=rec["peak_device_memory_bytes"], gpu_busy=busy))
            step_in_epoch += rec["steps_per_block"]
        log.end_epoch(epoch, clock.t)
    log.memory_label = "device gpu:0"
    return log


def test_recorded_seed_rnn_on_the_h200_gives_its_median_and_a_low_gpu_busy() -> None:
    rec = RECORDED["jax/gpu:0 seed-rnn"]
    log = replay(rec, busy_pct=3.0)
    steady = log.steady()
    # Steady = the second epoch's 5 blocks (the first epoch holds the compilation).
    later = sorted(s / rec["steps_per_block"] for s in rec["block_seconds"][5:])
    assert steady is not None and steady.n == 5 and steady.median == pytest.approx(later[2])
    assert steady.median == pytest.approx(rec["median_step_s"], rel=0.1)
    line = log.final_line()
    assert line.startswith(f"steady {steady.median * 1e3:.2f} ms/step ±")
    assert "(n=5 blocks)" in line
    assert "GPU busy 3% of the step" in line
    assert "peak memory 84 MB (device gpu:0)" in line
    comp = log.compile_seconds()
    # The first step alone (compilation) is 0.45 s; the recorded first-round blocks vary too.
    assert comp is not None and rec["first_step_s"] * 0.5 < comp < 1.0
    assert f"first epoch included {comp:.1f} s of compilation" in line
    assert log.epochs[0].warmup and not log.epochs[1].warmup
    summary = log.summary()
    assert summary["samples_per_s"] == pytest.approx(32 / steady.median)
    assert summary["gpu_busy"] == pytest.approx(0.03)


def test_recorded_mnist_cnn_without_nvml_says_nothing_about_gpu_busy() -> None:
    log = replay(RECORDED["jax/gpu:0 mnist-cnn"])
    line = log.final_line()
    assert "GPU busy" not in line and "peak memory 421 MB" in line
    assert log.summary()["gpu_busy"] is None


def test_unknown_memory_is_unknown_not_zero() -> None:
    log = replay(RECORDED["jax/cpu seed-rnn"])  # jax on the CPU: no device memory figure
    assert "peak memory unknown" in log.final_line()
    assert log.summary()["peak_memory_bytes"] is None


def test_a_block_far_slower_than_the_running_median_is_a_stall() -> None:
    log = MonitorLog(batch_size=32)
    for i in range(6):
        assert log.add_block(Block(0, i * 100, 100, 0.17)) == []
    alerts = log.add_block(Block(0, 600, 100, 0.17 * 5))
    assert [a.kind for a in alerts] == ["stall"]
    assert "5.0x the running median 1.70 ms" in alerts[0].message
    assert "steps 600-699 of epoch 1" in alerts[0].message


def test_a_non_finite_loss_raises_the_nan_alert() -> None:
    log = MonitorLog()
    (alert,) = log.add_block(Block(2, 0, 10, 0.1, loss=float("nan")))
    assert alert.kind == "nan" and "epoch 3" in alert.message and "clipnorm" in alert.message
    # Once per epoch: the loss stays NaN once it is; the next epoch says it again.
    assert log.add_block(Block(2, 10, 10, 0.1, loss=float("inf"))) == []
    assert log.add_block(Block(3, 0, 10, 0.1, loss=float("inf")))[0].kind == "nan"
    assert [a.epoch for a in log.alerts] == [2, 3]


def test_tails_count_as_steady_when_a_whole_epoch_is_shorter_than_a_block() -> None:
    log = MonitorLog()
    log.add_block(Block(0, 0, 1, 1.0, FIRST))
    for epoch in range(4):
        log.add_block(Block(epoch, 1 if epoch == 0 else 0, 50, 0.05, TAIL))
    steady = log.steady()
    assert steady is not None and steady.n == 3 and steady.median == pytest.approx(1e-3)


def test_too_few_blocks_say_so_instead_of_a_number() -> None:
    log = MonitorLog()
    log.add_block(Block(0, 0, 1, 0.5, FIRST))
    assert "too few for a steady figure" in log.final_line()
    assert MonitorLog().final_line() == "monitor: no training step was timed"


def test_auto_blocks_grow_to_the_target_and_a_fixed_size_stays() -> None:
    planner = BlockPlanner(target_seconds=0.5)
    sizes = [planner.after(Block(0, 0, planner.size, planner.size * 1e-3))
             for _ in range(6)]
    assert sizes[0] == 8 and sizes[-1] >= 500 and sizes == sorted(sizes)
    fixed = BlockPlanner(block_steps=20)
    assert fixed.after(Block(0, 0, 20, 1e-3)) == 20
    with pytest.raises(ValueError, match="block_steps"):
        BlockPlanner(block_steps=0)


def test_nvml_sampler_thread_samples_and_stops() -> None:
    calls: list[int] = []

    def reader() -> tuple[float, int]:
        calls.append(1)
        return 40.0, 123

    sampler = NvmlSampler(reader, interval=0.005)
    sampler.start()
    deadline = 200
    while len(calls) < 3 and deadline:
        import time

        time.sleep(0.01)
        deadline -= 1
    sampler.stop()
    n = len(calls)
    assert n >= 3 and sampler.busy_between(0, float("inf")) == pytest.approx(0.4)
    assert sampler.memory_peak() == 123
    import time

    time.sleep(0.03)
    assert len(calls) == n  # stopped


def test_nvml_reader_failure_stops_sampling_with_the_reason() -> None:
    def broken() -> tuple[float, int]:
        raise RuntimeError("GPU is lost")

    sampler = NvmlSampler(broken, interval=0.001)
    sampler.start()
    sampler.stop()
    assert "GPU is lost" in sampler.error
    assert sampler.busy_between(0, 1e9) is None


def test_store_keeps_a_run_tagged_monitor_with_its_blocks(tmp_path: Path) -> None:
    log = replay(RECORDED["jax/gpu:0 seed-rnn"], busy_pct=3.0)
    db = tmp_path / "r.db"
    with ResultStore.open(db) as store:
        run_id = save_monitor_run(store, EnvSnapshot(), {"backend": "jax"},
                                  [b.to_dict() for b in log.blocks], log.summary())
        blocks = load_monitor_blocks(store, run_id)
        (run,) = store.runs()
        assert run.command == "monitor" and run.finished_at is not None
        assert latest_monitor_run(store, run.machine_id) == run_id
    assert len(blocks) == len(log.blocks) and blocks[0]["kind"] == FIRST
    assert blocks[1]["steps"] == 159 and blocks[1]["gpu_busy"] == pytest.approx(0.03)
    raw = sqlite3.connect(db)
    options = json.loads(raw.execute("SELECT options FROM runs").fetchone()[0])
    assert options["summary"]["steady_blocks"] == 5
    raw.close()


def test_env_options_are_parsed_and_bad_ones_refused(capsys: pytest.CaptureFixture) -> None:
    assert parse_options("1") == {}
    assert parse_options('{"csv_path": "a.csv", "stop_on_nan": true}')["stop_on_nan"] is True
    with pytest.raises(ValueError, match="unknown option"):
        parse_options('{"csv": "a.csv"}')
    with pytest.raises(ValueError, match="neither 1 nor a JSON object"):
        parse_options("{oops")
    assert install_from_env({}) is False
    assert install_from_env({"DEVICEBENCH_MONITOR": "[1]"}) is False
    assert "not attached" in capsys.readouterr().err


def test_monitor_cli_refuses_a_missing_or_unknown_command() -> None:
    assert_one_line_error(run_cli("monitor"), "no command to monitor")
    assert_one_line_error(run_cli("monitor", "--", "no-such-program-xyz"), "no such program")


def test_monitor_cli_parent_imports_no_framework(tmp_path: Path) -> None:
    """The parent only starts the child; the child sees the env var and site dir."""
    child = tmp_path / "child.py"
    child.write_text("import os, sys\n"
                     "print(os.environ['DEVICEBENCH_MONITOR'])\n"
                     "print('sitecustomize' in sys.modules)\n")
    code = (
        "import sys\n"
        "from devicebench.jobs.monitor import run_monitored\n"
        f"rc = run_monitored([sys.executable, {str(child)!r}], csv=None, store=False)"
        ".exit_code\n"
        "bad = [m for m in ('keras', 'tensorflow', 'jax', 'torch') if m in sys.modules]\n"
        "print('FRAMEWORKS', bad, rc)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "1" and lines[1] == "True"
    assert lines[-1] == "FRAMEWORKS [] 0"


def test_rss_is_read_cheaply_and_right_and_reopened_in_a_forked_child() -> None:
    import os

    import psutil

    from devicebench.monitor import memory

    current, peak = memory._rss()
    expected = psutil.Process().memory_info().rss
    assert current is not None and abs(current - expected) < 0.1 * expected
    assert peak is not None and peak > 0
    if not sys.platform.startswith("linux"):
        return
    assert memory._STATM["pid"] == os.getpid()  # Linux: the kept-open /proc/self/statm
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own statm, not the parent's open file
        try:
            memory._current_rss()
            os.write(write_end, str(memory._STATM["pid"] == os.getpid()).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    assert os.read(read_end, 16) == b"True"
    os.close(read_end)


def test_an_nvml_that_failed_to_start_is_not_retried_on_every_fit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    from devicebench.monitor import nvml

    calls: list[int] = []

    def init() -> None:
        calls.append(1)
        raise RuntimeError("NVML Shared Library Not Found")

    monkeypatch.setitem(sys.modules, "pynvml", types.SimpleNamespace(nvmlInit=init))
    monkeypatch.setattr(nvml, "_MISSING", [])
    for _ in range(3):
        read, reason = nvml.nvml_reader()
        assert read is None and "NVML Shared Library Not Found" in reason
    assert len(calls) == 1


def test_a_long_run_keeps_per_epoch_work_bounded_and_its_steady_figure_whole() -> None:
    """3,000 short epochs, one block each (a fast model): the warm-up reference looks at
    a window of blocks, the end-of-fit bootstrap at a thinning; n and median are whole."""
    log = MonitorLog(batch_size=32)
    log.add_block(Block(0, 0, 1, 0.5, FIRST))
    for epoch in range(3000):
        log.add_block(Block(epoch, 1 if epoch == 0 else 0, 200, 0.1 + (epoch % 3) * 1e-3,
                            TAIL))
        rec = log.end_epoch(epoch, 0.2)
        assert rec.warmup is (epoch == 0)
    steady = log.steady()
    assert steady is not None and steady.n == 2999
    assert steady.median == pytest.approx(0.101 / 200)
    assert steady.ci_low <= steady.median <= steady.ci_high


def _log_of(step_seconds: list[float]) -> MonitorLog:
    log = MonitorLog()
    log.add_block(Block(0, 0, 1, 0.5, FIRST))
    for i, s in enumerate(step_seconds):
        log.add_block(Block(1 + i // 10, (i % 10) * 10, 10, s * 10))
    return log


@pytest.mark.parametrize("times,caution", [
    ([7e-3, 1e-3, 30e-3], "train longer"),  # 3 blocks that disagree: too few to say more
    ([1e-3, 10e-3] * 10, "the blocks disagree"),  # many blocks, two speeds: noise
    ([1e-3, 1.01e-3, 0.99e-3] * 5, ""),  # tight: no caution
])
def test_a_wide_spread_gets_a_caution_and_what_to_do(times: list[float], caution: str) -> None:
    log = _log_of(times)
    steady = log.steady()
    assert steady is not None
    line, summary = log.final_line(), log.summary()
    if not caution:
        assert steady.rel_ci_halfwidth < 0.25 and "caution" not in line
        assert summary["spread_caution"] == ""
        return
    assert steady.rel_ci_halfwidth > 0.25
    spread = f"±{steady.rel_ci_halfwidth * 100:.0f}%"
    assert line.startswith("steady ") and spread in line
    assert f"caution: the step time is uncertain ({spread}" in line and caution in line
    assert summary["spread_caution"] in line


@pytest.mark.parametrize("bad", [{"not": "a list"}, [{"epoch": 0}], [{"epoch": 0,
                                 "first_step": 0, "steps": -3, "seconds": 0.1,
                                 "kind": "block"}]])
def test_a_bundle_with_malformed_monitor_blocks_is_refused_and_adds_nothing(bad) -> None:
    from devicebench.errors import InputError
    from devicebench.store.bundle import export_runs, import_bundle

    with ResultStore.open(":memory:") as src:
        rid = save_monitor_run(src, EnvSnapshot(), {"argv": ["train.py"]},
                               [{"epoch": 0, "first_step": 0, "steps": 10, "seconds": 0.1,
                                 "kind": "block"}], {"steps": 10})
        bundle = export_runs(src, [rid])
    assert bundle["runs"][0]["monitor_blocks"][0]["steps"] == 10
    bundle["runs"][0]["monitor_blocks"] = bad
    with ResultStore.open(":memory:") as dst:
        with pytest.raises(InputError, match="run 1, monitor_blocks cannot be read"):
            import_bundle(dst, bundle, "b.json")
        assert dst.runs() == []
