"""TrainingMonitor's arguments, checked at construction (not at fit time)."""

from __future__ import annotations

import math
from pathlib import Path

from devicebench.errors import ArgumentError


def check_monitor_args(a: dict) -> None:
    """TrainingMonitor's arguments: ArgumentError (a ValueError) naming the first that is
    of the wrong type or out of range, at construction, not at fit time."""
    def number(name: str, low: float, *, integer: bool = False, optional: bool = False,
               above: bool = True) -> None:
        v = a[name]
        if v is None and optional:
            return
        ok_type = isinstance(v, int) if integer else isinstance(v, int | float)
        if isinstance(v, bool) or not ok_type:
            kind = "an integer" if integer else "a number"
            raise ArgumentError(f"{name} must be {kind}, got {v!r:.60}")
        if not math.isfinite(v) or (v <= low if above else v < low):
            raise ArgumentError(f"{name} must be {'>' if above else '>='} {low:g}, got {v}")

    number("batch_size", 1, integer=True, optional=True, above=False)
    number("block_steps", 1, integer=True, optional=True, above=False)
    number("target_block_seconds", 0)
    number("stall_factor", 1)
    number("nvml_interval", 0)
    for name in ("csv_path", "tensorboard_dir"):
        if a[name] is not None and not isinstance(a[name], str | Path):
            raise ArgumentError(f"{name} must be a path, got {a[name]!r:.60}")
    if a["db"] is not None and not isinstance(a["db"], bool | str | Path):
        raise ArgumentError(f"db must be a path, True (the default database) or None, "
                            f"got {a['db']!r:.60}")
    if not isinstance(a["stop_on_nan"], bool):
        raise ArgumentError(f"stop_on_nan must be True or False, got {a['stop_on_nan']!r:.60}")
    if a["nvml"] not in (True, False, "auto") or not isinstance(a["nvml"], bool | str):
        raise ArgumentError(f"nvml must be True, False or 'auto', got {a['nvml']!r}")
    if a["verbose"] not in (0, 1, 2) or not isinstance(a["verbose"], int):
        raise ArgumentError(f"verbose must be 0, 1 or 2 (as Keras' fit), got "
                            f"{a['verbose']!r:.60}")
    for name in ("nvml_read", "printer"):
        if a[name] is not None and not callable(a[name]):
            raise ArgumentError(f"{name} must be a function, got {a[name]!r:.60}")
