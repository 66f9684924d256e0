"""The jobs over the results store: list the runs (``history``), compare two of them
(``compare``), and move runs between machines (``export`` / ``import``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devicebench.schema import envelope


@dataclass(frozen=True)
class HistoryOutcome:
    """The newest runs in the store, newest first.

    Attributes:
        where: the store's file.
        rows: :class:`devicebench.store.runs.HistoryRow`, one per run.
        exists: False when no store file exists yet (a first look, before any run:
            nothing was created).
    """

    where: Path
    rows: tuple[Any, ...]
    exists: bool = True

    def to_dict(self) -> dict[str, Any]:
        return envelope("history", {"runs": [r.to_dict() for r in self.rows]})


def history(*, limit: int = 50, db: str | Path | None = None) -> HistoryOutcome:
    """The newest ``limit`` runs of the store (read-only; a missing default store is
    not created)."""
    from devicebench.store import ResultStore, default_db_path
    from devicebench.store.runs import run_history

    if db is None and not default_db_path().exists():  # a first look, before any run
        return HistoryOutcome(default_db_path(), (), exists=False)
    with ResultStore.open(db, read_only=True) as store:
        return HistoryOutcome(store.path, tuple(run_history(store, limit)))


def compare(run_a: int, run_b: int, *, workload: str | None = None,
            config_a: str | None = None, config_b: str | None = None,
            db: str | Path | None = None) -> Any:
    """The same workload and configuration in two stored runs
    (:func:`devicebench.results.compare.compare_runs`; its result has ``to_dict``)."""
    from devicebench.results.compare import compare_runs
    from devicebench.store import ResultStore

    with ResultStore.open(db, read_only=True) as store:
        return compare_runs(store, run_a, run_b, workload=workload, config_a=config_a,
                            config_b=config_b)


@dataclass(frozen=True)
class ExportOutcome:
    """The bundle written: where (None: not written, its JSON in ``text``), and which
    runs it holds."""

    path: Path | None
    run_ids: tuple[int, ...]
    text: str | None = None  # the bundle's JSON when ``out`` was None

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path) if self.path else None, "runs": list(self.run_ids)}


def export(runs: list[int], *, out: str | Path | None, db: str | Path | None = None
           ) -> ExportOutcome:
    """Write runs (raw results, machine snapshot) to a bundle file that ``import`` reads
    on another machine; each run once (``export 1 1 1``). ``out`` None: the bundle's
    JSON is returned in the outcome's ``text`` (``export -o -`` prints it)."""
    from devicebench.store import ResultStore
    from devicebench.store.bundle import bundle_json, export_runs, write_bundle

    with ResultStore.open(db, read_only=True) as store:
        bundle = export_runs(store, list(runs))  # each run once, in order
    ids = tuple(dict.fromkeys(runs))
    if out is None:
        return ExportOutcome(None, ids, bundle_json(bundle))
    write_bundle(bundle, out)
    return ExportOutcome(Path(out), ids)


def import_runs(bundle: str | Path, *, db: str | Path | None = None,
                text: str | None = None) -> Any:
    """Add the runs of a bundle to the store; runs already there are skipped, so
    importing twice adds nothing (:class:`devicebench.store.bundle.ImportResult`:
    ``added``, ``skipped`` run ids). ``text``: the bundle's JSON itself (``import -``
    reads it from stdin), ``bundle`` then only names its source."""
    from devicebench.store import ResultStore
    from devicebench.store.bundle import import_bundle, parse_bundle, read_bundle

    data = parse_bundle(text, str(bundle)) if text is not None else read_bundle(bundle)
    with ResultStore.open(db) as store:
        return import_bundle(store, data, source=Path(bundle).name)
