"""doctor in a virtual environment with devicebench but no deep-learning framework."""

from __future__ import annotations

import json
import subprocess
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_doctor_runs_without_any_framework_and_says_what_is_missing(tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    install = subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", str(ROOT)],
        capture_output=True, text=True, check=False, timeout=600,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    for mod in ("tensorflow", "jax", "torch", "keras"):
        probe = subprocess.run([str(py), "-c", f"import {mod}"], capture_output=True, check=False)
        assert probe.returncode != 0, f"{mod} unexpectedly installed in the bare venv"

    res = subprocess.run(
        [str(env_dir / "bin" / "devicebench"), "doctor", "--json"],
        capture_output=True, text=True, check=False, timeout=120,
    )
    assert res.returncode in (0, 1), res.stderr
    doc = json.loads(res.stdout)
    assert doc["snapshot"]["frameworks"] == {}
    assert "frameworks.none" in [f["id"] for f in doc["findings"]]
    text = subprocess.run(
        [str(env_dir / "bin" / "devicebench"), "doctor"],
        capture_output=True, text=True, check=False, timeout=120,
    )
    assert "pip install" in text.stdout
