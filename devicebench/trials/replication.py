"""How many worker processes the configurations a verdict rests on get, and what the
caller says about it.

The unit of replication is the process: on the project's 2-core VM five reruns of one
configuration gave 3.6-7.8 ms/step, each with a within-run CI of a few per cent, so a
CI from one process's rounds does not say what a rerun gives. The configurations a
verdict or headline depends on (the baseline, its accelerator/CPU partner, the winner)
are measured in :data:`MIN_PROCESSES` processes, interleaved in time with the others;
when their processes disagree beyond their own CIs, one more process is added (up to
:data:`MAX_PROCESSES`) while the budget holds it. The CI then comes from a hierarchical
bootstrap across processes and rounds (:func:`devicebench.measure.stats.hierarchical_summary`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from devicebench.measure.stats import summarize
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec

MIN_PROCESSES = 2
MAX_PROCESSES = 4
# A replica is started only when its estimated cost is within this share of what is
# left: the estimate comes from the first processes' costs, and a live advise at 40 s
# on a loaded 2-core VM overran by 39% with the estimate taken at face value.
COST_MARGIN = 0.85


@dataclass
class Replication:
    """What replication did: processes per configuration, what the budget stopped, and
    lines for the output."""

    processes: dict[TrialSpec, int] = field(default_factory=dict)
    budget_limited: bool = False
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"processes": {s.label: n for s, n in self.processes.items()},
                "budget_limited": self.budget_limited, "notes": list(self.notes)}


def process_cis(r: TrialResult) -> dict[int, tuple[float, float]]:
    """Each process's own 95% CI of its median step time (replica -> (low, high))."""
    return {k: (s.ci_low, s.ci_high) for k, v in r.samples_by_process.items()
            if v and (s := summarize(v))}


def processes_disagree(r: TrialResult) -> bool:
    """True when two of ``r``'s processes have 95% CIs that do not overlap: each
    process's CI describes that process only, and a rerun lands elsewhere."""
    cis = list(process_cis(r).values())
    return any(a[1] < b[0] or b[1] < a[0] for i, a in enumerate(cis) for b in cis[i + 1:])


def replica_cost(results: Iterable[TrialResult]) -> float:
    """Seconds to start one more process for each of ``results`` (imports overlap: the
    slowest import, then each set-up in turn: build, compile, the first step and the
    fewest equivalence steps; warm-up apart), from what their first processes cost."""
    rs = [r for r in results if r.status == "ok"]
    if not rs:
        return 0.0
    imports = max((r.import_seconds or 0.0) for r in rs)
    setups = sum((r.setup_seconds or 0.0) + (r.first_step_seconds or 0.0)
                 + 10 * (r.setup_step_seconds or 0.0) for r in rs)
    return imports + setups


