"""Bundles: runs moved between machines as one JSON file (``devicebench export`` /
``devicebench import``).

A bundle holds, per run, the machine row (fingerprint, identity, the whole snapshot),
the run row (command, times, options) and its raw results (trials with every timed
block and its round; op-sweep workers with every block). Statistics are not stored:
they are recomputed from the raw blocks on the importing side, so a comparison made
after import is the comparison made before export.

A run's identity is its machine fingerprint, start time and command: importing the
same bundle twice (or a bundle of runs already here) adds nothing.

Example:
    >>> from devicebench.store import ResultStore
    >>> with ResultStore.open(":memory:") as store:
    ...     import_bundle(store, {"format": BUNDLE_FORMAT, "schema_version": 1, "runs": []})
    ImportResult(added=[], skipped=[])
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from devicebench.errors import InputError
from devicebench.store.bundle_check import check_bundle_runs
from devicebench.store.db import ResultStore
from devicebench.store.monitor import (
    MONITOR_COMMAND,
    add_monitor_blocks,
    load_monitor_blocks,
    monitor_blocks_from_bundle,
)
from devicebench.store.ops import add_ops_result
from devicebench.store.runs import StoredRun, load_run

BUNDLE_FORMAT = "devicebench-bundle"
BUNDLE_SCHEMA = 1


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def run_to_bundle_entry(run: StoredRun) -> dict[str, Any]:
    """One run as a bundle entry (raw data only)."""
    m = run.machine
    options = {k: v for k, v in run.options.items()}
    return {
        "origin_run_id": run.id,
        "command": run.command,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "options": options,
        "machine": {"fingerprint": m.fingerprint, "cpu": m.cpu, "gpu": m.gpu, "os": m.os,
                    "python": m.python, "frameworks": m.frameworks,
                    "created_at": m.created_at, "snapshot": m.snapshot.to_dict()},
        "trials": [t.to_dict() for t in run.trials],
        "ops": [w.to_dict() for w in run.ops],
    }


def export_runs(store: ResultStore, run_ids: list[int]) -> dict[str, Any]:
    """A bundle (a JSON-able dict) of the given runs, each once (``export 1 1 1``
    exports run 1 once: a bundle holds runs, not requests).

    Raises:
        InputError: a run id is not in this database.
    """
    from devicebench import __version__

    runs = []
    for rid in dict.fromkeys(run_ids):  # each run once, in order
        entry = run_to_bundle_entry(load_run(store, rid))
        if entry["command"] == MONITOR_COMMAND:  # a monitored fit: its timed blocks
            entry["monitor_blocks"] = load_monitor_blocks(store, rid)
        runs.append(entry)
    return {"format": BUNDLE_FORMAT, "schema_version": BUNDLE_SCHEMA,
            "devicebench_version": __version__, "exported_at": _now(), "runs": runs}


def bundle_json(bundle: dict[str, Any]) -> str:
    """The text of a bundle file (what :func:`write_bundle` writes)."""
    return json.dumps(bundle, indent=1, sort_keys=True, default=str)


def write_bundle(bundle: dict[str, Any], path: str | Path) -> None:
    """Write ``bundle`` as JSON to ``path``.

    Raises:
        InputError: the file cannot be written.
    """
    try:
        Path(path).write_text(bundle_json(bundle))
    except OSError as exc:
        raise InputError(f"cannot write bundle {path}: {exc.strerror or exc}",
                         fix="pass -o PATH in a writable directory") from None


def read_bundle(path: str | Path) -> dict[str, Any]:
    """Read and check a bundle file.

    Raises:
        InputError: missing, not JSON, not a devicebench bundle, or from a newer version.
    """
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise InputError(f"bundle file not found: {p}",
                         fix="pass the path `devicebench export RUN -o FILE` wrote") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read bundle {p}: {exc}", fix="pass a readable file") from None
    return parse_bundle(text, str(p))


def parse_bundle(text: str, where: str = "bundle") -> dict[str, Any]:
    """A bundle from its JSON text (a file's, or stdin's for ``import -``), checked.

    Raises:
        InputError: not JSON, not a devicebench bundle, or from a newer version.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where} is not JSON (line {exc.lineno}: {exc.msg})",
                         why="a bundle is the JSON file `devicebench export` writes",
                         fix="export it again with `devicebench export RUN -o FILE`") from None
    check_bundle(data, where)
    return data


