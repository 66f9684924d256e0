"""Schema of the results database: versions, migrations, and how they are applied.

The version lives in ``PRAGMA user_version``. Migrations are registered in
:data:`MIGRATIONS` (version -> function) and each runs in ONE transaction together with
the ``user_version`` bump, so a failure (or Ctrl-C) leaves the previous version intact.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

CURRENT_SCHEMA = 5

# Version 1: machines, runs, trials; a trial's raw blocks live inside its result JSON.
V1_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE machines (
        id INTEGER PRIMARY KEY,
        fingerprint TEXT NOT NULL UNIQUE,
        cpu TEXT NOT NULL,
        gpu TEXT NOT NULL,
        os TEXT NOT NULL,
        python TEXT NOT NULL,
        frameworks TEXT NOT NULL,  -- JSON: distribution -> version
        snapshot TEXT NOT NULL,    -- JSON: the whole EnvSnapshot
        created_at TEXT NOT NULL
    )""",
    """CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        machine_id INTEGER NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
        started_at TEXT NOT NULL,
        finished_at TEXT,          -- NULL: interrupted or still running
        command TEXT NOT NULL,
        options TEXT NOT NULL      -- JSON
    )""",
    """CREATE TABLE trials (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        spec_key TEXT NOT NULL,
        spec TEXT NOT NULL,        -- JSON: TrialSpec.to_dict()
        status TEXT NOT NULL,
        result TEXT NOT NULL,      -- JSON: TrialResult.to_dict()
        finished_at TEXT NOT NULL
    )""",
    "CREATE INDEX runs_machine ON runs(machine_id)",
    "CREATE INDEX trials_run ON trials(run_id)",
)

# Version 2: each raw timing block is a row of its own; the result JSON no longer holds them.
V2_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE samples (
        trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,      -- block order within the trial
        round INTEGER,             -- interleaving round (NULL: not recorded)
        seconds REAL NOT NULL,     -- wall time of the block, ending with a device sync
        steps INTEGER NOT NULL,    -- steps in the block
        PRIMARY KEY (trial_id, idx)
    )""",
    "CREATE INDEX trials_spec_status ON trials(spec_key, status)",
)

# Version 3: `devicebench ops`. One ops_runs row per worker (a backend on a device) of a
# run; one ops_points row per (op, mode, size) it measured or skipped, raw blocks kept.
V3_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE ops_runs (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        backend TEXT NOT NULL,     -- tensorflow | jax | torch | numpy
        device TEXT NOT NULL,      -- cpu | gpu:N | mps
        status TEXT NOT NULL,      -- ok | unavailable | error | crashed | timeout
        error TEXT NOT NULL,
        info TEXT NOT NULL,        -- JSON: versions, threads, how `compiled` was done
        finished_at TEXT NOT NULL
    )""",
    """CREATE TABLE ops_points (
        ops_run_id INTEGER NOT NULL REFERENCES ops_runs(id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,      -- order within the worker's sweep
        op TEXT NOT NULL,
        mode TEXT NOT NULL,        -- naive | eager | compiled | in-graph
        size INTEGER NOT NULL,     -- n: n x n tensors
        status TEXT NOT NULL,      -- ok | skipped | error
        reason TEXT NOT NULL,
        calls_per_block INTEGER NOT NULL,
        chain INTEGER NOT NULL,    -- ops per call (in-graph: N)
        first_call_seconds REAL,   -- tracing / compilation included
        block_seconds TEXT NOT NULL,  -- JSON list: raw wall time of each timed block
        median_call_seconds REAL,  -- derived from the blocks, for queries
        PRIMARY KEY (ops_run_id, idx)
    )""",
    "CREATE INDEX ops_runs_run ON ops_runs(run_id)",
    "CREATE INDEX ops_points_op ON ops_points(op, mode, size)",
)

