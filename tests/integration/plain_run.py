"""Shared by the capture tests: a captured workload's first training steps against a plain
run of the script that was captured, from the same weights on the same batches."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def captured_and_plain_losses(cap: Any, script: str, steps: str, env: dict[str, str],
                              cwd: Path) -> list[list[float]]:
    """``[captured, plain]`` losses printed by ``steps`` (code that trains ``m`` on ``x``,
    ``y`` and prints ``LOSSES <json list>``): first on the captured workload compiled as
    the trial session compiles it, then, in the same process, inside the script's own
    ``fit()`` call (replaced) after setting the captured weights."""
    captured = (
        "import json, runpy, sys, numpy as np, keras\n"
        "from devicebench.workloads.loader import load_workload\n"
        f"w = load_workload({cap.ref!r}); m = w.build_model(keras)\n"
        "m.compile(loss=w.loss, loss_weights=w.loss_weights, optimizer=w.optimizer(keras))\n"
        "d = w.make_data(0); x, y = d.x, d.y\n" + steps)
    plain = (
        f"npz = np.load({str(cap.directory / 'weights.npz')!r})\n"
        "def fit(m, x, y, **kw):\n"
        "    m.set_weights([npz[f'arr_{i}'] for i in range(len(npz.files))])\n"
        + "".join("    " + line + "\n" for line in steps.splitlines()) +
        "    sys.exit(0)\n"
        "keras.Model.fit = fit\n"
        f"runpy.run_path({script!r}, run_name='__main__')\n")
    res = subprocess.run([sys.executable, "-c", captured + plain], env=env,
                         capture_output=True, text=True, timeout=120, check=False, cwd=cwd)
    assert res.returncode == 0, res.stderr[-2000:]
    return [json.loads(part.splitlines()[0]) for part in res.stdout.split("LOSSES ")[1:]]
