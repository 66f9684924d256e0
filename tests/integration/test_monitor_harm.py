"""The monitor never harms the training it watches (tiny real TF and JAX fits on the
CPU, a real SQLite file): bad targets are refused before the script starts; a failure of
its own after that is one warning line and fit() returns; signals reach the script and
its death by one is reported as a shell does; the blocks measured so far are stored
however the fit ends, and the run says how it ended."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from devicebench.store import ResultStore
from devicebench.store.monitor import load_monitor_blocks
from devicebench.store.runs import load_run
from tests.conftest import assert_one_line_error, requires_jax, requires_tf, run_cli

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "fixtures" / "scripts" / "monitor_harm.py"


def _env(backend: str) -> dict[str, str]:
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.pop("DEVICEBENCH_MONITOR", None)
    return env


def _cmd(tmp_path: Path, **cfg) -> list[str]:
    cfg["out"] = str(tmp_path)
    return [sys.executable, str(SCRIPT), json.dumps(cfg)]


def _only_run(db: Path):
    with ResultStore.open(db) as store:
        (summary,) = store.runs()
        run = load_run(store, summary.id)
        return run, load_monitor_blocks(store, run.id)


def _bad_db(tmp_path: Path, kind: str) -> Path:
    if kind == "not-sqlite":
        bad = tmp_path / "notes.db"
        bad.write_text("these are my notes, not a database\n" * 50)
    else:
        bad = tmp_path / "a-dir.db"
        bad.mkdir()
    return bad


@pytest.mark.parametrize("args,needle", [
    (["--db", "{bad}"], "cannot record in the store"),
    (["--db", "{dir}"], "cannot record in the store"),
    (["--csv", "{dir}"], "is a directory"),
    (["--tensorboard", "{file}"], "is a file, not a directory"),
])
def test_bad_targets_are_refused_before_the_script_starts(args: list[str], needle: str,
                                                          tmp_path: Path) -> None:
    fill = {"bad": str(_bad_db(tmp_path, "not-sqlite")), "dir": str(_bad_db(tmp_path, "dir")),
            "file": str(tmp_path / "notes.db")}
    res = run_cli("monitor", *[a.format(**fill) for a in args], "--",
                  *_cmd(tmp_path, epochs=1), env=_env("jax"))
    assert_one_line_error(res, needle)
    assert not (tmp_path / "pid").exists(), "the script was started"


@pytest.mark.parametrize("backend,kind", [pytest.param("tensorflow", "dir", marks=requires_tf),
                                          pytest.param("jax", "not-sqlite", marks=requires_jax)])
def test_a_bad_store_in_the_callback_is_one_line_and_fit_returns(backend: str, kind: str,
                                                                 tmp_path: Path) -> None:
    bad = _bad_db(tmp_path, kind)
    res = subprocess.run(_cmd(tmp_path, epochs=2, monitor={"db": str(bad), "nvml": False}),
                         env=_env(backend), capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (tmp_path / "saved").exists() and "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("devicebench monitor:")]
    assert len(lines) == 2, res.stderr  # the warning, then the summary line
    assert "not recording this fit in the store" in lines[0]
    assert "training continues" in lines[0] and lines[1].startswith("devicebench monitor: ")
    if kind == "not-sqlite":
        assert bad.read_text().startswith("these are my notes")  # left as it was


@requires_jax
def test_a_failure_of_its_own_mid_fit_is_one_line_and_what_it_measured_is_kept(
        tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    res = subprocess.run(_cmd(tmp_path, epochs=3, action="break", at=1,
                              monitor={"db": str(db), "nvml": False}),
                         env=_env("jax"), capture_output=True, text=True, timeout=240)
    assert res.returncode == 0 and (tmp_path / "saved").exists(), res.stderr[-3000:]
    warn = [ln for ln in res.stderr.splitlines() if "stopped measuring" in ln]
    assert len(warn) == 1 and "AttributeError" in warn[0] and "Traceback" not in res.stderr
    run, blocks = _only_run(db)
    assert run.options["ended"] == "completed" and run.finished_at
    assert blocks and {b["epoch"] for b in blocks} == {0}  # epoch 0, measured before


@requires_jax
def test_an_exception_in_fit_stores_the_blocks_and_marks_the_run(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    res = run_cli("monitor", "--db", str(db), "--", *_cmd(tmp_path, epochs=4, action="raise",
                                                          at=2), env=_env("jax"))
    assert res.returncode == 1 and "ValueError: bad batch" in res.stderr
    run, blocks = _only_run(db)
    assert run.options["ended"] == "error" and run.finished_at
    assert "ValueError: bad batch in the user's pipeline" in run.options["end_detail"]
    assert {b["epoch"] for b in blocks} == {0, 1}
    assert sum(b["steps"] for b in blocks) == 2 * 16
    assert run.summary and run.summary["steps"] == 32


@requires_jax
def test_sigkill_of_the_script_exits_137_and_keeps_the_flushed_blocks(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    res = run_cli("monitor", "--db", str(db), "--", *_cmd(tmp_path, action="sigkill", at=1),
                  env=_env("jax"))
    assert res.returncode == 137, res.stderr[-2000:]
    (line,) = [ln for ln in res.stderr.splitlines() if "killed by" in ln]
    assert "SIGKILL (signal 9)" in line and "exit code 137" in line
    run, blocks = _only_run(db)
    assert run.finished_at is None and run.options["ended"] == "running"
    assert {b["epoch"] for b in blocks} == {0}  # stored at the end of epoch 0


@requires_jax
@pytest.mark.parametrize("sig,code,word,ended", [
    (signal.SIGTERM, 143, "SIGTERM (signal 15): terminated", "terminated"),
    # kill -INT: forwarded; in the script it is Ctrl-C (KeyboardInterrupt inside fit)
    (signal.SIGINT, 130, "SIGINT (signal 2): interrupted", "interrupted"),
])
def test_a_signal_to_the_wrapper_reaches_the_script_which_records_and_dies(
        sig: int, code: int, word: str, ended: str, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    proc = subprocess.Popen([sys.executable, "-m", "devicebench", "monitor", "--db", str(db),
                             "--", *_cmd(tmp_path, action="wait")], env=_env("jax"),
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (tmp_path / "ready").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the script never trained"
        time.sleep(0.05)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err[-2000:]
    assert f"killed by {word}" in err
    child = int((tmp_path / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # not left training with PPID 1
    run, blocks = _only_run(db)
    assert run.options["ended"] == ended and run.finished_at and blocks
