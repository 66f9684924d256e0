"""`ResultStore`: the SQLite results database (stdlib sqlite3, WAL, busy timeout).

Every trial is committed the moment it is added, so Ctrl-C or a crash of the parent
process loses nothing that finished. All sqlite3 errors leave as :class:`StoreError`,
one line saying what happened, why, and what to do.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import platformdirs

from devicebench.env.snapshot import EnvSnapshot
from devicebench.errors import StoreError
from devicebench.store.fingerprint import machine_fingerprint
from devicebench.store.pending import import_pending, kept_aside_note, set_aside, with_retry
from devicebench.store.readonly import connect_read_only
from devicebench.store.schema import CURRENT_SCHEMA, MOVED_KEYS, apply_migrations, schema_version
from devicebench.trials.result import TrialResult

BUSY_TIMEOUT_MS = 5000
MEMORY = ":memory:"


DB_ENV_VAR = "DEVICEBENCH_DB"


def default_db_path() -> Path:
    """The results file used when none is given: ``$DEVICEBENCH_DB`` if set, else
    ``<user data dir>/devicebench/results.db`` (platformdirs), e.g. ``~/.local/share/...``.
    ``--db`` (or ``db=``) wins over both."""
    from_env = os.environ.get(DB_ENV_VAR, "").strip()
    if from_env:
        return Path(from_env).expanduser()
    return Path(platformdirs.user_data_dir("devicebench")) / "results.db"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _disk_full(path: str) -> bool:
    """Whether the filesystem holding ``path`` has no space left (SQLite reports a full
    disk at open as an I/O error or "unable to open")."""
    import shutil

    try:
        return path != MEMORY and shutil.disk_usage(Path(path).resolve().parent).free < 2**16
    except OSError:
        return False


def _error(exc: BaseException, path: str, doing: str) -> StoreError:
    """Translate a sqlite3 error into one line: what, why, fix."""
    msg = str(exc)
    low = msg.lower()
    if "locked" in low or "busy" in low:
        return StoreError(
            f"results database {path} is locked ({doing}: {msg})",
            why="another devicebench process kept it busy past the busy timeout",
            fix="wait for the other `devicebench run` to finish, or pass --db OTHER.db",
        )
    if "not a database" in low or "malformed" in low:
        return StoreError(
            f"{path} is not a usable results database ({msg})",
            why="the file is corrupt or is not an SQLite file",
            fix=f"move {path} away (a new one is created) or pass --db NEW.db",
        )
    if "disk is full" in low or (("unable to open" in low or "i/o error" in low)
                                 and _disk_full(path)):
        return StoreError(f"cannot write results database {path}: the disk is full "
                          f"({doing}: {msg})",
                          fix="free some space or pass --db PATH on another disk")
    if "readonly" in low or "unable to open" in low or "i/o error" in low:
        return StoreError(
            f"cannot write results database {path} ({doing}: {msg})",
            why="the file or its directory is not writable",
            fix="check the permissions, or pass --db PATH in a writable directory",
        )
    if isinstance(exc, sqlite3.IntegrityError) and "foreign key" in low:
        return StoreError(f"{doing}: it refers to a machine or run not in {path}",
                          fix="add the machine / start the run in this database first")
    return StoreError(f"results database {path}: {doing} failed ({msg})",
                      fix="pass --db NEW.db to start a fresh database")


@dataclass(frozen=True)
class RunSummary:
    """One row of :meth:`ResultStore.runs`: a run and how many of its trials finished ok."""

    id: int
    machine_id: int
    fingerprint: str
    cpu: str
    gpu: str
    command: str
    started_at: str
    finished_at: str | None  # None: interrupted, or still running
    trials: int
    ok: int


class ResultStore:
    """The results database. Open with :meth:`open`; use as a context manager.

    Example:
        >>> with ResultStore.open(":memory:") as store:
        ...     store.completed_specs(1)
        set()
    """

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self._conn = conn
        self.path = path

    # -- opening ------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path | None = None, *, busy_timeout_ms: int | None = None,
             read_only: bool = False) -> ResultStore:
        """Open (creating and migrating as needed) the database at ``path``.

        Args:
            path: the file; None = :func:`default_db_path` (its directory is created);
                ``":memory:"`` = a throwaway in-memory database.
            busy_timeout_ms: how long to wait for another process's write lock
                (default ``BUSY_TIMEOUT_MS``).
            read_only: only to read it: a missing file is an InputError (none is
                created), a file this user cannot write is read as it is.

        Results an earlier run could not write (its side file, see
        :mod:`devicebench.store.pending`) are imported here.

        Raises:
            StoreError: ``-`` (not a file), the location is not writable or is a
                directory, the file is corrupt or not SQLite, it comes from a newer
                devicebench, or it stays locked.
        """
        if path is None:
            path = default_db_path()
        if busy_timeout_ms is None:
            busy_timeout_ms = BUSY_TIMEOUT_MS
        where = str(path)
        if where == "-":
            raise StoreError("results database '-': a SQLite database is a file, it "
                             "cannot be stdout", fix="pass a file name, e.g. --db results.db")
        if read_only and where != MEMORY:
            ro = connect_read_only(Path(path))
            if ro is not None:
                return cls(ro, where)
        if where != MEMORY:
            _prepare_location(Path(path))
        conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(where, timeout=busy_timeout_ms / 1000, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            conn.execute("PRAGMA foreign_keys = ON")
            found = schema_version(conn)
            if found > CURRENT_SCHEMA:
                raise StoreError(
                    f"results database {where} has schema version {found}, newer than this "
                    f"devicebench understands ({CURRENT_SCHEMA})",
                    why="it was written by a newer devicebench",
                    fix="upgrade devicebench (pip install -U devicebench) or pass --db NEW.db",
                )
            if found == 0 and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise StoreError(
                    f"{where} is an SQLite database of some other program (no devicebench "
                    "schema version)", fix="pass --db NEW.db")
            conn.execute("PRAGMA journal_mode = WAL")
            apply_migrations(conn)
        except StoreError:
            if conn is not None:
                conn.close()
            raise
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
            raise _error(exc, where, "opening") from None
        store = cls(conn, where)
        import_pending(where, store.add_trial, store.finish_run, TrialResult.from_dict)
        return store

    # -- lifecycle ----------------------------------------------------------------------
    @property
    def connection(self) -> sqlite3.Connection:
        """The underlying connection (autocommit mode), for read-only queries."""
        return self._conn

    def close(self) -> None:
        """Close the database. Safe to call twice."""
        self._conn.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self, doing: str) -> Iterator[sqlite3.Connection]:
        """One write transaction; rolled back on any exception, KeyboardInterrupt included."""
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise _error(exc, self.path, doing) from None

    @contextmanager
    def _read(self, doing: str) -> Iterator[sqlite3.Connection]:
        try:
            yield self._conn
        except sqlite3.Error as exc:
            raise _error(exc, self.path, doing) from None
        except (ValueError, TypeError, KeyError) as exc:  # bad JSON / shape in a stored row
            raise StoreError(f"results database {self.path}: a stored row cannot be read "
                             f"while {doing} ({exc})",
                             fix="pass --db NEW.db to start a fresh database") from None

    # -- writing ------------------------------------------------------------------------
    def add_machine(self, snapshot: EnvSnapshot) -> int:
        """Record the machine ``snapshot`` describes; returns its id (the same id each time)."""
        fp, ident = machine_fingerprint(snapshot)
        cores = ident["cores"]["logical"] or ident["cores"]["physical"]
        cpu = f"{ident['cpu']} ({cores} cores)" if cores else ident["cpu"]
        with self._write("adding a machine") as c:
            c.execute(
                "INSERT INTO machines (fingerprint, cpu, gpu, os, python, frameworks, "
                "snapshot, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(fingerprint) DO NOTHING",
                (fp, cpu, ", ".join(ident["gpus"]), ident["os"], ident["python"],
                 json.dumps(ident["frameworks"], sort_keys=True), snapshot.to_json(), _now()),
            )
            row = c.execute("SELECT id FROM machines WHERE fingerprint = ?", (fp,)).fetchone()
        return int(row[0])

    def start_run(self, machine_id: int, command: str, options: dict[str, Any]) -> int:
        """Record the start of a run (``command``: the command line; ``options``: JSON-able)."""
        with self._write("starting a run") as c:
            cur = c.execute(
                "INSERT INTO runs (machine_id, started_at, command, options) VALUES (?, ?, ?, ?)",
                (machine_id, _now(), command, json.dumps(options, sort_keys=True, default=str)),
            )
        return int(cur.lastrowid or 0)

    def add_trial(self, run_id: int, result: TrialResult) -> int:
        """Write one finished trial and its raw samples, and commit at once.

        Raises:
            StoreError: the run does not exist, or the database cannot be written.
        """
        seconds, rounds = result.block_seconds, result.block_rounds
        if len(rounds) > len(seconds):
            raise StoreError(f"trial {result.spec.label}: {len(rounds)} block rounds for "
                             f"{len(seconds)} blocks", why="the result is inconsistent",
                             fix="report this as a devicebench bug")
        data = result.to_dict()
        # The run is the row's own column; the group travels in the JSON.
        slim = {k: v for k, v in data.items() if k not in (*MOVED_KEYS, "run_id")}
        with self._write("adding a trial") as c:
            cur = c.execute(
                "INSERT INTO trials (run_id, spec_key, spec, status, result, finished_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, result.spec.key, json.dumps(data["spec"], sort_keys=True),
                 result.status, json.dumps(slim, sort_keys=True), _now()),
            )
            trial_id = int(cur.lastrowid or 0)
            c.executemany(
                "INSERT INTO samples (trial_id, idx, round, seconds, steps, replica) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(trial_id, i, rounds[i] if i < len(rounds) else None, float(s),
                  result.steps_per_block, result.replica_of(i))
                 for i, s in enumerate(seconds)],
            )
        return trial_id

    def finish_run(self, run_id: int, summary: dict[str, Any] | None = None) -> None:
        """Mark the run finished (a run left unfinished was interrupted); ``summary``
        (JSON-able, e.g. an advice) is kept in the run's options under ``"summary"``."""
        with self._write("finishing a run") as c:
            if summary is not None:
                row = c.execute("SELECT options FROM runs WHERE id = ?", (run_id,)).fetchone()
                options = json.loads(row[0]) if row and row[0] else {}
                options["summary"] = summary
                c.execute("UPDATE runs SET options = ? WHERE id = ?",
                          (json.dumps(options, sort_keys=True, default=str), run_id))
            cur = c.execute("UPDATE runs SET finished_at = ? WHERE id = ?", (_now(), run_id))
        if cur.rowcount == 0:
            raise StoreError(f"no run {run_id} in {self.path}", fix="finish a run you started")

    # -- reading ------------------------------------------------------------------------
    def completed_specs(self, machine_id: int) -> set[str]:
        """Spec keys with an ``ok`` trial on this machine (what ``--resume`` skips)."""
        with self._read("listing completed trials") as c:
            rows = c.execute(
                "SELECT DISTINCT t.spec_key FROM trials t JOIN runs r ON r.id = t.run_id "
                "WHERE r.machine_id = ? AND t.status = 'ok'", (machine_id,)).fetchall()
        return {r[0] for r in rows}

    def trials_for_run(self, run_id: int) -> list[TrialResult]:
        """The run's trials in the order they were added."""
        with self._read("reading a run's trials") as c:
            rows = c.execute("SELECT id, run_id, spec, result FROM trials WHERE run_id = ? "
                             "ORDER BY id", (run_id,)).fetchall()
            return [self._load(c, *row) for row in rows]

    def latest_result(self, machine_id: int, spec_key: str,
                      status: str | None = "ok") -> TrialResult | None:
        """The newest trial of ``spec_key`` on this machine with ``status`` (None: any)."""
        sql = ("SELECT t.id, t.run_id, t.spec, t.result FROM trials t "
               "JOIN runs r ON r.id = t.run_id "
               "WHERE r.machine_id = ? AND t.spec_key = ?")
        args: list[Any] = [machine_id, spec_key]
        if status is not None:
            sql += " AND t.status = ?"
            args.append(status)
        with self._read("reading a trial") as c:
            row = c.execute(sql + " ORDER BY t.id DESC LIMIT 1", args).fetchone()
            return self._load(c, *row) if row else None

    def runs(self, limit: int = 20) -> list[RunSummary]:
        """The newest ``limit`` runs, newest first, with trial counts."""
        with self._read("listing runs") as c:
            rows = c.execute(
                "SELECT r.id, r.machine_id, m.fingerprint, m.cpu, m.gpu, r.command, "
                "r.started_at, r.finished_at, count(t.id), "
                "coalesce(sum(t.status = 'ok'), 0) "
                "FROM runs r JOIN machines m ON m.id = r.machine_id "
                "LEFT JOIN trials t ON t.run_id = r.id "
                "GROUP BY r.id ORDER BY r.id DESC LIMIT ?", (limit,)).fetchall()
        return [RunSummary(*row) for row in rows]

    @staticmethod
    def _load(c: sqlite3.Connection, trial_id: int, run_id: int, spec: str,
              result: str) -> TrialResult:
        data = json.loads(result)
        data["spec"] = json.loads(spec)
        data["run_id"] = run_id
        # Before results carried their group, a run measured each workload in one group.
        data["group_id"] = data.get("group_id") or f"run{run_id}"
        samples = c.execute("SELECT round, seconds, replica FROM samples WHERE trial_id = ? "
                            "ORDER BY idx", (trial_id,)).fetchall()
        data["block_seconds"] = [s for _, s, _ in samples]
        data["block_rounds"] = [r for r, _, _ in samples if r is not None]
        # Untagged (every block by the first process) stays untagged.
        replicas = [int(k) for _, _, k in samples]
        data["block_replicas"] = replicas if any(replicas) else []
        return TrialResult.from_dict(data)


