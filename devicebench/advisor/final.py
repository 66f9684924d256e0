"""The final comparison under the budget: the least a comparison needs first, then, from
what those rounds cost, the extra worker processes a verdict rests on and more rounds,
each started only when it can end before the budget.

The order matters on a slow machine. Planned before any round, the second processes of
seed-rnn's pair were estimated at 22 s and cost 52 s (a TensorFlow epoch in ``fit`` on a
loaded 2-core VM is ~2x its set-up steps' estimate, and every process warms up): advise
at 40 s took 68 s. Measured first, the rounds' real cost decides.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from devicebench.advisor.budget import (
    FINAL_MAX_ROUNDS,
    FINAL_MIN_ROUNDS,
    LEAST_ROUNDS,
    SearchBudget,
)
from devicebench.advisor.search import rejection, speedups
from devicebench.trials.options import RunOptions
from devicebench.trials.replication import MIN_PROCESSES, Replication, replicate_keys
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec

# The replicas' cost is estimated from rounds just measured (not, as replication's
# COST_MARGIN allows for, before any): it may take this share of what is left.
MEASURED_MARGIN = 0.95
PRECISE = RunOptions().target_ci  # the engine's own stop: every CI within this
Enough = Callable[[dict[TrialSpec, TrialResult]], bool]


def final_comparison(group, budget: SearchBudget, keys: list[TrialSpec],
                     enough: Enough, *, replicate: bool = True) -> Replication:
    """Measure ``group``'s live trials (the baseline and the finalists) to an answer.

    1. The least: LEAST_ROUNDS interleaved rounds (with each trial's warm-up), never cut.
    2. ``keys`` (what the verdict and headline rest on) in two or more worker processes
       each (:func:`devicebench.trials.replication.replicate_keys`), started only when
       their measured cost (import, set-up, warm-up, three rounds of every process at
       the blocks just measured) fits what the budget leaves after the search's end.
    3. More rounds, until ``enough`` says the answer is clear (after FINAL_MIN_ROUNDS
       rounds in all) or the next round would end past the budget.

    ``group`` is a :class:`~devicebench.trials.engine.TrialGroup` (or a replay's).
    ``replicate=False`` skips step 2 (one process each: what replication costs, for
    ``bench/advisor_regret.py``). Whatever the budget left out is recorded with
    ``budget.cut``; an answer still open at the end (the fastest candidate's CI spans
    1) is said too (:func:`undecided_line`). Returns what replication did.
    """
    def live() -> list[TrialResult]:
        return [group.results[s] for s in group.live]

    # What a round of the live trials costs, as measured: a round's wall time is more
    # than its blocks (validation passes, messages, a pipeline resuming); each later
    # plan uses the dearer of the two, scaled to the processes it will have.
    per_round = {"s": 0.0, "procs": 1}

    def measure(options, until) -> None:
        warm = {s for s in group.live if group.results[s].warmup_seconds is None}
        t0 = budget.clock()
        ran = group.measure(options, enough=until)
        if ran:
            warmup = sum(group.results[s].warmup_seconds or 0.0 for s in warm
                         if s in group.results)
            per_round["s"] = max(0.0, budget.clock() - t0 - warmup) / ran
            per_round["procs"] = sum(group.processes(s) for s in group.live) or 1

    def round_cost(processes: dict[TrialSpec, int]) -> float:
        scale = sum(processes.get(s, 1) for s in group.live) / per_round["procs"]
        return max(budget.round_seconds(live(), processes), per_round["s"] * scale)

    # Whole epochs (as fit runs them) unless they would not leave the least within the
    # budget: then blocks of K steps, which measure the same step in a fraction of it.
    epochs = budget.least_in_epochs(live())
    if epochs is not None and epochs > budget.rounds_left():
        budget.final_whole_epoch_s = 0.0
        budget.cut(f"budget was the limit: the final timed blocks of K steps, not whole "
                   f"epochs (about {epochs:.0f} s for its least rounds, "
                   f"{max(budget.rounds_left(), 0):.0f} s left)")
    with budget.phase("least rounds"):
        measure(budget.least_final_options(), None)
    seen = {s: group.processes(s) for s in group.live}

    def more() -> None:
        nonlocal seen
        now = {s: group.processes(s) for s in group.live}
        grew = any(n > seen.get(s, 0) for s, n in now.items())
        seen = now
        # New processes need rounds of their own: paid for when they were started.
        least = group.rounds_done + LEAST_ROUNDS if grew else group.rounds_done
        if not grew and round_cost(now) > budget.rounds_left():
            return  # not even one more round ends in time
        with budget.phase("final"):
            measure(budget.more_final_options(least),
                    lambda res: group.rounds_done >= FINAL_MIN_ROUNDS and enough(res))

    def replicas_cost(after: dict[TrialSpec, int], new: list[TrialResult]) -> float:
        blocks = budget.replication_cost(live(), after, new)
        # The rounds at the measured round cost where it is the dearer.
        extra = round_cost(after) - budget.round_seconds(live(), after)
        return blocks + LEAST_ROUNDS * max(0.0, extra)

    t0, rounds_before = budget.clock(), budget.phases.get("final", 0.0)
    if replicate:
        rep = replicate_keys(group, keys, left=budget.rounds_left, measure=more,
                             cost=replicas_cost, margin=MEASURED_MARGIN)
    else:
        more()
        rep = Replication({k: group.processes(k) for k in keys if k in group.live},
                          notes=["replication off: one worker process per configuration"])
    # Starting the extra processes: the call's time less the rounds measured inside it.
    budget.phases["replication"] = (budget.clock() - t0
                                    - (budget.phases.get("final", 0.0) - rounds_before))
    if rep.budget_limited:
        budget.cut(next((n for n in rep.notes if n.startswith("budget was the limit")),
                        "budget was the limit: fewer worker processes"))
    done = group.rounds_done
    precise = all((st := r.step_time) is not None and st.rel_ci_halfwidth <= PRECISE
                  for r in live())
    if done < FINAL_MIN_ROUNDS and group.live and not precise and not enough(group.results):
        line = (f"budget was the limit: the final comparison stopped after {done} "
                f"interleaved rounds (at least {FINAL_MIN_ROUNDS} wanted, until the answer "
                "is clear): its CIs are wider than they would be; raise --budget")
        budget.cut(line)
        rep.notes.append(line)
    elif keys and (line := undecided_line(group, keys[0], budget, round_cost, rep,
                                          replicas_cost, precise)):
        if line.startswith("budget was the limit"):
            budget.cut(line)
        rep.notes.append(line)
    return rep


def undecided_line(group, baseline: TrialSpec, budget: SearchBudget,
                   round_cost: Callable[[dict[TrialSpec, int]], float], rep: Replication,
                   replicas_cost: Callable[[dict[TrialSpec, int], list[TrialResult]], float],
                   precise: bool = False) -> str:
    """A line when the final ends with its fastest safe candidate faster than the
    baseline at the median but not significantly (its speed-up's CI spans 1): that it
    may be faster, by how much, and whether a larger budget could tell — from the
    CI's width, about ``n (half-width / (speed-up - 1))^2`` rounds (a CI narrows as
    the square root of its rounds) — when the budget stopped the rounds; when the
    final's round cap or its CIs' precision did, that the difference is within the
    run's noise. "" when there is nothing open."""
    open_ = [(q, s) for q, s in speedups(baseline, group.results,
                                         [s for s in group.live if s != baseline])
             if not rejection(group.results[s], baseline)]
    if not open_:
        return ""
    q, spec = max(open_, key=lambda p: p[0].value)
    if q.value <= 1 or q.ci_low > 1:
        return ""  # nothing faster, or decided (choose() weighs it)
    done = group.rounds_done
    said = (f"undecided: {spec.label} may be {q.value - 1:.0%} faster than "
            f"{baseline.label} ({q.value:.2f}x [95% CI {q.ci_low:.2f}-{q.ci_high:.2f}] over "
            f"{done} interleaved rounds), but not significantly: ")
    need = math.ceil(done * ((q.value - q.ci_low) / (q.value - 1)) ** 2)
    noise = "the difference is within this run's noise, so the baseline is kept"
    if done >= FINAL_MAX_ROUNDS or need > FINAL_MAX_ROUNDS:
        return said + (f"more than the final's {FINAL_MAX_ROUNDS} rounds would be needed "
                       f"to tell them apart (about {need} at this CI's width); {noise}")
    now = {s: group.processes(s) for s in group.live}
    if round_cost(now) <= budget.rounds_left():  # stopped with time left
        why = (f"every step time's CI was already within {PRECISE:.0%}" if precise
               else "the final's rounds ended with time left")
        return said + f"{why}; {noise}"
    after = dict(now)
    if not any(n.startswith("replication off") for n in rep.notes):
        after.update({k: max(now.get(k, 1), MIN_PROCESSES)
                      for k in rep.processes if k in group.live})
    new = [group.results[k] for k, n in after.items() for _ in range(n - now.get(k, 1))]
    extra = (replicas_cost(after, new) if new else 0.0) + (need - done) * round_cost(after)
    fits = 10 * math.ceil((budget.elapsed() + extra + budget.tail_s) / 10)
    return ("budget was the limit: " + said
            + f"at this CI's width about {need} rounds would tell (if the difference "
            f"holds): raise --budget (to about {fits} s)")
