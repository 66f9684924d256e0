"""Results the database would not take, kept aside (issue 27, item 2).

A store failure at commit time — the disk full, another process holding the write lock
past the busy timeout — must not throw away what was measured. A write is retried with
backoff; if it still fails, the record goes to a side file beside the database,
``RESULTS.db.pending.jsonl`` (one JSON object a line), which the next
:meth:`devicebench.store.ResultStore.open` of that database imports and removes. The
caller is told each time (a note to show), and still has the results in memory to print.

This module never imports the store itself: it is handed the store's bound methods.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from devicebench.errors import StoreError

T = TypeVar("T")
RETRY_DELAYS_S = (0.5, 1.0, 2.0)  # backoff between attempts, after each busy timeout
MEMORY = ":memory:"


def pending_path(db_path: str | Path) -> Path:
    """The side file of the database at ``db_path``."""
    return Path(f"{db_path}.pending.jsonl")


def with_retry(write: Callable[[], T], delays: tuple[float, ...] | None = None,
               sleep: Callable[[float], None] = time.sleep) -> T:
    """``write()``, tried again after each delay while it raises StoreError; the last
    StoreError is raised."""
    for delay in (RETRY_DELAYS_S if delays is None else delays):
        try:
            return write()
        except StoreError:
            sleep(delay)
    return write()


def set_aside(db_path: str, record: dict[str, Any]) -> Path | None:
    """Append ``record`` to the side file; the file, or None when it cannot be written
    (an in-memory database, or the disk really is full)."""
    if db_path == MEMORY:
        return None
    path = pending_path(db_path)
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, sort_keys=True, default=str) + "\n")
            fh.flush()
    except OSError:
        return None
    return path


def import_pending(db_path: str, add_trial: Callable[[int, Any], int],
                   finish_run: Callable[[int, dict[str, Any] | None], None],
                   load_result: Callable[[dict[str, Any]], Any]) -> int:
    """Import the side file of ``db_path`` (if any) through the store's own writers and
    remove it; lines that still fail are kept for the next open. Returns how many
    records were imported."""
    path = pending_path(db_path)
    if db_path == MEMORY or not path.is_file():
        return 0
    # Taken away first (atomic): a run setting results aside meanwhile starts a new file.
    taken = path.with_name(f"{path.name}.{os.getpid()}")
    try:
        os.replace(path, taken)
        text = taken.read_text(encoding="utf-8")
    except OSError:
        return 0
    kept: list[str] = []
    done = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            if rec["kind"] == "trial":
                add_trial(int(rec["run_id"]), load_result(rec["result"]))
            elif rec["kind"] == "finish":
                finish_run(int(rec["run_id"]), rec.get("summary"))
            done += 1
        except (StoreError, ValueError, KeyError, TypeError):
            kept.append(line)
    try:
        if kept:  # back for the next open, beside anything set aside meanwhile
            with open(path, "a", encoding="utf-8") as fh:
                fh.write("\n".join(kept) + "\n")
        taken.unlink()
    except OSError:
        pass
    return done


def kept_aside_note(db_path: str, exc: StoreError, aside: Path | None, what: str) -> str:
    """The one line that tells the user where ``what`` went."""
    if aside is not None:
        return (f"{what} could not be stored in {db_path} ({exc.what}); it is kept in "
                f"{aside}, which the next devicebench command on that database imports")
    return (f"{what} could not be stored in {db_path} ({exc.what}), nor set aside: it is "
            "printed here only — fix: rerun with --json to keep the figures, after "
            f"{exc.fix or 'freeing the database'}")
