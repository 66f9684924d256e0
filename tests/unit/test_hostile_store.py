"""Hostile input, round two (issue 27): the results store's part — a store failure
at commit time, bundle import, reading without writing. Each test reproduces one defect;
the end-to-end reproductions are in tests/integration/test_faults_hostile.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

# -- 2. a store failure at commit time keeps what was measured --------------------------

def _result(label_workload: str = "seed-rnn"):
    from devicebench.trials.result import TrialResult
    from devicebench.trials.spec import TrialSpec

    return TrialResult(spec=TrialSpec(label_workload, backend="jax"), status="ok",
                       block_seconds=(0.5, 0.25), block_rounds=(0, 1), steps_per_block=10)


def test_a_locked_store_sets_the_trial_aside_and_the_next_open_imports_it(tmp_path,
                                                                          monkeypatch):
    import sqlite3

    from devicebench.env.snapshot import EnvSnapshot
    from devicebench.store import ResultStore, db, pending, recorded_run

    monkeypatch.setattr(db, "BUSY_TIMEOUT_MS", 50)
    monkeypatch.setattr(pending, "RETRY_DELAYS_S", (0.01, 0.02))
    path = tmp_path / "r.db"
    holder = None
    with recorded_run(path, EnvSnapshot(), "run", {}) as rec:
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")  # another process keeps the write lock
        rec.keep_trial(_result())  # no StoreError: set aside
    assert len(rec.problems) == 2, rec.problems  # the trial, then the run's end
    assert "is locked" in rec.problems[0] and "r.db.pending.jsonl" in rec.problems[0]
    side = pending.pending_path(path)
    assert [json.loads(ln)["kind"] for ln in side.read_text().splitlines()] == \
        ["trial", "finish"]
    holder.execute("ROLLBACK")
    holder.close()
    with ResultStore.open(path) as store:  # the next open imports the side file
        trials = store.trials_for_run(rec.run_id)
        assert [tuple(t.block_seconds) for t in trials] == [(0.5, 0.25)]
        assert store.runs()[0].finished_at is not None
    assert not side.exists()


def test_a_full_disk_is_said_to_be_full(tmp_path, monkeypatch):
    import sqlite3

    from devicebench.store import db

    monkeypatch.setattr(db, "_disk_full", lambda path: True)
    exc = db._error(sqlite3.OperationalError("disk I/O error"), str(tmp_path / "x.db"),
                    "opening")
    assert "the disk is full" in exc.message and "permissions" not in exc.message
    full = db._error(sqlite3.OperationalError("database or disk is full"), "x.db", "adding")
    assert "the disk is full" in full.message


# -- 3. a bundle is checked, field by field, before anything is written -----------------

BUNDLE = Path(__file__).resolve().parents[1] / "fixtures" / "bundles" / "h200.json"


def _trial_bundle() -> dict:
    bundle = json.loads(BUNDLE.read_text())
    entry = next(r for r in bundle["runs"] if r["trials"])
    return {**bundle, "runs": [entry]}


@pytest.mark.parametrize("change, needle", [
    ({"block_seconds": [-5.0]}, "trial 1: block_seconds[0] must be positive, got -5.0"),
    ({"block_seconds": [float("nan")]}, "block_seconds[0] is nan"),
    ({"block_seconds": "fast"}, "block_seconds must be a list of numbers"),
    ({"block_seconds": [], "block_rounds": []}, "block_seconds is empty for an ok trial"),
    ({"status": "weird"}, "status is 'weird', not one of ok, error"),
    ({"block_rounds": [-1]}, "block_rounds must be a list of non-negative integers"),
    ({"batch_size": "32"}, "batch_size must be a non-negative integer"),
    (None, "trial 1: must be an object, got None"),
])
def test_a_bad_trial_in_a_bundle_is_refused_and_nothing_is_written(change, needle):
    from devicebench.errors import InputError
    from devicebench.store import ResultStore
    from devicebench.store.bundle import import_bundle

    bundle = _trial_bundle()
    entry = bundle["runs"][0]
    entry["trials"] = [dict(entry["trials"][0], **change) if change else None,
                       *entry["trials"][1:]]
    with ResultStore.open(":memory:") as store:
        with pytest.raises(InputError, match=re.escape(needle)) as info:
            import_bundle(store, bundle, source="b.json")
        assert "b.json: run 1" in info.value.message and "pass --db NEW.db" not in \
            info.value.message
        assert store.runs() == []  # nothing half-written


@pytest.mark.parametrize("change, needle", [
    ({"started_at": 12345}, "run 1: started_at must be an ISO time string, got 12345"),
    ({"started_at": "yesterday"}, "started_at is not an ISO time"),
    ({"trials": {"a": 1}}, "trials must be a list"),
    ({"options": [1]}, "options must be an object"),
    ({"command": None}, "command must be a command name"),
])
def test_a_bad_run_entry_in_a_bundle_names_its_field(change, needle):
    from devicebench.errors import InputError
    from devicebench.store import ResultStore
    from devicebench.store.bundle import import_bundle

    bundle = _trial_bundle()
    bundle["runs"][0].update(change)
    with ResultStore.open(":memory:") as store, \
            pytest.raises(InputError, match=re.escape(needle)):
        import_bundle(store, bundle)


def test_a_good_bundle_still_imports_whole():
    from devicebench.store import ResultStore
    from devicebench.store.bundle import import_bundle

    bundle = json.loads(BUNDLE.read_text())
    with ResultStore.open(":memory:") as store:
        assert len(import_bundle(store, bundle).added) == len(bundle["runs"])


# -- 18 and 19: reading a store never writes one; export names each run once ------------

def _store_with_a_run(path: Path) -> int:
    from devicebench.env.snapshot import EnvSnapshot
    from devicebench.store import recorded_run

    with recorded_run(path, EnvSnapshot(), "run", {}) as rec:
        rec.keep_trial(_result())
    return rec.run_id


def test_a_read_only_store_is_read_and_never_written(tmp_path, monkeypatch):
    from devicebench.errors import StoreError
    from devicebench.store import ResultStore, readonly
    from devicebench.store.runs import run_history

    path = tmp_path / "shared.db"
    run_id = _store_with_a_run(path)
    monkeypatch.setattr(readonly, "writable", lambda p: False)  # as another user sees it
    with ResultStore.open(path, read_only=True) as store:
        assert [r.id for r in run_history(store)] == [run_id]
        with pytest.raises(StoreError, match="cannot write"):
            store.start_run(1, "run", {})


def test_reading_a_missing_store_creates_nothing(tmp_path):
    from devicebench.errors import InputError
    from devicebench.store import ResultStore

    with pytest.raises(InputError, match="no results database at"):
        ResultStore.open(tmp_path / "nope" / "x.sqlite", read_only=True)
    assert not (tmp_path / "nope").exists()


def test_export_names_each_run_once():
    from devicebench.store import ResultStore
    from devicebench.store.bundle import export_runs

    with ResultStore.open(":memory:") as store:
        run_id = _store_with_a_run_in(store)
        assert len(export_runs(store, [run_id, run_id, run_id])["runs"]) == 1


def _store_with_a_run_in(store) -> int:
    from devicebench.env.snapshot import EnvSnapshot

    machine = store.add_machine(EnvSnapshot())
    run_id = store.start_run(machine, "run", {})
    store.add_trial(run_id, _result())
    store.finish_run(run_id)
    return run_id


def test_a_set_aside_record_that_still_fails_is_kept_for_the_next_open(tmp_path):
    from devicebench.store import ResultStore, pending

    path = tmp_path / "r.db"
    ResultStore.open(path).close()
    side = pending.pending_path(path)
    orphan = {"kind": "trial", "run_id": 999, "result": _result().to_dict()}  # no run 999
    side.write_text(json.dumps(orphan) + "\n" + "not json\n")
    with ResultStore.open(path) as store:
        assert store.runs() == []
    assert [json.loads(ln)["run_id"] for ln in side.read_text().splitlines()
            if ln.startswith("{")] == [999]
    assert sorted(p.name for p in tmp_path.iterdir() if "pending" in p.name) == [side.name]
