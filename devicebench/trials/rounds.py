"""Pieces of an interleaved round that hold no group state: what one timed block adds
to a trial's record, and starting the extra worker processes (replicas) of a trial."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from devicebench.launch import Worker, WorkerFailure
from devicebench.trials.protocol import BlockReply, PrepareRequest
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec


def block_changes(r: TrialResult, reply: BlockReply, rnd: int, replica: int
                  ) -> dict[str, Any]:
    """The fields of ``r`` that one block of process ``replica`` in round ``rnd``
    changes. Warm-up, validation and block-length figures come from the trial's first
    process only (replica 0): a replica adds timed blocks, tagged with its number."""
    n = len(reply.block_seconds)
    changes: dict[str, Any] = {
        "block_seconds": r.block_seconds + tuple(reply.block_seconds),
        "block_rounds": r.block_rounds + (rnd,) * n}
    if replica or r.block_replicas:
        tags = r.block_replicas or (0,) * len(r.block_seconds)
        changes["block_replicas"] = tuple(tags) + (replica,) * n
    if replica == 0:
        if reply.warmup_seconds is not None:
            changes["warmup_seconds"] = reply.warmup_seconds
            changes["warmup_blocks"] = reply.warmup_blocks or 0
        if reply.validation_first_seconds is not None:
            changes["validation_first_seconds"] = reply.validation_first_seconds
        if reply.validation_seconds:
            changes["validation_seconds"] = (r.validation_seconds
                                             + tuple(reply.validation_seconds))
            changes["validation_rounds"] = (r.validation_rounds
                                            + (rnd,) * len(reply.validation_seconds))
        if reply.steps_per_block is not None:
            changes["steps_per_block"] = reply.steps_per_block
    return changes


def cut_as(reply: BlockReply, r: TrialResult) -> None:
    """Check that a later process's block has the trial's ``steps_per_block`` (a trial's
    blocks share one, and its step times are block seconds / that). A block cut another
    way would be read as a step time off by the ratio of the two cuts, so it is refused:
    the caller drops that process.

    Raises:
        WorkerFailure: ("error") the block has another number of steps.
    """
    k = reply.steps_per_block
    if k is not None and r.steps_per_block and k != r.steps_per_block:
        raise WorkerFailure("error", f"its block had {k} steps where the trial's first "
                            f"process cut {r.steps_per_block}: its times would not compare")


def set_blocks_apart(r: TrialResult) -> dict[str, Any]:
    """The fields of ``r`` that change when its blocks are cut another way from now on:
    the blocks so far kept apart as ``earlier_blocks`` (with their cut, length, rounds
    and replicas), the current ones emptied."""
    return {"earlier_blocks": {
        "cut": r.blocks_cut, "steps_per_block": r.steps_per_block,
        "block_seconds": list(r.block_seconds), "block_rounds": list(r.block_rounds),
        "block_replicas": list(r.block_replicas)},
        "block_seconds": (), "block_rounds": (), "block_replicas": ()}


def bounded_request(worker: Worker, message: dict[str, Any], timeout: float,
                    end: float | None, clock: Callable[[], float]) -> dict[str, Any]:
    """``worker.request(message)`` within ``timeout`` seconds and, when ``end`` is given,
    by that time on ``clock``: a reply not in by then stops the worker and raises a
    ``skipped`` WorkerFailure whose message starts with "budget" (a search's deadline,
    not a fault of the trial)."""
    if end is None:
        return worker.request(message, timeout=timeout)
    bound = max(1.0, end - clock())
    try:
        return worker.request(message, timeout=min(timeout, bound))
    except WorkerFailure as exc:
        if exc.status != "timeout" or bound >= timeout:
            raise
        raise WorkerFailure("skipped", f"budget: its set-up was stopped at the search's "
                            f"set-up deadline, {bound:.0f} s in") from None


Emit = Callable[[str, TrialSpec | None, dict[str, Any]], None]


def start_replicas(start_worker: Callable[[TrialSpec], Worker], wanted: dict[TrialSpec, int],
                   taken: dict[TrialSpec, list[int]], import_timeout: float, emit: Emit
                   ) -> list[tuple[TrialSpec, Worker, int]]:
    """Start ``wanted[spec]`` more workers per trial (their imports overlap) and wait for
    the imports; each gets the next free replica number after ``taken[spec]``. A worker
    that fails to start or import is killed and reported (``replica-failed``), never
    raised. Returns (spec, worker, replica) of those that imported."""
    new: list[tuple[TrialSpec, Worker, int]] = []
    for spec, more in wanted.items():
        for _ in range(max(0, more)):
            used = [*taken.get(spec, []), *(k for s, _w, k in new if s == spec)]
            k = 1 + max(used, default=0)
            try:
                w = start_worker(spec)
                w.send(PrepareRequest(spec).to_message())
            except WorkerFailure as exc:
                emit("replica-failed", spec, {"replica": k, "error": exc.message})
                continue
            new.append((spec, w, k))
            emit("replica", spec, {"replica": k})
    ready = []
    for spec, w, k in new:
        try:
            w.receive(timeout=import_timeout)
            ready.append((spec, w, k))
        except WorkerFailure as exc:
            w.kill()
            w.close()
            emit("replica-failed", spec, {"replica": k, "error": exc.message})
    return ready
