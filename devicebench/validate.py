"""One validation of every request, shared by the CLI and the Python API, run before
anything starts (issue 27, item 6).

The limits live here once: the CLI's options take their ``min``/``max`` from
:data:`LIMITS` (so ``--help`` shows them and typer refuses a value out of range in one
line), and :func:`devicebench.run`, :func:`devicebench.advise` and
:func:`devicebench.doctor` — which the CLI commands call in turn — check every argument
against the same limits, types included, before probing, opening the store or starting
a worker. A bad argument is one :class:`~devicebench.errors.InputError` naming it.

Example:
    >>> LIMITS["rounds"].check("rounds", 3)
    3
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devicebench.errors import InputError


def _fmt(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


@dataclass(frozen=True)
class Limit:
    """The allowed range of one numeric argument (``hi`` None: no upper bound)."""

    lo: float
    hi: float | None
    integer: bool
    example: str
    why: str = ""

    def check(self, name: str, value: Any, *, optional: bool = False) -> Any:
        """``value`` if it is a number of the right kind within the range (None too
        when ``optional``); InputError naming ``name`` otherwise."""
        if value is None and optional:
            return None
        kind = "an integer" if self.integer else "a number"
        if isinstance(value, bool) or not isinstance(value, int | float) or (
                self.integer and not isinstance(value, int)):
            raise InputError(f"{name} must be {kind}, got {value!r:.60}",
                             fix=f"e.g. {self.example}")
        if not math.isfinite(value) or value < self.lo or (
                self.hi is not None and value > self.hi):
            span = (f"from {_fmt(self.lo)} to {_fmt(self.hi)}" if self.hi is not None
                    else f"at least {_fmt(self.lo)}")
            raise InputError(f"{name} must be {span}, got {value}", why=self.why or None,
                             fix=f"e.g. {self.example}")
        return value


# name -> limit; the CLI's options read min/max from here (the single source).
LIMITS: dict[str, Limit] = {
    "rounds": Limit(1, 1000, True, "rounds=5 (--rounds 5)"),
    "budget": Limit(1.0, None, False, "budget=60 (--budget 60)"),
    "advise_budget": Limit(10.0, None, False, "budget=60 (--budget 60)",
                           "a search needs time for each candidate's import and set-up"),
    "equivalence_steps": Limit(1, 1000, True, "equivalence_steps=50 (--equivalence-steps 50)",
                               "each step is one synced train_on_batch call in every trial"),
    "timeout": Limit(1.0, None, False, "timeout=300 (--timeout 300)"),
    "memory_limit_mib": Limit(1, None, True, "memory_limit_mib=4096 (--memory-limit 4096)"),
    "steps_per_execution": Limit(1, 100_000, True,
                                 "steps_per_execution=8 (--steps-per-execution 8)"),
    "seed": Limit(0, 2**32 - 1, True, "seed=42 (--seed 42)",
                  "NumPy and the frameworks take seeds from 0 to 2**32 - 1"),
    "batch_size": Limit(1, 2**31 - 1, True, "batch_sizes=[32, 64] (--batch-size 32,64)"),
    "threads": Limit(1, 4096, True, "threads=[4] (--threads 4)"),
    "epochs": Limit(1, 1_000_000, True, "epochs=20 (--epochs 20)"),
    "doctor_timeout": Limit(1.0, None, False, "timeout=60 (--timeout 60)"),
    "history_limit": Limit(1, 1_000_000, True, "--limit 50"),
}


def _names(name: str, value: Any, example: str) -> list[str] | None:
    """None, or a non-empty list of non-empty strings."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, list | tuple) or not value or any(
            not isinstance(v, str) or not v.strip() for v in value):
        raise InputError(f"{name} must be a non-empty list of names, got {value!r:.60}",
                         fix=f"e.g. {example}, or None for the default")
    return [v.strip() for v in value]


def _numbers(name: str, value: Any, limit: Limit) -> list[int | None] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, list | tuple) or not value:
        raise InputError(f"{name} must be a non-empty list, got {value!r:.60}",
                         fix=f"e.g. {limit.example}, or None for the default")
    return [limit.check(f"{name}[{i}]", v, optional=True) for i, v in enumerate(value)]


def _path(name: str, value: Any, *, optional: bool = True) -> None:
    if (value is None and optional) or isinstance(value, str | Path) and str(value):
        return
    raise InputError(f"{name} must be a path, got {value!r:.60}", fix=f"e.g. {name}='x.db'")