def check_bundle(data: Any, where: str = "bundle") -> None:
    """Raise :class:`InputError` unless ``data`` is a bundle this version can import."""
    if not isinstance(data, dict) or data.get("format") != BUNDLE_FORMAT:
        raise InputError(f"{where} is not a devicebench bundle (no \"format\": "
                         f"\"{BUNDLE_FORMAT}\")",
                         fix="pass a file written by `devicebench export RUN -o FILE`")
    version = data.get("schema_version")
    if not isinstance(version, int) or version > BUNDLE_SCHEMA:
        raise InputError(f"{where} has bundle schema version {version!r}; this devicebench "
                         f"reads up to {BUNDLE_SCHEMA}",
                         why="it was written by a newer devicebench",
                         fix="upgrade devicebench (pip install -U devicebench)")
    if not isinstance(data.get("runs"), list):
        raise InputError(f"{where} has no list of runs", fix="export it again")


@dataclass
class ImportResult:
    """Run ids added by an import, and the runs that were already here (origin -> id)."""

    added: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)


def _machine_id(store: ResultStore, m: dict[str, Any]) -> int:
    with store._write("adding an imported machine") as c:
        c.execute(
            "INSERT INTO machines (fingerprint, cpu, gpu, os, python, frameworks, snapshot, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(fingerprint) DO NOTHING",
            (m["fingerprint"], m["cpu"], m.get("gpu", ""), m.get("os", ""),
             m.get("python", ""), json.dumps(m.get("frameworks", {}), sort_keys=True),
             json.dumps(m["snapshot"], sort_keys=True), m.get("created_at") or _now()))
        row = c.execute("SELECT id FROM machines WHERE fingerprint = ?",
                        (m["fingerprint"],)).fetchone()
    return int(row[0])


def _existing_run(store: ResultStore, fingerprint: str, started_at: str,
                  command: str) -> int | None:
    with store._read("looking for an imported run") as c:
        row = c.execute(
            "SELECT r.id FROM runs r JOIN machines m ON m.id = r.machine_id "
            "WHERE m.fingerprint = ? AND r.started_at = ? AND r.command = ?",
            (fingerprint, started_at, command)).fetchone()
    return int(row[0]) if row else None


def import_bundle(store: ResultStore, bundle: dict[str, Any],
                  source: str = "bundle") -> ImportResult:
    """Add the bundle's runs to ``store``; runs already present are skipped.

    Each trial and op worker is committed as it is written; if one fails, the half-
    imported run is deleted again (with its rows), so no partial run is left behind.

    Raises:
        InputError: the bundle is malformed (the message names the run, the trial and
            the field); every field is checked before anything is written.
    """
    check_bundle(bundle, source)
    out = ImportResult()
    checked = []  # every run read and checked before anything is written
    for i, (entry, trials, ops) in enumerate(check_bundle_runs(bundle["runs"], source)):
        try:
            blocks = monitor_blocks_from_bundle(entry.get("monitor_blocks"))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{source}: run {i + 1}, monitor_blocks cannot be read "
                             f"({type(exc).__name__}: {exc})",
                             fix="export it again with `devicebench export`") from None
        checked.append((entry, trials, ops, blocks))
    for entry, trials, ops, blocks in checked:
        m = entry["machine"]
        command, started, fingerprint = entry["command"], entry["started_at"], m["fingerprint"]
        existing = _existing_run(store, fingerprint, started, command)
        if existing is not None:
            out.skipped.append(existing)
            continue
        machine_id = _machine_id(store, m)
        options = dict(entry.get("options") or {})
        options["imported_from"] = source
        options["origin_run_id"] = entry.get("origin_run_id")
        with store._write("importing a run") as c:
            cur = c.execute(
                "INSERT INTO runs (machine_id, started_at, finished_at, command, options) "
                "VALUES (?, ?, ?, ?, ?)",
                (machine_id, started, entry.get("finished_at"), command,
                 json.dumps(options, sort_keys=True, default=str)))
            run_id = int(cur.lastrowid or 0)
        try:
            for t in trials:
                store.add_trial(run_id, t)
            for w in ops:
                add_ops_result(store, run_id, w)
            add_monitor_blocks(store, run_id, blocks, 0)
        except BaseException:
            with store._write("undoing a partial import") as c:
                c.execute("DELETE FROM runs WHERE id = ?", (run_id,))
            raise
        out.added.append(run_id)
    return out
