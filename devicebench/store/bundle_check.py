"""Every field of a bundle checked before anything is written (issue 27, item 3).

A bundle comes from another machine, or from a hand edit: a trial with a negative or
NaN block time, ``"trials": [null]``, ``"block_seconds": "fast"``, an unknown status or
a start time that is not a time would be stored as it is and break every later
``report``. :func:`check_bundle_runs` reads each run entry into its records, or raises
one :class:`InputError` naming the run, the trial and the field.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from devicebench.errors import InputError
from devicebench.ops.result import OpsWorkerResult
from devicebench.trials.result import TrialResult

TRIAL_STATUSES = ("ok", "error", "crashed", "timeout", "oom", "nan", "skipped")
OPS_STATUSES = ("ok", "unavailable", "error", "crashed", "timeout", "oom")
_NUMBERS = ("import_seconds", "setup_seconds", "first_step_seconds", "warmup_seconds",
            "flops_per_step", "final_loss", "input_seconds_per_batch", "setup_step_seconds",
            "validation_first_seconds")
_COUNTS = ("warmup_blocks", "steps_per_block", "batch_size", "steps_per_epoch",
           "peak_device_memory_bytes", "peak_rss_bytes", "setup_steps",
           "validation_samples", "workload_epochs")
_TEXTS = ("error", "traceback_tail", "stderr_tail", "data_note", "setup_step_method",
          "blocks_cut", "loss_verdict", "loss_detail", "group_id")


class _Bad(Exception):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field} {problem}")


def _number(value: Any, field: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Bad(field, f"must be a number, got {value!r:.40}")
    if not math.isfinite(value):
        raise _Bad(field, f"is {value} (a time or figure must be finite)")
    if positive and value <= 0:
        raise _Bad(field, f"must be positive, got {value}")
    return float(value)


def _numbers(value: Any, field: str, *, positive: bool = False) -> None:
    if not isinstance(value, list):
        raise _Bad(field, f"must be a list of numbers, got {value!r:.40}")
    for i, v in enumerate(value):
        _number(v, f"{field}[{i}]", positive=positive)


def _counts(value: Any, field: str) -> None:
    if not isinstance(value, list) or any(
            isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in value):
        raise _Bad(field, f"must be a list of non-negative integers, got {value!r:.40}")


def _time(value: Any, field: str, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise _Bad(field, f"must be an ISO time string, got {value!r:.40}")
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise _Bad(field, f"is not an ISO time: {value!r:.40}") from None


def _trial(t: Any) -> TrialResult:
    if not isinstance(t, dict):
        raise _Bad("", f"must be an object, got {t!r:.40}")
    if t.get("status", "ok") not in TRIAL_STATUSES:
        raise _Bad("status", f"is {t.get('status')!r:.40}, not one of "
                   f"{', '.join(TRIAL_STATUSES)}")
    if not isinstance(t.get("spec"), dict):
        raise _Bad("spec", "must be an object (the trial's specification)")
    _numbers(t.get("block_seconds", []), "block_seconds", positive=True)
    _counts(t.get("block_rounds", []), "block_rounds")
    if len(t.get("block_rounds", [])) > len(t.get("block_seconds", [])):
        raise _Bad("block_rounds", "has more entries than block_seconds")
    if t.get("status", "ok") == "ok" and not t.get("block_seconds"):
        raise _Bad("block_seconds", "is empty for an ok trial (nothing to report)")
    for name in ("equivalence_losses", "validation_seconds"):
        if name in t:
            _numbers(t[name], name, positive=name == "validation_seconds")
    for name in _NUMBERS:
        if t.get(name) is not None:
            _number(t[name], name)
    for name in _COUNTS:
        v = t.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise _Bad(name, f"must be a non-negative integer, got {v!r:.40}")
    for name in _TEXTS:
        if t.get(name) is not None and not isinstance(t[name], str):
            raise _Bad(name, f"must be a string, got {t[name]!r:.40}")
    for name in ("loss_checkpoints", "placement", "earlier_blocks"):
        if t.get(name) is not None and not isinstance(t[name], dict):
            raise _Bad(name, f"must be an object, got {t[name]!r:.40}")
    try:
        return TrialResult.from_dict(t)
    except (KeyError, TypeError, ValueError) as exc:
        raise _Bad("spec", f"cannot be read ({type(exc).__name__}: {exc})") from None


def _ops(w: Any) -> OpsWorkerResult:
    if not isinstance(w, dict):
        raise _Bad("", f"must be an object, got {w!r:.40}")
    if w.get("status", "ok") not in OPS_STATUSES:
        raise _Bad("status", f"is {w.get('status')!r:.40}, not one of {', '.join(OPS_STATUSES)}")
    points = w.get("points", [])
    if not isinstance(points, list) or not all(isinstance(p, dict) for p in points):
        raise _Bad("points", "must be a list of objects")
    for i, p in enumerate(points):
        _numbers(p.get("block_seconds", []), f"points[{i}].block_seconds", positive=True)
    try:
        return OpsWorkerResult.from_dict(w)
    except (KeyError, TypeError, ValueError) as exc:
        raise _Bad("", f"cannot be read ({type(exc).__name__}: {exc})") from None


def check_bundle_runs(runs: list[Any], source: str
                      ) -> list[tuple[dict[str, Any], list[TrialResult], list[OpsWorkerResult]]]:
    """Each run entry with its trials and op workers read and checked, or an
    InputError naming the run, the record and the field (nothing is written)."""
    out = []
    for i, entry in enumerate(runs):
        where = f"run {i + 1}"
        try:
            if not isinstance(entry, dict):
                raise _Bad("", f"must be an object, got {entry!r:.40}")
            m = entry.get("machine")
            if not isinstance(m, dict) or not isinstance(m.get("fingerprint"), str) \
                    or not isinstance(m.get("snapshot"), dict):
                raise _Bad("machine", "must be an object with a fingerprint and a snapshot")
            if not isinstance(entry.get("command"), str) or not entry["command"]:
                raise _Bad("command", f"must be a command name, got {entry.get('command')!r:.40}")
            _time(entry.get("started_at"), "started_at")
            _time(entry.get("finished_at"), "finished_at", optional=True)
            if not isinstance(entry.get("options") or {}, dict):
                raise _Bad("options", f"must be an object, got {entry['options']!r:.40}")
            for name in ("trials", "ops"):
                if not isinstance(entry.get(name, []), list):
                    raise _Bad(name, f"must be a list, got {entry[name]!r:.40}")
            trials, ops = [], []
            for j, t in enumerate(entry.get("trials", [])):
                where = f"run {i + 1}, trial {j + 1}"
                trials.append(_trial(t))
            for j, w in enumerate(entry.get("ops", [])):
                where = f"run {i + 1}, ops worker {j + 1}"
                ops.append(_ops(w))
        except _Bad as exc:
            raise InputError(f"{source}: {where}: {str(exc).strip()}",
                             why="a bundle is imported whole or not at all",
                             fix="export it again with `devicebench export`, or correct "
                                 "that field") from None
        out.append((entry, trials, ops))
    return out
