"""The parent process never imports a deep-learning framework: every parent-side module of
the package, imported in a fresh interpreter, leaves tensorflow, jax, torch and keras out
of sys.modules. Worker-side modules (they run inside a framework's process) are named
here, so a new module is checked unless it is deliberately listed."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import devicebench

# Modules that run inside a worker or the user's own training process, where the
# framework is the point.
WORKER_SIDE = ("devicebench.backends.", "devicebench.ops.kernels.", "devicebench.monitor.",
               "devicebench.trials.worker", "devicebench.trials.session", "devicebench.ops.worker",
               "devicebench.workloads.check_worker", "devicebench.backends",
               "devicebench.monitor", "devicebench.keras")


def _parent_modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages(devicebench.__path__, "devicebench.")]
    return [n for n in names if not n.startswith(WORKER_SIDE) and n not in WORKER_SIDE]


def test_no_parent_module_imports_a_framework():
    mods = _parent_modules()
    assert "devicebench.cli" in mods and "devicebench.profiles.replay" in mods
    code = ("import importlib, sys\n"
            f"for m in {mods!r}:\n"
            "    importlib.import_module(m)\n"
            "print(sorted(m for m in ('tensorflow', 'jax', 'torch', 'keras') "
            "if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
