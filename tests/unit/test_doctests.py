"""Every docstring example in the package runs and prints what it shows (doctest), so an
example cannot drift from the code; examples that need a machine, a worker or a model say
``# doctest: +SKIP``. Modules that import a framework at import time are left out: the
parent never imports one, and their examples are skipped anyway."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

import devicebench

ROOT = Path(devicebench.__file__).resolve().parent
FRAMEWORK_IMPORTS = ("import tensorflow", "import torch", "import jax", "import keras",
                     "import mlx", "import ray")


def _modules() -> list[str]:
    names = []
    for path in sorted(ROOT.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if ">>>" not in text:
            continue
        top = [line for line in text.splitlines() if not line.startswith((" ", "\t"))]
        if any(line.startswith(FRAMEWORK_IMPORTS) for line in top):
            continue
        rel = path.relative_to(ROOT.parent).with_suffix("")
        names.append(".".join(p for p in rel.parts if p != "__init__"))
    return names


@pytest.mark.parametrize("name", _modules())
def test_the_examples_in_the_docstrings_run(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False,
                             report=True)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed"


def test_the_examples_are_found() -> None:
    assert len(_modules()) > 30
