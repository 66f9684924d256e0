"""The run job: measure training speed per configuration (the cross product of the
choices this machine can run), interleaved per workload, with loss equivalence; store
each trial. What ``devicebench run`` and :func:`devicebench.run` do."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devicebench.errors import InputError
from devicebench.progress import OnProgress, Reporter
from devicebench.schema import envelope

if TYPE_CHECKING:
    from devicebench.trials.result import TrialResult
    from devicebench.trials.summary import ComparisonRow

DEFAULT_WORKLOADS = ("seed-rnn",)


@dataclass(frozen=True)
class RunOutcome:
    """What :func:`run` measured and stored.

    Attributes:
        run_id: the store's run.
        rows: one per trial: the trials measured now, compared within their workload's
            interleaved group, then any reused by ``resume`` (shown as stored, never
            paired with the new ones).
        notes: skipped backends or precisions, reused results.
        store_problems: results the database would not take (disk full, locked past
            the retries), one line each: kept in a side file the next open imports, or
            only here when even that failed.
    """

    run_id: int
    rows: list[ComparisonRow]
    notes: list[str] = field(default_factory=list)
    store_problems: list[str] = field(default_factory=list)
    # Stability findings (devicebench.env.finding.Finding): processes that disagree,
    # wide spreads, too few rounds, other load on the machine.
    stability: list[Any] = field(default_factory=list)
    # The machine around the trials: load average and steal before/after, and the CPU's
    # own speed during them (devicebench.measure.cpuspeed), as stored with the run.
    load: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> list[TrialResult]:
        """The trials that did not end ``ok`` (their results stand, with the reason)."""
        return [r.result for r in self.rows if r.result.status != "ok"]

    def to_dict(self) -> dict[str, Any]:
        return envelope("run", {"run_id": self.run_id, "notes": self.notes,
                                "store_problems": self.store_problems,
                                "results": [r.to_dict() for r in self.rows],
                                "stability": [f.to_dict() for f in self.stability],
                                "load": self.load})


def run(
    workloads: list[str] | tuple[str, ...] | None = None,
    *,
    backends: list[str] | None = None,
    devices: list[str] | None = None,
    precisions: list[str] | None = None,
    jits: list[str] | None = None,
    batch_sizes: list[int | None] | None = None,
    pipelines: list[str] | None = None,
    threads: list[int | None] | None = None,
    steps_per_execution: int = 1,
    seed: int | None = None,
    rounds: int | None = None,
    budget: float = 60.0,
    equivalence_steps: int = 50,
    timeout: float = 300.0,
    memory_limit_mib: int | None = None,
    resume: bool = False,
    db: str | Path | None = None,
    on_progress: OnProgress | None = None,
    argv: list[str] | None = None,
    replicate: bool = True,
) -> RunOutcome:
    """Measure training speed per configuration (the cross product of the choices this
    machine can run), interleaved per workload, with loss equivalence; store each trial.
    What ``devicebench run`` does.

    Args:
        workloads: built-in names, ``"path/file.py:function"`` or a training script
            (``"train.py"``: its first fit(), captured as ``advise`` does); None:
            ``seed-rnn``.
        backends, devices, precisions, jits, batch_sizes, pipelines, threads: the
            choices (None: every installed backend, every device but mps, float32, auto,
            the workload's batch, arrays, all cores).
        rounds: a fixed number of interleaved rounds (None: until every CI is within
            ±3%, ``budget`` seconds or 30 rounds).
        resume: skip trials already measured on this machine with the same spec; their
            stored results come back as stored.
        timeout: seconds allowed for a trial's set-up or one block.
        on_progress: progress events (:mod:`devicebench.progress`), per workload: started,
            each set-up (k of n) and interleaved round, with the budget left; finished.
            Default: one line each on stderr when it is a terminal, else none.
        replicate: measure the reference, its accelerator/CPU partner and the likely
            winner in two or more worker processes each, as ``budget`` holds them (their
            CIs then cover a rerun in a fresh process); False: one process each.

    Raises:
        devicebench.errors.DevicebenchError: bad input (one clear message): an unknown
            workload, backend or device, a user workload that does not load or fit.
    """
    from devicebench.advisor.equivalence import loss_check
    from devicebench.env.probe import probe_host_layer
    from devicebench.measure.cpuspeed import CpuSpeedSampler
    from devicebench.measure.load import MachineLoad, read_load
    from devicebench.results.reruns import rerun_lines, with_rerun_spread
    from devicebench.store import recorded_run
    from devicebench.trials.engine import run_workload_group
    from devicebench.trials.epochs import fit_estimate
    from devicebench.trials.options import RunOptions
    from devicebench.trials.plan import plan_trials
    from devicebench.trials.stability import finding_line, stability_findings
    from devicebench.trials.summary import ComparisonRow, compare
    from devicebench.validate import check_run_request
    from devicebench.workloads.loader import check_workload_runs, validate_workload_ref
    from devicebench.workloads.script import capture_script, is_script_ref

    req = check_run_request(dict(  # every argument, before anything starts
        workloads=list(DEFAULT_WORKLOADS if workloads is None else workloads),
        backends=backends, devices=devices, precisions=precisions,
        jits=jits, batch_sizes=batch_sizes, pipelines=pipelines, threads=threads,
        steps_per_execution=steps_per_execution, seed=seed, rounds=rounds, budget=budget,
        equivalence_steps=equivalence_steps, timeout=timeout,
        memory_limit_mib=memory_limit_mib, resume=resume, db=db, argv=argv))
    names, backends, devices = req["workloads"], req["backends"], req["devices"]
    precisions, jits, pipelines = req["precisions"], req["jits"], req["pipelines"]
    batch_sizes, threads = req["batch_sizes"], req["threads"]
    # A training script: its first fit(), captured (or cached), as a workload reference;
    # shown under the script's name.
    shown = {capture_script(n).ref: n for n in names if is_script_ref(n)}
    names = [next((r for r, n in shown.items() if n == w), w) for w in names]
    for name in names:
        validate_workload_ref(name)
    snapshot = probe_host_layer()
    plan = plan_trials(
        snapshot, names, backends=backends, devices=devices, precisions=precisions,
        jits=jits, batch_sizes=batch_sizes, pipelines=pipelines, threads=threads,
        steps_per_execution=steps_per_execution, seed=seed)
    limit_bytes = memory_limit_mib * 2**20 if memory_limit_mib else None
    asked = sorted({b for b in batch_sizes or [] if b})
    for name in names:  # once per user workload, before any trial: type, NaN/Inf, dtype
        first = [s.backend for s in plan.specs if s.workload == name]
        if not first:
            continue
        # Within the run's own --timeout and --memory-limit; a built-in too when a batch
        # size is asked for, to learn how many samples it has.
        samples = check_workload_runs(name, first[0], timeout, fit=False,
                                      memory_limit_bytes=limit_bytes, builtin=bool(asked))
        if samples is not None and asked and asked[-1] > samples:
            raise InputError(f"batch size {asked[-1]:,} is larger than {name}'s {samples:,} "
                             "training samples",
                             why="Keras would train on batches of the whole data set, so "
                                 "the figures would be for a batch size that never ran",
                             fix=f"pass --batch-size {samples} or smaller")
    options = RunOptions(
        min_rounds=rounds or 5, max_rounds=rounds or 30, budget_seconds=budget,
        equivalence_steps=equivalence_steps, setup_timeout=timeout, block_timeout=timeout,
        memory_limit_bytes=memory_limit_mib * 2**20 if memory_limit_mib else None)
    results: list[TrialResult] = []
    stored: list[TrialResult] = []  # reused by resume: never paired with new ones
    notes = list(plan.notes) + [f"{n} was named more than once: measured once"
                                for n in req["repeated"]]
    with recorded_run(Path(db) if db else None, snapshot, "run",
                      {"argv": argv if argv is not None else []}) as rec, \
            CpuSpeedSampler() as sampler:  # the CPU's own speed while trials run
        store, machine, run_id = rec.store, rec.machine_id, rec.run_id
        load_before = read_load()
        done_keys = store.completed_specs(machine) if resume else set()
        for name in names:
            group = [s for s in plan.specs if s.workload == name]
            todo = [s for s in group if s.key not in done_keys]
            for s in group:
                prev = store.latest_result(machine, s.key) if s.key in done_keys else None
                if prev is not None:
                    stored.append(replace(prev, loss_verdict="stored", loss_detail=(
                        "measured in an earlier run (--resume): not compared with this "
                        "run's trials")))
                    notes.append(f"{name} {s.label}: stored result reused (--resume); it "
                                 "was measured in an earlier run, so it has no speed-up "
                                 "against this run's trials")
            if not todo:
                continue
            report = Reporter(f"run {shown.get(name, name)}", on_progress, budget_s=budget)
            report.started(f"{len(todo)} trials", total=len(todo))
            try:
                results += run_workload_group(
                    todo, options, on_event=report.trial_events(len(todo)),
                    on_result=rec.keep_trial, run_id=run_id,
                    loss_check=loss_check, replicate=replicate,
                    on_replication=lambda rep, n=name: notes.extend(
                        f"{n}: {line}" for line in rep.notes))
            finally:
                report.finished()
        speed = sampler.stop()
        load_after = read_load()
        findings = stability_findings(results, load_before, load_after, cpu_speed=speed)
        notes += [finding_line(f) for f in findings]
        load = MachineLoad(load_before, load_after, speed).to_dict()
        rec.summary = {"load": load,
                       "stability": [f.to_dict() for f in findings]}
        # Only trials measured together in this run are compared (their rounds
        # interleaved), their CIs widened by how far this machine's earlier runs of them
        # moved; stored ones are shown as they were stored, apart.
        measured = with_rerun_spread(compare(results), store, machine, run_id)
        notes += rerun_lines(measured)
    rows = measured + [ComparisonRow(r, False, None, fit_estimate(r)) for r in stored]
    rows = [replace(r, result=replace(r.result, spec=r.result.spec.with_(
        workload=shown[r.result.spec.workload]))) if r.result.spec.workload in shown else r
        for r in rows]
    return RunOutcome(run_id, rows, [_shown(n, shown) for n in notes], list(rec.problems),
                      findings, load)


def _shown(text: str, names: dict[str, str]) -> str:
    for ref, script in names.items():
        text = text.replace(ref, script)
    return text
