"""Hostile input, round two (issue 27): each test reproduces one defect on the pure
parts (no worker process); the end-to-end reproductions are in
tests/integration/test_faults_hostile.py."""

from __future__ import annotations

import pytest

from devicebench.errors import SpecError
from devicebench.workloads.loader import validate_workload_ref

# -- 1. a top-level assignment, a lambda, an import: names a file defines ---------------

@pytest.mark.parametrize("source, name", [
    ("N = 1\ndef w(): return 42\n", "w"),
    ("w = lambda: 42\n", "w"),
    ("N: int = 1\nw: object = None\n", "w"),
    ("a, (b, w) = 1, (2, 3)\n", "w"),
    ("from good import w\n", "w"),
    ("from good import x as w\n", "w"),
    ("import good as w\n", "w"),
    ("try:\n    from fast import w\nexcept ImportError:\n    from slow import w\n", "w"),
    ("if True:\n    def w(): pass\n", "w"),
    ("class w: pass\n", "w"),
    ("from good import *\n", "anything"),
])
def test_a_reference_to_any_top_level_name_is_accepted(tmp_path, source, name):
    path = tmp_path / "w.py"
    path.write_text(source)
    validate_workload_ref(f"{path}:{name}")  # no AttributeError, no SpecError


def test_a_missing_name_is_still_refused(tmp_path):
    path = tmp_path / "w.py"
    path.write_text("N = 1\nx = lambda: 0\ndef helper(): pass\n")
    with pytest.raises(SpecError, match="no function 'w'"):
        validate_workload_ref(f"{path}:w")


# -- 8. a 5,000-character workload path --------------------------------------------------

def test_a_too_long_workload_path_is_one_spec_error():
    with pytest.raises(SpecError, match="cannot be read: File name too long") as info:
        validate_workload_ref("a" * 5000 + ".py:w")
    assert len(info.value.message) < 300
