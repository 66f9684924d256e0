"""How much speed does ``advise`` leave on the table, and how much time does it save?

For each workload: ``advise`` under its default budget (timed), then an exhaustive
interleaved sweep of the same candidate space (timed): every candidate set up as advise
sets up its trials (same equivalence check, same warm-up) and measured together with
the stopping rule of advise's final comparison (at least 6 rounds, until every CI is
within 3% or 30 rounds; no time budget) — what measuring everything as carefully as
advise measures its finalists costs. Regret = the sweep's best safe speed / the speed
of advise's pick in the same sweep - 1. Targets: regret <= 5%, advise's time <= 25%
of the sweep's.

``--replication both`` also runs advise with its final in one worker process per
configuration (``replicate=False``, a library option, no CLI flag) and prints what
replication (two or more processes for what the verdict rests on, issue 25) cost:
its seconds and points of the sweep's time, and whether the pick changed.

Live (this machine):    python bench/advisor_regret.py [WORKLOAD ...] [--budget SECONDS]
On a machine profile:   python bench/advisor_regret.py --profile h200 [--budget 40]
  (a shipped name or a file from `devicebench profile record`): advise and the sweep are
  both replayed from the profile's recorded figures on its virtual clock, so the times
  are the profiled machine's; candidates the profile lacks are absent from both.
"""

from __future__ import annotations

import argparse
import time

from devicebench.advisor.advice import advise_workload, default_baseline
from devicebench.advisor.facts import workload_facts
from devicebench.advisor.search import rejection
from devicebench.env.probe import probe_host_layer
from devicebench.jobs import default_of
from devicebench.jobs.advise_any import advise
from devicebench.measure.stats import paired_ratio
from devicebench.profiles import load_profile
from devicebench.profiles.record import sweep, sweep_space
from devicebench.profiles.replay import VirtualClock, replay_advise, replay_launcher
from devicebench.workloads import get_workload

DEFAULT_BUDGET_S = default_of(advise, "budget")  # advise's own
SWEEP_BUDGET_S = 3600.0  # no budget in practice: CIs or 30 rounds end the sweep
STALL = 3.0  # a block over 3x its trial's median block: a stall (see stall_seconds)


