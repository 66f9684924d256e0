"""No module of devicebench is over 450 lines (the project's rule: a file that long
holds more than one thing, and is split along its seams)."""

from __future__ import annotations

from pathlib import Path

import devicebench

ROOT = Path(devicebench.__file__).resolve().parent
LIMIT = 450


def _over(root: Path) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > LIMIT:
            out.append(f"{path.relative_to(root.parent)}: {n} lines")
    return out


def test_no_module_is_over_450_lines() -> None:
    over = _over(ROOT)
    assert not over, f"over {LIMIT} lines (split along a seam):\n" + "\n".join(over)


def test_the_count_sees_a_long_file(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * (LIMIT + 1))
    (tmp_path / "pkg" / "short.py").write_text("x = 1\n" * LIMIT)
    assert _over(tmp_path / "pkg") == [f"pkg/long.py: {LIMIT + 1} lines"]
