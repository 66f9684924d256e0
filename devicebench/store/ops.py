"""``devicebench ops`` results in the store: one ``ops_runs`` row per worker (a backend
on a device) of a run, one ``ops_points`` row per op, mode and size, raw blocks kept.

Example:
    >>> from devicebench.store import ResultStore
    >>> with ResultStore.open(":memory:") as store:
    ...     load_ops_results(store, 1)
    []
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from devicebench.ops.result import OpsPoint, OpsWorkerResult
from devicebench.store.db import ResultStore


def add_ops_result(store: ResultStore, run_id: int, result: OpsWorkerResult) -> int:
    """Write one worker's points (and its status) and commit at once; returns its id.

    Raises:
        StoreError: the run does not exist, or the database cannot be written.
    """
    now = datetime.now(UTC).isoformat(timespec="milliseconds")
    with store._write("adding op-sweep results") as c:
        cur = c.execute(
            "INSERT INTO ops_runs (run_id, backend, device, status, error, info, finished_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (run_id, result.backend, result.device, result.status, result.error,
             json.dumps(result.info, sort_keys=True, default=str), now))
        ops_run_id = int(cur.lastrowid or 0)
        rows = []
        for i, p in enumerate(result.points):
            summary = p.summary()
            rows.append((ops_run_id, i, p.op, p.mode, p.size, p.status, p.reason,
                         p.calls_per_block, p.chain, p.first_call_seconds,
                         json.dumps(list(p.block_seconds)),
                         summary.median if summary else None))
        c.executemany(
            "INSERT INTO ops_points (ops_run_id, idx, op, mode, size, status, reason, "
            "calls_per_block, chain, first_call_seconds, block_seconds, median_call_seconds) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    return ops_run_id


def load_ops_results(store: ResultStore, run_id: int) -> list[OpsWorkerResult]:
    """The run's op-sweep results, workers and points in the order they were added."""
    out: list[OpsWorkerResult] = []
    with store._read("reading op-sweep results") as c:
        workers = c.execute("SELECT id, backend, device, status, error, info FROM ops_runs "
                            "WHERE run_id = ? ORDER BY id", (run_id,)).fetchall()
        for wid, backend, device, status, error, info in workers:
            points = [
                OpsPoint(op=op, mode=mode, size=size, status=st, reason=reason,
                         calls_per_block=k, chain=chain, first_call_seconds=first,
                         block_seconds=tuple(float(s) for s in json.loads(blocks)))
                for op, mode, size, st, reason, k, chain, first, blocks in c.execute(
                    "SELECT op, mode, size, status, reason, calls_per_block, chain, "
                    "first_call_seconds, block_seconds FROM ops_points "
                    "WHERE ops_run_id = ? ORDER BY idx", (wid,)).fetchall()
            ]
            out.append(OpsWorkerResult(backend, device, status, error, json.loads(info),
                                       points))
    return out


def latest_ops_run(store: ResultStore, machine_id: int
                   ) -> tuple[int, list[OpsWorkerResult]] | None:
    """The newest finished ``ops`` run on this machine (same hardware and framework
    versions: the fingerprint) that measured something, with its results; or None."""
    with store._read("finding op-sweep results") as c:
        row = c.execute(
            "SELECT r.id FROM runs r WHERE r.machine_id = ? AND r.command = 'ops' "
            "AND r.finished_at IS NOT NULL AND EXISTS (SELECT 1 FROM ops_runs o "
            "WHERE o.run_id = r.id AND o.status = 'ok') ORDER BY r.id DESC LIMIT 1",
            (machine_id,)).fetchone()
    if row is None:
        return None
    return int(row[0]), load_ops_results(store, int(row[0]))


def fullest_ops_run(store: ResultStore, machine_id: int, recent: int = 10) -> int | None:
    """Among this machine's ``recent`` newest ``ops`` runs that measured something, the
    one with the most measured points (the newest among equals): what a report shows, so
    the few-second dispatch probe advise stores never hides a full sweep."""
    with store._read("finding op-sweep results") as c:
        rows = c.execute(
            "SELECT r.id, (SELECT COUNT(*) FROM ops_points p JOIN ops_runs o "
            "ON p.ops_run_id = o.id WHERE o.run_id = r.id AND p.status = 'ok') AS n "
            "FROM runs r WHERE r.machine_id = ? AND EXISTS (SELECT 1 FROM ops_runs o "
            "WHERE o.run_id = r.id) ORDER BY r.id DESC LIMIT ?",
            (machine_id, recent)).fetchall()
    if not rows:
        return None
    return int(max(rows, key=lambda r: (r[1], r[0]))[0])
