"""Shared test helpers: run the real CLI in a subprocess."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

import pytest

# The suite isolates itself from the shell it runs in: a user's store, monitor switch or
# Keras backend (the README suggests `export DEVICEBENCH_DB=...`) must not change what a
# test sees. Tests that need one of these set it themselves.
USER_ENVIRONMENT = ("DEVICEBENCH_DB", "DEVICEBENCH_MONITOR", "DEVICEBENCH_MONITOR_PATH",
                    "KERAS_BACKEND", "TF_USE_LEGACY_KERAS")
for _name in USER_ENVIRONMENT:
    os.environ.pop(_name, None)

# tests/fixtures holds users' scripts as data (corpus files may be named `*_test.py`, which
# pytest would otherwise collect and import, failing where their framework is absent).
collect_ignore_glob = ["fixtures/*"]


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> CliResult:
    """Run ``python -m devicebench ARGS`` exactly as a user would (a real process)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "devicebench", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def assert_one_line_error(res: CliResult, *needles: str) -> None:
    """Bad input: exit code 2 and exactly one line on stderr (what, why, fix), no traceback."""
    assert res.returncode == 2, (res.stdout[-1000:], res.stderr[-2000:])
    assert "Traceback" not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def save_keras_model(path, layers: str, loss: str, optimizer: str) -> None:
    """Build ``keras.Sequential([keras.Input(...), ...])`` from ``layers`` (its list's
    inside, as code), compile it and save it to ``path``, in a JAX subprocess: the tests
    themselves never import a framework."""
    code = (
        "import keras\n"
        f"m = keras.Sequential([{layers}])\n"
        f"m.compile(loss={loss!r}, optimizer={optimizer})\n"
        f"m.save({str(path)!r})\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                   env={"KERAS_BACKEND": "jax", "PATH": "/usr/bin:/bin"})


def has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


requires_tf = pytest.mark.skipif(not has_module("tensorflow"), reason="tensorflow not installed")
requires_jax = pytest.mark.skipif(not has_module("jax"), reason="jax not installed")
requires_torch = pytest.mark.skipif(not has_module("torch"), reason="torch not installed")


def has_torch_cuda() -> bool:
    """An NVIDIA GPU (nvidia-smi) and a CUDA build of torch that sees it (asked in a
    subprocess: the test process imports no framework)."""
    if not has_module("torch") or shutil.which("nvidia-smi") is None:
        return False
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                           capture_output=True, text=True, timeout=120, check=False)
    return probe.stdout.strip() == "True"


requires_torch_cuda = pytest.mark.skipif(not has_torch_cuda(),
                                         reason="needs an NVIDIA GPU and a CUDA build of torch")


@pytest.fixture
def cli():
    return run_cli
