"""Read a whole stored run back: its machine (with the snapshot), options, trials and
op-sweep results, tied to the run they were measured in.

Example:
    >>> from devicebench.store import ResultStore
    >>> with ResultStore.open(":memory:") as store:
    ...     latest_run_id(store) is None
    True
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from devicebench.env.snapshot import EnvSnapshot
from devicebench.errors import InputError
from devicebench.ops.result import OpsWorkerResult
from devicebench.store.db import ResultStore
from devicebench.store.ops import load_ops_results
from devicebench.trials.result import TrialResult
from devicebench.workloads.script import captured_script

TRAINING_COMMANDS = ("run", "advise")
MONITOR_COMMAND = "monitor"  # as devicebench.store.monitor writes it


@dataclass(frozen=True)
class StoredMachine:
    """A ``machines`` row: the fingerprint, the human-readable identity and the snapshot."""

    id: int
    fingerprint: str
    cpu: str
    gpu: str
    os: str
    python: str
    frameworks: dict[str, str]
    snapshot: EnvSnapshot
    created_at: str

    def identity(self) -> dict[str, Any]:
        """What a cross-machine comparison lists when it differs."""
        return {"cpu": self.cpu, "gpu": self.gpu or "none", "os": self.os,
                "python": self.python, "frameworks": dict(self.frameworks)}


@dataclass
class StoredRun:
    """One run as stored: who measured it where, and everything it measured.

    ``trials`` and ``ops`` carry ``run_id``: results of different runs are never mixed
    (each run's trials were measured in their own interleaved rounds).
    """

    id: int
    command: str
    started_at: str
    finished_at: str | None
    options: dict[str, Any]
    machine: StoredMachine
    trials: list[TrialResult] = field(default_factory=list)
    ops: list[OpsWorkerResult] = field(default_factory=list)

    @property
    def summary(self) -> dict[str, Any] | None:
        """What the command recorded at the end (``advise``: its advice), if anything."""
        s = self.options.get("summary")
        return s if isinstance(s, dict) else None

    @property
    def imported_from(self) -> str:
        """The bundle this run came from ("" when measured in this database)."""
        return str(self.options.get("imported_from") or "")

    @property
    def label(self) -> str:
        return f"run {self.id} ({self.command}, {self.started_at[:16]}, {self.machine.cpu}" + (
            f", {self.machine.gpu})" if self.machine.gpu else ")")


def _no_run(store: ResultStore, run_id: int) -> InputError:
    return InputError(f"no run {run_id} in {store.path}",
                      fix="list the runs with `devicebench history` (and pass the same --db)")


def load_machine(store: ResultStore, machine_id: int) -> StoredMachine:
    """The machine row ``machine_id`` with its snapshot."""
    with store._read("reading a machine") as c:
        row = c.execute("SELECT id, fingerprint, cpu, gpu, os, python, frameworks, snapshot, "
                        "created_at FROM machines WHERE id = ?", (machine_id,)).fetchone()
        if row is None:
            raise InputError(f"no machine {machine_id} in {store.path}",
                             fix="pass the --db the run was stored in")
        mid, fp, cpu, gpu, os_, py, fws, snap, created = row
        return StoredMachine(int(mid), fp, cpu, gpu, os_, py, json.loads(fws),
                             EnvSnapshot.from_dict(json.loads(snap)), created)


def load_run(store: ResultStore, run_id: int) -> StoredRun:
    """Everything run ``run_id`` recorded.

    Raises:
        InputError: no such run in this database.
        StoreError: the database cannot be read.
    """
    with store._read("reading a run") as c:
        row = c.execute("SELECT id, machine_id, command, started_at, finished_at, options "
                        "FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        raise _no_run(store, run_id)
    rid, machine_id, command, started, finished, options = row
    with store._read("reading a run"):
        opts = json.loads(options) if options else {}
    return StoredRun(int(rid), command, started, finished, opts, load_machine(store, machine_id),
                     store.trials_for_run(int(rid)), load_ops_results(store, int(rid)))


def latest_run_id(store: ResultStore, commands: tuple[str, ...] | None = None,
                  machine_id: int | None = None) -> int | None:
    """The newest run (optionally of ``commands``, on ``machine_id``) that stored results
    (trials, an op sweep, or a monitored fit's blocks)."""
    sql = ("SELECT r.id FROM runs r WHERE (EXISTS (SELECT 1 FROM trials t WHERE t.run_id = r.id)"
           " OR EXISTS (SELECT 1 FROM ops_runs o WHERE o.run_id = r.id)"
           " OR EXISTS (SELECT 1 FROM monitor_blocks b WHERE b.run_id = r.id))")
    args: list[Any] = []
    if commands:
        sql += f" AND r.command IN ({', '.join('?' for _ in commands)})"
        args.extend(commands)
    if machine_id is not None:
        sql += " AND r.machine_id = ?"
        args.append(machine_id)
    with store._read("finding the newest run") as c:
        row = c.execute(sql + " ORDER BY r.id DESC LIMIT 1", args).fetchone()
    return int(row[0]) if row else None


@dataclass(frozen=True)
class HistoryRow:
    """One line of ``devicebench history``: a run, where it ran, what it stored."""

    id: int
    command: str
    started_at: str
    finished_at: str | None
    cpu: str
    gpu: str
    fingerprint: str
    trials: int
    ok: int
    ops_workers: int
    workloads: tuple[str, ...]
    imported_from: str
    # A monitored fit (command "monitor"): script, argv, fit, blocks, steps,
    # steady_step_seconds, ended; None for other runs.
    monitor: dict[str, Any] | None = None
    # A run of a captured training script (`run train.py`, `advise train.py`): per such
    # workload, the script, its arguments and the capture directory the trials loaded.
    scripts: tuple[dict[str, Any], ...] = ()

    def workload_labels(self) -> list[str]:
        """The workloads, a captured script's as ``train.py -- ARGS (capture DIR)``."""
        by_ref = {s["workload"]: s for s in self.scripts}
        out = []
        for w in self.workloads:
            s = by_ref.get(w)
            if s is None:
                out.append(w)
                continue
            args = (" -- " + " ".join(s["args"])) if s.get("args") else ""
            gone = "" if s.get("capture_exists") else ", since deleted"
            out.append(f"{s.get('script') or '(script unknown)'}{args} "
                       f"(capture {s['capture_dir']}{gone})")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "command": self.command, "started_at": self.started_at,
                "finished_at": self.finished_at, "interrupted": self.finished_at is None,
                "machine": {"cpu": self.cpu, "gpu": self.gpu, "fingerprint": self.fingerprint},
                "trials": self.trials, "ok": self.ok, "ops_workers": self.ops_workers,
                "workloads": list(self.workloads), "imported_from": self.imported_from,
                "monitor": self.monitor, "scripts": [dict(s) for s in self.scripts]}


def monitor_digest(options: dict[str, Any], blocks: int, steps: int) -> dict[str, Any]:
    """What history shows of a monitored fit: its script, which fit, steps, steady step
    time and how it ended (``blocks``/``steps``: what the store holds of it)."""
    argv = [str(a) for a in options.get("argv") or []]
    summary = options.get("summary") if isinstance(options.get("summary"), dict) else {}
    script = argv[0].replace("\\", "/").rsplit("/", 1)[-1] if argv else ""
    return {"script": script or "(interactive)", "argv": argv, "fit": options.get("fit"),
            "blocks": blocks, "steps": int(summary.get("steps") or steps),
            "steady_step_seconds": summary.get("steady_step_seconds"),
            "ended": str(options.get("ended") or ("completed" if summary else "unknown"))}


def run_history(store: ResultStore, limit: int = 50) -> list[HistoryRow]:
    """The newest ``limit`` runs, newest first, with what each stored."""
    with store._read("listing runs") as c:
        rows = c.execute(
            "SELECT r.id, r.command, r.started_at, r.finished_at, m.cpu, m.gpu, m.fingerprint,"
            " r.options, (SELECT count(*) FROM trials t WHERE t.run_id = r.id),"
            " (SELECT count(*) FROM trials t WHERE t.run_id = r.id AND t.status = 'ok'),"
            " (SELECT count(*) FROM ops_runs o WHERE o.run_id = r.id),"
            " (SELECT count(*) FROM monitor_blocks b WHERE b.run_id = r.id),"
            " (SELECT coalesce(sum(b.steps), 0) FROM monitor_blocks b WHERE b.run_id = r.id) "
            "FROM runs r JOIN machines m ON m.id = r.machine_id "
            "ORDER BY r.id DESC LIMIT ?", (limit,)).fetchall()
        out = []
        for rid, cmd, started, finished, cpu, gpu, fp, opts, n, ok, nops, nb, nsteps in rows:
            specs = c.execute("SELECT spec FROM trials WHERE run_id = ? ORDER BY id",
                              (rid,)).fetchall()
            workloads = tuple(dict.fromkeys(json.loads(s)["workload"] for (s,) in specs))
            options = json.loads(opts) if opts else {}
            digest = (monitor_digest(options, int(nb), int(nsteps))
                      if cmd == MONITOR_COMMAND else None)
            scripts = tuple(s for w in workloads if (s := captured_script(w)) is not None)
            out.append(HistoryRow(int(rid), cmd, started, finished, cpu, gpu, fp, int(n),
                                  int(ok), int(nops), workloads,
                                  str(options.get("imported_from") or ""), digest, scripts))
    return out


def earlier_results(store: ResultStore, machine_id: int, spec_keys: Iterable[str],
                    before_run: int, limit: int = 10) -> dict[int, dict[str, TrialResult]]:
    """The ``ok`` trials of ``spec_keys`` on this machine in the newest ``limit`` runs
    before ``before_run`` that measured any of them: run id -> spec key -> trial (a
    run's last trial of a key when it measured one twice), newest run first."""
    keys = sorted(set(spec_keys))
    if not keys:
        return {}
    marks = ",".join("?" * len(keys))
    with store._read("reading earlier runs' trials") as c:
        runs = [r[0] for r in c.execute(
            "SELECT DISTINCT t.run_id FROM trials t JOIN runs r ON r.id = t.run_id "
            f"WHERE r.machine_id = ? AND t.run_id < ? AND t.status = 'ok' AND "
            f"t.spec_key IN ({marks}) ORDER BY t.run_id DESC LIMIT ?",
            (machine_id, before_run, *keys, limit)).fetchall()]
        out: dict[int, dict[str, TrialResult]] = {}
        for run_id in runs:
            rows = c.execute(
                "SELECT id, run_id, spec, result, spec_key FROM trials WHERE run_id = ? "
                f"AND status = 'ok' AND spec_key IN ({marks}) ORDER BY id",
                (run_id, *keys)).fetchall()
            out[run_id] = {key: store._load(c, *row) for *row, key in rows}
    return out

