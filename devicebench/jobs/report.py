"""The report job: one stored run's figures, ready to render (terminal, Markdown, HTML)
or serialise (``to_dict``). What ``devicebench report`` reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def report(run: int | None = None, *, ops_run: int | None = None,
           db: str | Path | None = None) -> Any:
    """The report of stored run ``run`` (None: the newest run with results), with the
    fullest of the same machine's recent op sweeps (or ``ops_run``) beside a training
    run (:class:`devicebench.results.run_report.RunReport`; read-only on the store).

    Raises:
        devicebench.errors.DevicebenchError: no such run, an empty store, a store that
            cannot be read.
    """
    from devicebench.results.run_report import build_report
    from devicebench.store import ResultStore

    with ResultStore.open(db, read_only=True) as store:
        return build_report(store, run, ops_run_id=ops_run)
