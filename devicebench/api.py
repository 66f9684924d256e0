"""The Python API: the same results the CLI renders."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from devicebench.errors import InputError
from devicebench.jobs import default_of  # noqa: F401  (re-exported)
from devicebench.jobs.doctor import DoctorResult, doctor  # noqa: F401  (re-exported)
from devicebench.schema import envelope
from devicebench.trials.engine import RunOptions
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec
from devicebench.trials.summary import ComparisonRow


def _as_ref(workload_or_model: Any, data: tuple[Any, Any] | None, tmp: Path) -> str:
    """A workload reference worker processes can load."""
    if isinstance(workload_or_model, str | Path):
        ref = str(workload_or_model)
        if data is None:
            return ref
        if not ref.endswith(".keras"):
            raise InputError("data= goes with a Keras model or a .keras file",
                             fix="a workload function provides its own data")
        model_path = ref
    elif hasattr(workload_or_model, "save") and hasattr(workload_or_model, "inputs"):
        model = workload_or_model
        if getattr(model, "optimizer", None) is None or getattr(model, "loss", None) is None:
            raise InputError("the model is not compiled",
                             fix="call model.compile(loss=..., optimizer=...) first")
        model_path = str(tmp / "model.keras")
        model.save(model_path)
    else:
        raise InputError(
            f"cannot advise on a {type(workload_or_model).__name__}",
            fix="pass a built-in name, 'path/file.py:function', a .keras path or a compiled "
                "keras.Model")
    if data is None:
        return model_path
    x, y = (np.asarray(a) for a in data)
    if len(x) != len(y):
        raise InputError(f"data does not fit: x has {len(x)} samples, y has {len(y)}",
                         fix="pass data=(x, y) with one target per sample")
    if hasattr(workload_or_model, "inputs"):
        expected = tuple(workload_or_model.inputs[0].shape[1:])
        if len(expected) != x.ndim - 1 or any(
                e is not None and e != g for e, g in zip(expected, x.shape[1:], strict=False)):
            raise InputError(f"data does not fit the model: x has shape {x.shape[1:]} per "
                             f"sample, the model expects {expected}",
                             fix="reshape x to the model's input shape")
    data_path = tmp / "data.npz"
    np.savez(data_path, x=x, y=y)
    return f"{model_path}::{data_path}"


def advise(
    workload_or_model: Any,
    data: tuple[Any, Any] | None = None,
    *,
    budget: float = 120.0,
    baseline: str | None = None,
    allow_batch_change: bool = False,
    epochs: int | None = None,
    db: str | Path | None = None,
    progress: bool = False,
    script_args: list[str] | None = None,
):
    """Find the fastest safe way to train a workload or model on this machine.

    Args:
        workload_or_model: a training script (``"train.py"``: run up to its first
            ``fit()``, with ``script_args`` as its arguments; the result is a
            :class:`devicebench.jobs.advise_script.ScriptAdvice`, whose ``.patch.diff``
            is the change to the script), a built-in workload name,
            ``"path/file.py:function"``, a
            ``.keras`` path, or a compiled ``keras.Model`` (saved to a temporary file so
            worker processes can load it on every backend).
        data: ``(x, y)`` training arrays for a model (default: synthesised from its
            signature).
        budget: seconds for the search and the final comparison.
        baseline: your current configuration, e.g. ``"backend=tensorflow,device=gpu:0"``.
        epochs: the epochs you plan to train (default: the workload's own, else 10): a
            candidate whose extra compilation does not pay back within them is not
            recommended.

    Returns:
        an :class:`devicebench.advisor.advice.AdviceResult` (``.headline`` — does the
        accelerator speed this training up —, ``.verdict``, ``.reasons``, ``.code``,
        ``.to_dict()``).

    Raises:
        devicebench.errors.DevicebenchError: bad input (one clear message): an argument of
            the wrong type or out of range (``budget`` under 10 s), an unknown workload,
            a baseline this machine cannot run, training data with NaN or Inf.

    Example:
        >>> result = devicebench.advise("seed-rnn", budget=60)
        >>> print(result.verdict)
    """
    from devicebench.jobs.advise import run_advice
    from devicebench.report.advise import with_spinner
    from devicebench.validate import check_advise_request

    budget = check_advise_request(budget, baseline, allow_batch_change, db, data, epochs)
    from devicebench.workloads.script import is_script_ref

    if isinstance(workload_or_model, str | Path) and is_script_ref(str(workload_or_model)):
        from devicebench.jobs.advise_script import advise_script

        return with_spinner(str(workload_or_model), progress, lambda on_event: advise_script(
            str(workload_or_model), list(script_args or []), baseline=baseline, budget=budget,
            allow_batch_change=allow_batch_change, epochs=epochs,
            db=Path(db) if db else None, on_event=on_event))
    with tempfile.TemporaryDirectory(prefix="devicebench-advise-") as tmp:
        ref = _as_ref(workload_or_model, data, Path(tmp))
        return with_spinner(str(workload_or_model), progress, lambda on_event: run_advice(
            ref, baseline=baseline, budget=budget, allow_batch_change=allow_batch_change,
            epochs=epochs, db=Path(db) if db else None, on_event=on_event))


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

    @property
    def failed(self) -> list[TrialResult]:
        """The trials that did not end ``ok`` (their results stand, with the reason)."""
        return [r.result for r in self.rows if r.result.status != "ok"]

    def to_dict(self) -> dict[str, Any]:
        return envelope("run", {"run_id": self.run_id, "notes": self.notes,
                                "store_problems": self.store_problems,
                                "results": [r.to_dict() for r in self.rows],
                                "stability": [f.to_dict() for f in self.stability]})


class RunProgress(Protocol):
    def event(self, kind: str, spec: TrialSpec, info: dict[str, Any]) -> None: ...

    def stop(self) -> None: ...


def run(
    workloads: list[str] | tuple[str, ...] = ("seed-rnn",),
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
    timeout: float = RunOptions.setup_timeout,
    memory_limit_mib: int | None = None,
    resume: bool = False,
    db: str | Path | None = None,
    progress: Callable[[int, RunOptions], RunProgress] | None = None,
    argv: list[str] | None = None,
    replicate: bool = True,
) -> RunOutcome:
    """Measure training speed per configuration (the cross product of the choices this
    machine can run), interleaved per workload, with loss equivalence; store each trial.
    What ``devicebench run`` does.

    Args:
        workloads: built-in names, ``"path/file.py:function"`` or a training script
            (``"train.py"``: its first fit(), captured as ``advise`` does).
        backends, devices, precisions, jits, batch_sizes, pipelines, threads: the
            choices (None: every installed backend, every device but mps, float32, auto,
            the workload's batch, arrays, all cores).
        rounds: a fixed number of interleaved rounds (None: until every CI is within
            ±3%, ``budget`` seconds or 30 rounds).
        resume: skip trials already measured on this machine with the same spec; their
            stored results come back as stored.
        progress: ``progress(n_trials, options)`` for each workload group: an object with
            ``event(kind, spec, info)`` and ``stop()``.
        replicate: measure the reference, its accelerator/CPU partner and the likely
            winner in two or more worker processes each, as ``budget`` holds them (their
            CIs then cover a rerun in a fresh process); False: one process each.

    Raises:
        devicebench.errors.DevicebenchError: bad input (one clear message): an unknown
            workload, backend or device, a user workload that does not load or fit.
    """
    from devicebench.advisor.equivalence import loss_check
    from devicebench.env.probe import probe_host_layer
    from devicebench.measure.load import read_load
    from devicebench.store import recorded_run
    from devicebench.trials.engine import run_workload_group
    from devicebench.trials.epochs import fit_estimate
    from devicebench.trials.plan import plan_trials
    from devicebench.trials.stability import finding_line, stability_findings
    from devicebench.trials.summary import compare
    from devicebench.validate import check_run_request
    from devicebench.workloads.loader import check_workload_runs, validate_workload_ref
    from devicebench.workloads.script import capture_script, is_script_ref

    req = check_run_request(dict(  # every argument, before anything starts
        workloads=workloads, backends=backends, devices=devices, precisions=precisions,
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
                      {"argv": argv if argv is not None else []}) as rec:
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
            bar = progress(len(todo), options) if progress else None
            try:
                results += run_workload_group(
                    todo, options, on_event=bar.event if bar else None,
                    on_result=rec.keep_trial, run_id=run_id,
                    loss_check=loss_check, replicate=replicate,
                    on_replication=lambda rep, n=name: notes.extend(
                        f"{n}: {line}" for line in rep.notes))
            finally:
                if bar:
                    bar.stop()
        load_after = read_load()
        findings = stability_findings(results, load_before, load_after)
        notes += [finding_line(f) for f in findings]
        rec.summary = {"load": {"before": load_before and load_before.to_dict(),
                                "after": load_after and load_after.to_dict()},
                       "stability": [f.to_dict() for f in findings]}
    # Only trials measured together in this run are compared (their rounds interleaved);
    # stored ones are shown as they were stored, apart.
    rows = compare(results) + [ComparisonRow(r, False, None, fit_estimate(r)) for r in stored]
    rows = [replace(r, result=replace(r.result, spec=r.result.spec.with_(
        workload=shown[r.result.spec.workload]))) if r.result.spec.workload in shown else r
        for r in rows]
    return RunOutcome(run_id, rows, [_shown(n, shown) for n in notes], list(rec.problems),
                      findings)


def _shown(text: str, names: dict[str, str]) -> str:
    for ref, script in names.items():
        text = text.replace(ref, script)
    return text


@dataclass(frozen=True)
class OpsOutcome:
    """What :func:`ops` measured and stored: the run, each worker's raw result and the
    analysis (fits, peaks, speed-ups, crossovers, verdicts)."""

    run_id: int
    settings: dict[str, Any]
    results: list[Any]  # devicebench.ops.result.OpsWorkerResult
    analysis: Any  # devicebench.ops.records.OpsAnalysis

    def to_dict(self) -> dict[str, Any]:
        return envelope("ops", {"run_id": self.run_id,
                                "settings": {k: list(v) if isinstance(v, tuple) else v
                                             for k, v in self.settings.items()},
                                **self.analysis.to_dict()})


def ops(*, ops: tuple[str, ...] | None = None, modes: tuple[str, ...] | None = None,
        backends: list[str] | None = None, devices: list[str] | None = None,
        sizes: tuple[int, ...] | None = None, threads: int | None = None, chain: int = 16,
        block_seconds: float = 0.005, blocks: int = 5, max_call_seconds: float = 0.25,
        torch_compile: bool = False, timeout: float = 600.0, db: str | Path | None = None,
        on_start: Callable[[Any, int, int], None] | None = None,
        argv: list[str] | None = None) -> OpsOutcome:
    """Time single ops across sizes, backends, devices and loop styles (one worker
    process per backend and device, one after the other) and analyse them. What
    ``devicebench ops`` does.

    Raises:
        devicebench.errors.DevicebenchError: an unknown op, mode, backend or device, a
            bad size list or number.
    """
    from devicebench.env.probe import probe_host_layer
    from devicebench.errors import SpecError
    from devicebench.ops.analysis import analyse
    from devicebench.ops.runner import plan_ops, run_ops, worker_notes
    from devicebench.ops.spec import DEFAULT_SIZES, MODES, OPS
    from devicebench.store import recorded_run
    from devicebench.store.ops import add_ops_result

    if timeout <= 0:
        raise SpecError(f"--timeout must be positive, got {timeout:g}", fix="e.g. --timeout 600")
    settings = {"ops": tuple(ops or OPS), "modes": tuple(modes or MODES),
                "sizes": tuple(sizes) if sizes is not None else DEFAULT_SIZES,
                "threads": threads, "chain": chain, "block_seconds": block_seconds,
                "blocks": blocks, "max_call_seconds": max_call_seconds,
                "torch_compile": torch_compile}
    snapshot = probe_host_layer()
    plan = plan_ops(snapshot, backends=backends or None, devices=devices or None, **settings)
    with recorded_run(Path(db) if db else None, snapshot, "ops",
                      {"argv": argv if argv is not None else [], **settings}) as rec:
        run_id = rec.run_id
        results = run_ops(plan, timeout=timeout, on_start=on_start,
                          on_result=lambda r: add_ops_result(rec.store, run_id, r))
    analysis = analyse(results, plan.accelerators, plan.notes + worker_notes(results))
    return OpsOutcome(run_id, settings, results, analysis)