def replicate_keys(group: Any, keys: list[TrialSpec], *, left: Callable[[], float],
                   cost: Callable[[dict[TrialSpec, int], list[TrialResult]], float],
                   measure: Callable[[], Any],
                   max_processes: int = MAX_PROCESSES,
                   margin: float = COST_MARGIN) -> Replication:
    """Give ``keys`` (live trials of ``group``, a
    :class:`~devicebench.trials.engine.TrialGroup`) :data:`MIN_PROCESSES` processes each,
    then one more (up to ``max_processes``) to those whose processes disagree, each
    step only while ``cost(processes after, one result per new process)`` (starting
    them, their warm-up and the rounds they need) fits in ``left()`` seconds;
    ``measure()`` runs the caller's rounds after each step (once, if none fits);
    ``margin``: the share of ``left()`` a cost estimate may take.
    Returns what was done and what the budget stopped.
    """
    out = Replication()
    keys = [k for k in dict.fromkeys(keys) if k in group.live
            and group.results[k].status == "ok"]
    want = {k: MIN_PROCESSES for k in keys}
    measured = False
    while want:
        counts = {k: group.processes(k) for k in group.live}
        after = {**counts, **want}
        extra = [group.results[k] for k, n in want.items() for _ in range(n - counts[k])]
        need = cost(after, extra)
        if need > margin * left():
            out.budget_limited = True
            labels = ", ".join(k.label for k in want)
            have = min(counts[k] for k in want)
            out.notes.append(
                f"budget was the limit: {labels} measured in {have} worker "
                f"process{'es' if have > 1 else ''} each, not "
                f"{max(want.values())} (about {need:.0f} s more, "
                f"{max(left(), 0):.0f} s left); a rerun may differ by more than the CI "
                "says: raise --budget")
            break
        got = group.replicate(want)
        measure()
        measured = True
        short = [k for k, n in got.items() if n < want[k]]
        if short:
            out.notes.append(f"{', '.join(k.label for k in short)}: a replica process "
                             "failed; measured in fewer processes")
        want = {k: group.processes(k) + 1 for k in keys
                if k in group.live and processes_disagree(group.results[k])
                and group.processes(k) < max_processes}
    if not measured:
        measure()
    for k in keys:
        r = group.results[k]
        out.processes[k] = r.processes
        if r.processes > 1 and processes_disagree(r):
            out.notes.append(
                f"{k.label}: its {r.processes} processes disagree beyond their own CIs "
                f"(medians {r.process_spread:.0%} apart); the CI spans them")
    return out


def verdict_keys(reference: TrialSpec, results: dict[TrialSpec, TrialResult]) -> list[TrialSpec]:
    """What a comparison's verdict and headline rest on before any round: the reference,
    its accelerator/CPU partner, and the fastest by set-up steps (the likely winner)."""
    from devicebench.trials.headline import device_partner

    ok = [s for s, r in results.items() if r.status == "ok"]
    partner = device_partner(reference, ok)
    timed = [s for s in ok if results[s].setup_step_seconds]
    fastest = min(timed, key=lambda s: results[s].setup_step_seconds, default=None)
    return [k for k in dict.fromkeys([reference, partner, fastest]) if k is not None]


def measure_replicated(group: Any, options: Any, enough: Any = None, *,
                       clock: Callable[[], float],
                       on_replication: Callable[[Replication], None] | None = None) -> None:
    """``run``'s rounds with its verdict's configurations (:func:`verdict_keys`) in two
    or more processes each, started before the first round so every process has all
    rounds; processes are started only while their cost fits
    ``options.budget_seconds``. A fixed ``--rounds N`` gets two processes at most (a
    third would need rounds beyond N). ``group`` is a
    :class:`~devicebench.trials.engine.TrialGroup`."""
    from dataclasses import replace

    start = clock()
    left = lambda: options.budget_seconds - (clock() - start)  # noqa: E731

    def cost(after: dict[TrialSpec, int], new: list[TrialResult]) -> float:
        def block(r: TrialResult) -> float:
            est = (r.setup_step_seconds or 0.0) * max(r.steps_per_epoch, 1)
            return max(est, max(r.block_seconds, default=0.0), 0.01)
        live = [group.results[s] for s in group.live]
        rounds = max(3, options.min_rounds)
        return (replica_cost(new) + sum(2 * block(r) for r in new)
                + rounds * sum(block(r) * after.get(r.spec, 1) for r in live))

    def measure() -> None:
        more = group.rounds_done + 3 if group.rounds_done else options.min_rounds
        group.measure(replace(options, min_rounds=max(options.min_rounds, more),
                              max_rounds=max(options.max_rounds, more),
                              budget_seconds=max(1.0, left())), enough)

    keys = verdict_keys(group.reference, {s: group.results[s] for s in group.live})
    fixed = options.min_rounds == options.max_rounds  # --rounds N: no rounds beyond N
    rep = replicate_keys(group, keys, left=left, cost=cost, measure=measure,
                         max_processes=MIN_PROCESSES if fixed else MAX_PROCESSES)
    if on_replication is not None:
        on_replication(rep)