def _prepare_location(path: Path) -> None:
    """Fail early, with a clear line, on a location SQLite could not write."""
    if path.is_dir():
        raise StoreError(f"results database path is a directory: {path}",
                         fix=f"pass a file path, e.g. --db {path / 'results.db'}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the directory for results database {path} "
                         f"({exc.strerror or exc})",
                         fix="pass --db PATH in a writable directory") from None
    # WAL needs to create PATH-wal and PATH-shm beside the file.
    if not os.access(path.parent, os.W_OK | os.X_OK) or (
            path.exists() and not os.access(path, os.R_OK | os.W_OK)):
        raise StoreError(f"cannot write results database {path}",
                         why="the file or its directory is not writable",
                         fix="check the permissions, or pass --db PATH in a writable directory")


@dataclass
class RecordedRun:
    """A run being recorded: add trials with ``store``/``run_id``; ``summary`` (set it
    before the block ends) is kept with the run when it finishes."""

    store: ResultStore
    machine_id: int
    run_id: int
    summary: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)  # results kept aside, one line each

    def keep_trial(self, result: TrialResult) -> None:
        """Store a finished trial, retrying with backoff; if the database still refuses
        (disk full, locked), set it aside for the next open and say so in ``problems``:
        never raises a StoreError, so nothing measured is thrown away."""
        try:
            with_retry(lambda: self.store.add_trial(self.run_id, result))
        except StoreError as exc:
            aside = set_aside(self.store.path, {"kind": "trial", "run_id": self.run_id,
                                                "result": result.to_dict()})
            self.problems.append(kept_aside_note(self.store.path, exc, aside,
                                                 f"trial {result.spec.label}"))


@contextmanager
def recorded_run(db: str | Path | None, snapshot: EnvSnapshot, command: str,
                 options: dict[str, Any]) -> Iterator[RecordedRun]:
    """Open the store, record the machine and start a run; finish the run when the block
    ends normally (an exception or Ctrl-C leaves it unfinished: interrupted) and always
    close the store.

    Example:
        >>> with recorded_run(":memory:", EnvSnapshot(), "run", {}) as rec:
        ...     rec.run_id
        1
    """
    store = ResultStore.open(db)
    try:
        machine_id = store.add_machine(snapshot)
        run = RecordedRun(store, machine_id, store.start_run(machine_id, command, options))
        yield run
        try:
            with_retry(lambda: store.finish_run(run.run_id, summary=run.summary))
        except StoreError as exc:
            aside = set_aside(store.path, {"kind": "finish", "run_id": run.run_id,
                                           "summary": run.summary})
            run.problems.append(kept_aside_note(store.path, exc, aside,
                                                f"the end of run {run.run_id}"))
    finally:
        store.close()
