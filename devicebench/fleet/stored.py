"""A fleet job read back from the results store: its machines' runs, found by the fleet
id each run's options carry, as the facts the answer is built from."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from devicebench.errors import InputError
from devicebench.fleet.answer import MachineAnswer, MachineFacts, where_to_train
from devicebench.store import ResultStore
from devicebench.store.runs import load_run


@dataclass(frozen=True)
class StoredFleet:
    """One fleet job as stored: its id, workload, each machine's run id and facts."""

    fleet_id: str
    workload: str
    run_ids: list[int]
    machines: list[MachineFacts]

    def answer(self) -> list[MachineAnswer]:
        return where_to_train(self.machines)


def fleet_ids(store: ResultStore) -> list[str]:
    """Fleet jobs in the store, newest first."""
    rows = store.connection.execute("SELECT options FROM runs ORDER BY id DESC").fetchall()
    seen: list[str] = []
    for (options,) in rows:
        fid = (json.loads(options or "{}").get("fleet") or {}).get("id")
        if fid and fid not in seen:
            seen.append(fid)
    return seen


def load_fleet(store: ResultStore, fleet_id: str | None = None) -> StoredFleet:
    """The fleet job ``fleet_id`` (a prefix will do; None: the newest).

    Raises:
        InputError: no fleet job in the store, or none with that id.
    """
    ids = fleet_ids(store)
    match = [f for f in ids if fleet_id is None or f.startswith(fleet_id)]
    if not match:
        raise InputError(f"no fleet job {fleet_id or ''} in {store.path}".replace("  ", " "),
                         fix="run devicebench fleet advise WORKLOAD first" if not ids
                         else f"use one of: {', '.join(ids[:10])}")
    fid = match[0]
    run_ids = [int(r) for (r, options) in store.connection.execute(
        "SELECT id, options FROM runs ORDER BY id").fetchall()
        if (json.loads(options or "{}").get("fleet") or {}).get("id") == fid]
    machines, workload = [], ""
    for rid in run_ids:
        run = load_run(store, rid)
        fleet = run.summary.get("fleet", {}) if run.summary else run.options["fleet"]
        workload = run.options.get("workload", workload)
        gpus = run.machine.gpu
        label = f"{fleet.get('node', '?')} ({run.machine.cpu}" + (f", {gpus})" if gpus else ")")
        status = fleet.get("status", "running")
        if run.finished_at is None and status == "running":
            status = "interrupted"
        advice = {k: v for k, v in (run.summary or {}).items() if k != "fleet"} or None
        machines.append(MachineFacts(fleet.get("node", ""), label,
                                     run.machine.fingerprint, status,
                                     fleet.get("reason", ""),
                                     bool(fleet.get("user_machine")), advice, run.trials))
    return StoredFleet(fid, workload, run_ids, machines)


def load_fleet_at(db: str | Path | None = None, fleet_id: str | None = None) -> StoredFleet:
    """:func:`load_fleet` from the store at ``db`` (None: the default store)."""
    with ResultStore.open(db) as store:
        return load_fleet(store, fleet_id)
