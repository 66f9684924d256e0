"""The SQLite results store: machines, runs, trials and their raw samples.

Example:
    >>> from devicebench.store import ResultStore
    >>> with ResultStore.open(":memory:") as store:
    ...     store.runs()
    []
"""

from devicebench.store.db import ResultStore, RunSummary, default_db_path
from devicebench.store.fingerprint import machine_fingerprint
from devicebench.store.schema import CURRENT_SCHEMA

__all__ = [
    "CURRENT_SCHEMA",
    "ResultStore",
    "RunSummary",
    "default_db_path",
    "machine_fingerprint",
]
