"""Opening a results database only to read it (issue 27, item 18): ``history``,
``report``, ``compare`` and ``export`` read a file another user shared read-only, and
never create one where none is (``--db nope/x.sqlite`` makes no directory).

Example:
    >>> connect_read_only(Path("missing.db"))  # doctest: +SKIP
    Traceback (most recent call last):
    InputError: no results database at missing.db ...
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from urllib.parse import quote

from devicebench.errors import InputError, StoreError
from devicebench.store.schema import CURRENT_SCHEMA, schema_version


def writable(path: Path) -> bool:
    """Whether this user may write ``path`` and its directory (WAL's -wal and -shm)."""
    return os.access(path, os.R_OK | os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)


def connect_read_only(path: Path) -> sqlite3.Connection | None:
    """A read-only connection to ``path`` when it cannot be written; None when it can
    (then the store opens it as usual: migrations, results set aside imported).

    Raises:
        InputError: no file there (nothing is created).
        StoreError: it is not a current devicebench database, or cannot be read.
    """
    if not path.exists():
        raise InputError(f"no results database at {path}",
                         fix="check --db (or $DEVICEBENCH_DB); `devicebench run` writes one")
    if path.is_dir() or writable(path):
        return None
    uri = f"file:{quote(str(path.resolve()))}"
    conn = None
    for mode in ("?mode=ro", "?immutable=1"):  # WAL without -shm needs immutable
        try:
            conn = sqlite3.connect(uri + mode, uri=True, isolation_level=None)
            found = schema_version(conn)
            break
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
            conn, error = None, exc
    if conn is None:
        raise StoreError(f"cannot read results database {path} ({error})",
                         fix="check the file's permissions: ls -l " + str(path))
    if found != CURRENT_SCHEMA:
        conn.close()
        what = "newer than this devicebench" if found > CURRENT_SCHEMA else "older"
        raise StoreError(f"results database {path} has schema version {found} ({what}; "
                         f"this devicebench reads {CURRENT_SCHEMA}) and is read-only",
                         why="an older file is migrated in place, which needs write access",
                         fix=f"copy it somewhere writable (cp {path} x.db) and pass --db x.db")
    return conn