def stall_seconds(results) -> float:
    """Seconds that blocks over STALL x their trial's median block added. Here those are
    TensorFlow's input pipeline resuming after a pause (a trial waits while the others
    measure; tf.data's autotuned prefetch then stalls its first step, CPU idle, for
    seconds): an artifact of interleaving that a user's uninterrupted fit never sees."""
    total = 0.0
    for r in results:
        if len(r.block_seconds) >= 3:
            med = sorted(r.block_seconds)[len(r.block_seconds) // 2]
            total += sum(b - med for b in r.block_seconds if b > STALL * med)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workloads", nargs="*", default=["seed-rnn", "mnist-cnn"])
    ap.add_argument("--budget", default=None,
                    help="advise's budget in seconds, or several, comma-separated, each "
                    "judged against the same sweep (default: 40 — the main job's — and "
                    f"{DEFAULT_BUDGET_S:g} — advise's — live; 40 on a profile)")
    ap.add_argument("--profile", help="replay on a machine profile instead of measuring")
    ap.add_argument("--replication", choices=("on", "off", "both"), default="on",
                    help="advise's final with replication (the default, as shipped), "
                    "without (one worker process per configuration), or both, with "
                    "what replication cost")
    args = ap.parse_args()
    profile = load_profile(args.profile) if args.profile else None
    try:
        budgets = ([float(b) for b in args.budget.split(",")] if args.budget
                   else [40.0] if profile else [40.0, DEFAULT_BUDGET_S])
    except ValueError:
        ap.error(f"--budget: seconds, comma-separated (got {args.budget!r})")
    budget = max(budgets)  # the sweep's block timeouts
    snap = profile.env_snapshot() if profile else probe_host_layer()
    names = [w for w in args.workloads if profile is None or w in profile.workloads]
    if profile is not None:
        print(f"profile {profile.name}: {profile.label}"
              + (" (derived from published figures)" if profile.derived else ""))
    for name in names:
        get_workload(name)  # an unknown name: a clear error before any work
        baseline = default_baseline(snap, name)[0]
        runs = []  # (budget, replicated, advice, seconds, its trials' results)
        modes = {"on": [True], "off": [False], "both": [True, False]}[args.replication]
        for b in budgets:
            for rep in modes:
                advised: list = []
                if profile is not None:
                    advice, advise_s = replay_advise(profile, name, budget_s=b,
                                                     baseline=baseline, replicate=rep)
                else:
                    t0 = time.monotonic()
                    advice = advise_workload(
                        name, snap, baseline=baseline, budget_s=b,
                        equivalence_steps=default_of(advise, "equivalence_steps"),
                        facts=workload_facts(name), on_result=advised.append,
                        replicate=rep)
                    advise_s = time.monotonic() - t0
                runs.append((b, rep, advice, advise_s, advised))
        if profile is not None:
            clock = VirtualClock()
            out = sweep(sweep_space(name, snap, baseline), budget_s=budget,
                        start_worker=replay_launcher(profile, clock), clock=clock)
        else:
            out = sweep(sweep_space(name, snap, baseline), budget_s=budget)
        advice = runs[0][2]
        space = list(out["results"])
        setup_s, rounds = out["setup_s"], out["rounds"]
        print(f"{name}: {advice.headline.text if advice.headline else ''}")
        by = out["results"]
        safe = {s: r.step_time.median for s, r in by.items()
                if r.step_time is not None and not rejection(r, baseline)}
        best = min(safe, key=safe.get)
        if profile is not None:
            held = [s for s in space if by[s].status != "skipped"]
            if len(held) < len(space):
                print(f"{name}: the profile holds {len(held)} of the {len(space)} "
                      "configurations; the others cost nothing in the sweep or in advise, so "
                      "the share below is over the held ones only (advise must measure at "
                      "least the headline pair; a real sweep would measure the rest too)")
        print(f"{name}: sweep of {len(space)} configurations: set-up {setup_s:.0f} s, "
              f"{rounds} interleaved rounds: best {best.label} {safe[best] * 1e3:.3g} ms/step",
              flush=True)
        picks = {run[2].recommended or baseline for run in runs}
        if profile is not None and picks != {best} \
                and (rec := profile.record(best)) is not None and rec.origin != "measured":
            print(f"{name}: the sweep's best, {best.label}, is a {rec.origin} figure in the "
                  f"profile (one median, {rec.step_seconds[0] * 1e3:.3g} ms, served for "
                  "every block): a regret against it rests on the other side's recorded "
                  "blocks alone, and its CI on their spread")
        # Screening's figure (set-up steps, one trial after another) against the sweep's
        # (interleaved blocks): how far off a "4x slower" from the set-up steps can be.
        print(f"    {'configuration':<45} {'ms/step':>9} {'set-up ms/step':>15} "
              f"{'vs best: set-up':>16} {'interleaved':>12}")
        best_setup = by[best].setup_step_seconds
        for s in sorted(safe, key=safe.get):
            su = by[s].setup_step_seconds
            print(f"    {s.label:<45} {safe[s] * 1e3:9.3g} "
                  f"{su * 1e3 if su else float('nan'):15.3g} "
                  f"{su / best_setup if su and best_setup else float('nan'):15.1f}x "
                  f"{safe[s] / safe[best]:11.1f}x", flush=True)
        for s, r in by.items():
            if s not in safe:
                print(f"    {s.label:<45} rejected: {rejection(r, baseline)[:80]} "
                      f"(after {len(r.block_seconds)} timed blocks)")
                if r.status in ("timeout", "crashed") and r.stderr_tail.strip():
                    print("        its stderr ends: "
                          + r.stderr_tail.strip()[-400:].replace("\n", "\n        "))
        for b, rep, advice, advise_s, advised in runs:
            report(name, b, advice, advise_s, advised, baseline, out, safe, best,
                   replicated=rep)
        if args.replication == "both":
            for b in budgets:
                on, off = (next(r for r in runs if r[0] == b and r[1] is m)
                           for m in (True, False))
                replication_cost(name, b, on, off, out["seconds"], safe, baseline)


def replication_cost(name, budget, on, off, sweep_s, safe, baseline) -> None:
    """What replication cost advise at ``budget``: seconds, points of the sweep's time,
    processes, and the pick with and without it."""
    (_, _, a_on, s_on, _), (_, _, a_off, s_off, _) = on, off
    procs = (max(a_on.replication.processes.values(), default=1)
             if a_on.replication else 1)
    picks = [a.recommended or baseline for a in (a_on, a_off)]
    regrets = [f"{safe[p] / min(safe.values()) - 1:.1%}" if p in safe else "n/a"
               for p in picks]
    rounds = [max((len(r.result.round_step_times) for r in a.rows), default=0)
              for a in (a_on, a_off)]
    how = (f"up to {procs} processes per key configuration" if procs > 1
           else "no second process: the budget held none")
    print(f"{name} at {budget:g} s: replication ({how}) cost {s_on - s_off:+.0f} s of "
          "advise's time "
          f"({s_on / sweep_s:.0%} vs {s_off / sweep_s:.0%} of the sweep's); final rounds "
          f"{rounds[0]} vs {rounds[1]}; pick {picks[0].label} (regret {regrets[0]}) vs "
          f"{picks[1].label} (regret {regrets[1]})", flush=True)


def report(name, budget, advice, advise_s, advised, baseline, out, safe, best,
           replicated: bool = True) -> None:
    """Advise's pick at ``budget`` against the sweep: regret, time share, stalls."""
    by, sweep_s = out["results"], out["seconds"]
    name = f"{name} at {budget:g} s" + ("" if replicated else ", one process each")
    pick = advice.recommended or baseline
    if pick not in safe:
        print(f"{name}: advise picked {pick.label}, which the sweep could not confirm")
        return
    screened = [o.spec.label for o in advice.outcomes if o.screened]
    print(f"{name}: advise screened out {len(screened)} of {len(advice.outcomes)} "
          f"candidates on their set-up steps: {', '.join(screened) or '-'}")
    regret = safe[pick] / safe[best] - 1
    ratio = advise_s / sweep_s
    # The sweep's own paired CI of best vs pick: a regret the sweep's 30 interleaved
    # rounds cannot tell from 0 is reported as such (still judged by the medians).
    ci = paired_ratio(by[pick].round_step_times, by[best].round_step_times) \
        if pick != best else None
    sig = ""
    if ci is not None:  # pick / best per round: regret + 1
        sig = (f" [sweep's 95% CI {ci.ci_low - 1:+.1%} to {ci.ci_high - 1:+.1%} over "
               f"{ci.n_rounds} rounds" + (": not significant, the sweep cannot tell them "
                                          "apart either]" if not ci.significant else "]"))
    print(f"{name}: advise picked {pick.label} ({advice.verdict[:80]}...)\n"
          f"{name}: regret {regret:.1%}{sig} "
          f"({'within' if regret <= 0.05 else 'OUTSIDE'} 5%); "
          f"advise took {advise_s:.0f} s vs sweep {sweep_s:.0f} s = {ratio:.0%} "
          f"({'within' if ratio <= 0.25 else 'OUTSIDE'} 25%)", flush=True)
    stall_a, stall_s = stall_seconds(advised), stall_seconds(by.values())
    print(f"{name}: stalled blocks (> {STALL:g}x their trial's median) added "
          f"{stall_a:.0f} s to advise and {stall_s:.0f} s to the sweep; without them "
          f"{advise_s - stall_a:.0f} s vs {sweep_s - stall_s:.0f} s = "
          f"{(advise_s - stall_a) / (sweep_s - stall_s):.0%}", flush=True)


if __name__ == "__main__":
    main()