# Version 4: `TrainingMonitor` (devicebench.monitor). A monitored fit is a run with command
# "monitor" (its summary in the run's options); each timed block of steps is a row.
V4_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE monitor_blocks (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,      -- block order within the run
        epoch INTEGER NOT NULL,
        first_step INTEGER NOT NULL,  -- within the epoch
        steps INTEGER NOT NULL,
        seconds REAL NOT NULL,     -- wall time of the block, ending with a device sync
        kind TEXT NOT NULL,        -- first (compilation inside) | block | tail
        memory_current INTEGER,    -- bytes; NULL: unknown
        memory_peak INTEGER,
        gpu_busy REAL,             -- NVML utilisation over the block, 0..1; NULL: not sampled
        loss REAL,
        PRIMARY KEY (run_id, idx)
    )""",
)

# Version 5: the worker process (replica) that measured each block: a configuration a
# verdict rests on is measured in more than one process (0: the trial's first process,
# and every block stored before version 5).
V5_STATEMENTS: tuple[str, ...] = (
    "ALTER TABLE samples ADD COLUMN replica INTEGER NOT NULL DEFAULT 0",
)

# Keys of a version-2 result JSON that live elsewhere (spec column, samples table).
MOVED_KEYS = ("spec", "block_seconds", "block_rounds", "block_replicas")


def _migrate_v1(conn: sqlite3.Connection) -> None:
    for sql in V1_STATEMENTS:
        conn.execute(sql)


def _migrate_v2(conn: sqlite3.Connection) -> None:
    for sql in V2_STATEMENTS:
        conn.execute(sql)
    rows = conn.execute("SELECT id, result FROM trials").fetchall()
    for trial_id, result_json in rows:
        try:
            result = json.loads(result_json)
            seconds = [float(s) for s in result.get("block_seconds", [])]
            rounds = [int(r) for r in result.get("block_rounds", [])]
            steps = int(result.get("steps_per_block", 0))
        except (ValueError, TypeError, AttributeError):
            continue  # unreadable row: left as it was; loading it reports the problem
        conn.executemany(
            "INSERT INTO samples (trial_id, idx, round, seconds, steps) VALUES (?, ?, ?, ?, ?)",
            [(trial_id, i, rounds[i] if i < len(rounds) else None, s, steps)
             for i, s in enumerate(seconds)],
        )
        slim = {k: v for k, v in result.items() if k not in MOVED_KEYS}
        conn.execute("UPDATE trials SET result = ? WHERE id = ?",
                     (json.dumps(slim, sort_keys=True), trial_id))


def _migrate_v3(conn: sqlite3.Connection) -> None:
    for sql in V3_STATEMENTS:
        conn.execute(sql)


def _migrate_v4(conn: sqlite3.Connection) -> None:
    for sql in V4_STATEMENTS:
        conn.execute(sql)


def _migrate_v5(conn: sqlite3.Connection) -> None:
    for sql in V5_STATEMENTS:
        conn.execute(sql)


Migration = Callable[[sqlite3.Connection], None]

MIGRATIONS: dict[int, Migration] = {1: _migrate_v1, 2: _migrate_v2, 3: _migrate_v3, 4: _migrate_v4,
                                  5: _migrate_v5}


def schema_version(conn: sqlite3.Connection) -> int:
    """The database's ``PRAGMA user_version`` (0 for a new, empty file)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def apply_migrations(conn: sqlite3.Connection, target: int = CURRENT_SCHEMA) -> list[int]:
    """Bring ``conn`` (opened with ``isolation_level=None``) up to ``target``.

    Each pending migration runs in its own ``BEGIN IMMEDIATE`` transaction together with
    the version bump; the version is re-read under the write lock, so two processes
    opening an old file at once migrate it once.

    Returns:
        the versions applied (empty when already current).

    Raises:
        sqlite3.Error: a migration failed (its transaction is rolled back);
            any exception a migration raises, after the rollback.
    """
    applied: list[int] = []
    for version in sorted(v for v in MIGRATIONS if v <= target):
        if schema_version(conn) >= version:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            if schema_version(conn) >= version:  # another process got there first
                conn.execute("ROLLBACK")
                continue
            MIGRATIONS[version](conn)
            conn.execute(f"PRAGMA user_version = {int(version)}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        applied.append(version)
    return applied
