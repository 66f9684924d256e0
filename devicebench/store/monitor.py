"""Monitored training runs in the store: a run with command ``"monitor"`` (what the fit
was and its summary in the run's options) and one ``monitor_blocks`` row per timed block.

Blocks are plain dicts (``devicebench.monitor.core.Block.to_dict()``), so the store does
not depend on the callback's package.

Example:
    >>> from devicebench.env.snapshot import EnvSnapshot
    >>> from devicebench.store import ResultStore
    >>> with ResultStore.open(":memory:") as store:
    ...     run_id = save_monitor_run(store, EnvSnapshot(), {"backend": "jax"},
    ...                               [{"epoch": 0, "first_step": 0, "steps": 10,
    ...                                 "seconds": 0.1, "kind": "block"}], {"steps": 10})
    ...     [b["steps"] for b in load_monitor_blocks(store, run_id)]
    [10]
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from devicebench.env.snapshot import EnvSnapshot
from devicebench.store.db import ResultStore

MONITOR_COMMAND = "monitor"
BLOCK_COLUMNS = ("epoch", "first_step", "steps", "seconds", "kind", "memory_current",
                 "memory_peak", "gpu_busy", "loss")


def save_monitor_run(store: ResultStore, snapshot: EnvSnapshot, options: Mapping[str, Any],
                     blocks: Sequence[Mapping[str, Any]], summary: Mapping[str, Any]) -> int:
    """Record a monitored fit as a finished run tagged ``"monitor"``; returns the run id.

    Raises:
        StoreError: the database cannot be written.
    """
    run_id = start_monitor_run(store, snapshot, options)
    add_monitor_blocks(store, run_id, blocks, 0)
    end_monitor_run(store, run_id, summary, "completed")
    return run_id


def start_monitor_run(store: ResultStore, snapshot: EnvSnapshot,
                      options: Mapping[str, Any]) -> int:
    """Record the start of a monitored fit (``ended: "running"``); blocks follow with
    :func:`add_monitor_blocks` as they are measured, and :func:`end_monitor_run` marks
    how the fit ended. A run never ended (the process was killed) keeps no end time.

    Raises:
        StoreError: the database cannot be written.
    """
    machine_id = store.add_machine(snapshot)
    return store.start_run(machine_id, MONITOR_COMMAND, {**dict(options), "ended": "running"})


def add_monitor_blocks(store: ResultStore, run_id: int, blocks: Sequence[Mapping[str, Any]],
                       first_idx: int) -> None:
    """Append ``blocks`` (numbered from ``first_idx``) to the run, in one commit.

    Raises:
        StoreError: the database cannot be written.
    """
    rows = [(run_id, first_idx + i, *(_clean(b.get(c)) for c in BLOCK_COLUMNS))
            for i, b in enumerate(blocks)]
    if not rows:
        return
    with store._write("adding monitored blocks") as c:
        c.executemany(
            f"INSERT INTO monitor_blocks (run_id, idx, {', '.join(BLOCK_COLUMNS)}) "
            f"VALUES ({', '.join('?' * (len(BLOCK_COLUMNS) + 2))})", rows)


ENDINGS = ("completed", "error", "interrupted", "terminated")


def end_monitor_run(store: ResultStore, run_id: int, summary: Mapping[str, Any],
                    ended: str, detail: str = "") -> None:
    """Mark the run finished, how (``ended``: one of :data:`ENDINGS`) and why (``detail``,
    e.g. the exception), with the fit's summary.

    Raises:
        StoreError: the database cannot be written.
    """
    with store._write("marking how a monitored fit ended") as c:
        row = c.execute("SELECT options FROM runs WHERE id = ?", (run_id,)).fetchone()
        options = json.loads(row[0]) if row and row[0] else {}
        options["ended"] = ended
        if detail:
            options["end_detail"] = detail
        c.execute("UPDATE runs SET options = ? WHERE id = ?",
                  (json.dumps(options, sort_keys=True, default=str), run_id))
    store.finish_run(run_id, summary=dict(summary))


def _clean(value: Any) -> Any:
    # SQLite stores NaN as NULL; keep an infinite or NaN loss readable as text-free REAL.
    if isinstance(value, float) and value != value:
        return None
    return value


def load_monitor_blocks(store: ResultStore, run_id: int) -> list[dict[str, Any]]:
    """The run's blocks, in order, as dicts keyed like :data:`BLOCK_COLUMNS`."""
    with store._read("reading monitored blocks") as c:
        rows = c.execute(f"SELECT {', '.join(BLOCK_COLUMNS)} FROM monitor_blocks "
                         "WHERE run_id = ? ORDER BY idx", (run_id,)).fetchall()
    return [dict(zip(BLOCK_COLUMNS, r, strict=True)) for r in rows]


def latest_monitor_run(store: ResultStore, machine_id: int) -> int | None:
    """The newest finished monitored run on this machine, or None."""
    with store._read("finding monitored runs") as c:
        row = c.execute("SELECT id FROM runs WHERE machine_id = ? AND command = ? AND "
                        "finished_at IS NOT NULL ORDER BY id DESC LIMIT 1",
                        (machine_id, MONITOR_COMMAND)).fetchone()
    return int(row[0]) if row else None


_REQUIRED = {"epoch": int, "first_step": int, "steps": int, "seconds": float, "kind": str}
_OPTIONAL = {"memory_current": int, "memory_peak": int, "gpu_busy": float, "loss": float}


def monitor_blocks_from_bundle(data: Any) -> list[dict[str, Any]]:
    """A bundle entry's ``monitor_blocks`` checked and typed (None: no blocks).

    Raises:
        TypeError, KeyError, ValueError: not a list of blocks (the importer names the run).
    """
    if data is None:
        return []
    if not isinstance(data, list):
        raise TypeError(f"monitor_blocks is a {type(data).__name__}, not a list")
    out = []
    for b in data:
        if not isinstance(b, dict):
            raise TypeError(f"a monitor block is a {type(b).__name__}, not an object")
        block = {k: t(b[k]) for k, t in _REQUIRED.items()}
        block.update({k: None if b.get(k) is None else t(b[k]) for k, t in _OPTIONAL.items()})
        if block["steps"] < 0 or block["seconds"] < 0:
            raise ValueError("a monitor block has negative steps or seconds")
        out.append(block)
    return out