def _flag(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise InputError(f"{name} must be True or False, got {value!r:.60}")


def check_run_request(args: dict[str, Any]) -> dict[str, Any]:
    """The arguments of :func:`devicebench.run`, checked and normalised (workloads a
    list, each named once; lists of choices as lists).

    Raises:
        InputError: the first argument of the wrong type or out of range.
    """
    out = dict(args)
    workloads = args["workloads"]
    if isinstance(workloads, str):
        workloads = [workloads]
    names = _names("workloads", workloads, "['seed-rnn'] (run seed-rnn)") or ["seed-rnn"]
    out["workloads"] = list(dict.fromkeys(names))  # `run mlp mlp`: measured once
    out["repeated"] = [n for n in out["workloads"] if names.count(n) > 1]
    for key, example in (("backends", "['tensorflow', 'jax'] (--backend tensorflow,jax)"),
                         ("devices", "['cpu'] (--device cpu)"),
                         ("precisions", "['float32'] (--precision float32)"),
                         ("jits", "['auto'] (--jit auto)"),
                         ("pipelines", "['arrays'] (--pipeline arrays)")):
        out[key] = _names(key, args[key], example)
    out["batch_sizes"] = _numbers("batch_sizes", args["batch_sizes"], LIMITS["batch_size"])
    out["threads"] = _numbers("threads", args["threads"], LIMITS["threads"])
    for key in ("steps_per_execution", "budget", "equivalence_steps", "timeout"):
        LIMITS[key].check(key, args[key])
    for key in ("seed", "rounds", "memory_limit_mib"):
        LIMITS[key].check(key, args[key], optional=True)
    _flag("resume", args["resume"])
    _path("db", args["db"])
    if args.get("argv") is not None and not isinstance(args["argv"], list):
        raise InputError(f"argv must be a list of strings, got {args['argv']!r:.60}")
    return out


def check_advise_request(budget: Any, baseline: Any, allow_batch_change: Any, db: Any,
                         data: Any = None, epochs: Any = None) -> float:
    """The arguments of :func:`devicebench.advise` (and ``devicebench advise``); the
    budget as a float.

    Raises:
        InputError: an argument of the wrong type or out of range.
    """
    if isinstance(budget, bool) or not isinstance(budget, int | float):
        raise InputError(f"budget must be a number of seconds, got {budget!r:.60}",
                         fix="e.g. devicebench.advise('seed-rnn', budget=60)")
    LIMITS["advise_budget"].check("budget", budget)
    if baseline is not None and not isinstance(baseline, str):
        raise InputError(f"baseline must be a string, got {type(baseline).__name__}",
                         fix="e.g. baseline='backend=tensorflow,device=cpu'")
    _flag("allow_batch_change", allow_batch_change)
    if db is not None and not isinstance(db, str | Path):
        raise InputError(f"db must be a path, got {type(db).__name__}",
                         fix="e.g. db='results.db'")
    if data is not None and (not isinstance(data, tuple | list) or len(data) != 2):
        raise InputError(f"data must be a pair (x, y), got {type(data).__name__}",
                         fix="pass data=(x_train, y_train)")
    LIMITS["epochs"].check("epochs", epochs, optional=True)
    return float(budget)


def check_doctor_request(script: Any, frameworks: Any, timeout: Any, snapshot: Any,
                         concurrent: Any) -> None:
    """The arguments of :func:`devicebench.doctor` (and ``devicebench doctor``).

    Raises:
        InputError: an argument of the wrong type or out of range, an unknown framework,
            frameworks given with a snapshot (nothing is imported then).
    """
    from devicebench.backends import FRAMEWORKS

    _path("script", script)
    _path("snapshot", snapshot)
    if frameworks is not None:
        if isinstance(frameworks, str) or not isinstance(frameworks, list | tuple) or any(
                not isinstance(f, str) for f in frameworks):
            raise InputError(f"frameworks must be a list of names, got {frameworks!r:.60}",
                             fix=f"e.g. frameworks=['jax'] (any of {', '.join(FRAMEWORKS)}; "
                                 "[] for none)")
        unknown = [f for f in frameworks if f not in FRAMEWORKS]
        if unknown:
            raise InputError(f"unknown framework {unknown[0]!r}",
                             fix=f"use any of {', '.join(FRAMEWORKS)} (--frameworks "
                                 "tensorflow,jax; 'none' for none)")
        if snapshot is not None:
            raise InputError("frameworks given with a snapshot",
                             why="a saved snapshot is checked as it is: nothing is imported",
                             fix="drop --frameworks, or drop --snapshot to probe this machine")
    LIMITS["doctor_timeout"].check("timeout", timeout)
    _flag("concurrent", concurrent)


STDOUT = "-"  # a file option given as `-` means stdout


def is_stdout(path: Path | str | None) -> bool:
    """True when a file option was given as ``-``: the output goes to stdout."""
    return path is not None and str(path) == STDOUT


def refuse_stdout(path: Path | str | None, option: str, why: str, fix: str) -> None:
    """One line and exit 2 when ``-`` (stdout) was given to an option that cannot write
    there (a directory, or a file written while a script owns stdout)."""
    if is_stdout(path):
        raise InputError(f"{option} - (stdout) is not possible here", why=why, fix=fix)
