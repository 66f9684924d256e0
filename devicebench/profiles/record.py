"""Record a machine profile: an exhaustive interleaved sweep of the advisor's candidate
space, kept with its raw samples, so the advisor can later be judged on this machine by
replay (and on other machines by their profiles).

The sweep sets every candidate up as ``advise`` sets up its trials (same equivalence
check, same warm-up), then measures all of them together with the stopping rule of
advise's final comparison (at least 6 rounds, until every CI is within 3% or
``max_rounds``) — what measuring everything as carefully as advise measures its
finalists costs. ``bench/advisor_regret.py`` uses the same sweep, live or replayed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from devicebench.advisor.budget import FINAL_MIN_ROUNDS, SearchBudget
from devicebench.advisor.candidates import candidate_space, is_compute_heavy
from devicebench.advisor.equivalence import loss_check
from devicebench.env.snapshot import EnvSnapshot
from devicebench.profiles.profile import MachineProfile, TrialRecord
from devicebench.progress import OnProgress, Reporter
from devicebench.trials.engine import RunOptions, TrialGroup, Worker
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec
from devicebench.workloads import get_workload


def record_from_result(r: TrialResult, source: str, imported_with: int = 1,
                       cores: int | None = None) -> TrialRecord:
    """A live trial's result as a profile record (raw per-block step times kept). Its
    import ran beside ``imported_with`` others' on ``cores`` cores: the record keeps one
    import alone, t x cores / imports (CPU-bound imports share the cores), and a replay
    charges it again for as many imports at once as it starts."""
    share = min(1.0, (cores or imported_with) / max(imported_with, 1))
    steps = r.step_samples
    if r.status == "ok" and not steps and r.setup_step_seconds:
        steps = [r.setup_step_seconds]  # set up, never timed: its set-up figure
    losses = r.equivalence_losses
    return TrialRecord(
        spec=r.spec, origin="measured", source=source,
        status=r.status if (r.status != "ok" or steps) else "error",
        error=r.error or ("" if steps else "no step time measured"),
        import_seconds=(r.import_seconds or 0.0) * share,
        setup_seconds=r.setup_seconds or 0.0,
        first_step_seconds=r.first_step_seconds, warmup_seconds=r.warmup_seconds or 0.0,
        step_seconds=steps, setup_step_seconds=r.setup_step_seconds,
        batch_size=r.batch_size, steps_per_epoch=max(r.steps_per_epoch, 1),
        flops_per_step=r.flops_per_step, loss_steps=list(range(1, len(losses) + 1)),
        equivalence_losses=list(losses), loss_verdict=r.loss_verdict,
        final_loss=r.final_loss, input_seconds_per_batch=r.input_seconds_per_batch,
        peak_device_memory_bytes=r.peak_device_memory_bytes,
        peak_rss_bytes=r.peak_rss_bytes, jit_resolved=r.jit_resolved,
        placement=r.placement, data_note=r.data_note)


def sweep_space(workload: str, snapshot: EnvSnapshot, baseline: TrialSpec) -> list[TrialSpec]:
    """The baseline and every candidate advise could try for ``workload`` here."""
    w = get_workload(workload)
    return [baseline, *candidate_space(
        baseline, snapshot, workload_batch_size=w.batch_size,
        compute_heavy=is_compute_heavy(w.flops_per_step(), w.tags))]


def sweep(specs: list[TrialSpec], *, budget_s: float = 120.0, equivalence_steps: int = 20,
          max_rounds: int = 30, start_worker: Callable[[TrialSpec], Worker] | None = None,
          clock: Callable[[], float] = time.monotonic,
          on_result: Callable[[TrialResult], None] | None = None,
          on_event: Callable[[str, TrialSpec | None, dict[str, Any]], None] | None = None,
          ) -> dict[str, Any]:
    """Set every spec up (set-up settings of an advise with ``budget_s``) and measure
    them all interleaved until every CI is within 3% or ``max_rounds`` rounds.

    Returns:
        ``{"results": {spec: TrialResult}, "setup_s": ..., "seconds": ..., "rounds": ...}``
        on ``clock``.
    """
    budget = SearchBudget(budget_s, clock=clock)
    options = budget.group_options(equivalence_steps)
    t0 = clock()
    with TrialGroup(specs[0], options, equivalence_seconds=budget.equivalence_seconds,
                    on_result=on_result, clock=clock, start_worker=start_worker,
                    loss_check=loss_check, on_event=on_event) as group:
        group.add(specs)
        setup_s = clock() - t0
        # advise's final stopping rule, without a time budget.
        rounds = group.measure(RunOptions(min_rounds=FINAL_MIN_ROUNDS, max_rounds=max_rounds,
                                          budget_seconds=3600.0,
                                          block_timeout=budget.block_timeout))
        group.finish()
    return {"results": dict(group.results), "setup_s": setup_s,
            "seconds": clock() - t0, "rounds": rounds}


def record_profile(name: str, label: str, snapshot: EnvSnapshot, workloads: list[str], *,
                   baseline_for: Callable[[str], TrialSpec], budget_s: float = 120.0,
                   equivalence_steps: int = 20, max_rounds: int = 12,
                   figures: dict[str, dict[str, Any]] | None = None,
                   on_progress: OnProgress | None = None) -> MachineProfile:
    """An exhaustive sweep of each workload's candidate space on this machine, kept as a
    profile (see :mod:`devicebench.profiles.profile`). ``on_progress``: per workload,
    each set-up (k of n) and interleaved round (of at most N), and a note with what the
    sweep took (:mod:`devicebench.progress`)."""
    records: dict[str, list[TrialRecord]] = {}
    notes = []
    for w in workloads:
        specs = sweep_space(w, snapshot, baseline_for(w))
        report = Reporter(f"profile record {w}", on_progress)
        report.started(f"{len(specs)} configurations", total=len(specs))
        out = sweep(specs, budget_s=budget_s, equivalence_steps=equivalence_steps,
                    max_rounds=max_rounds, on_event=report.trial_events(len(specs)))
        source = f"devicebench profile record ({time.strftime('%Y-%m-%d')})"
        cores = snapshot.host.cpu_cores_logical
        records[w] = [record_from_result(r, source, len(specs), cores)
                      for r in out["results"].values()]
        note = (f"{w}: {len(specs)} configurations, set-up {out['setup_s']:.0f} s, "
                f"{out['rounds']} interleaved rounds, {out['seconds']:.0f} s in all")
        notes.append(note)
        report.note(note)
        report.finished()
    return MachineProfile(name=name, label=label, snapshot=snapshot.to_dict(),
                          workloads=records, figures=dict(figures or {}), notes=notes)
