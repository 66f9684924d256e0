"""The SQLite results store: machines, runs, trials and their raw samples.

Example:
    >>> from devicebench.store import ResultStore
    >>> with ResultStore.open(":memory:") as store:
    ...     store.runs()
    []
"""

from devicebench.store.db import (
    RecordedRun,
    ResultStore,
    RunSummary,
    default_db_path,
    recorded_run,
)
from devicebench.store.fingerprint import machine_fingerprint
from devicebench.store.schema import CURRENT_SCHEMA

__all__ = [
    "CURRENT_SCHEMA",
    "RecordedRun",
    "ResultStore",
    "RunSummary",
    "default_db_path",
    "machine_fingerprint",
    "recorded_run",
]
