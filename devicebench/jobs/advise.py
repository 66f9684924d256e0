"""``advise`` as a job on this machine: validate the input, probe the host, search and
compare, store the trials and the advice (:func:`run_advice`, on a workload reference),
and the dispatch probe the main job runs once per machine. The entry point with the
defaults is :func:`devicebench.jobs.advise_any.advise`."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devicebench.progress import OnProgress, Reporter

if TYPE_CHECKING:
    from devicebench.advisor.advice import AdviceResult


def run_advice(workload: str, *, baseline: str | None, budget: float, allow_batch_change: bool,
               db: Path | None, equivalence_steps: int, snapshot=None,
               epochs: int | None = None, shown_as: str | None = None,
               on_progress: OnProgress | None = None, on_event=None,
               on_result=None) -> AdviceResult:
    """Validate, advise on this machine, store: what
    :func:`devicebench.jobs.advise_any.advise` does on a workload reference (its
    defaults are that job's). ``on_progress`` gets the progress events (as
    ``shown_as``, default the reference); ``on_event(kind, spec, info)`` the engine's
    own; ``on_result(result)`` sees each trial once it is stored (``fleet advise``
    streams both to the user's machine).

    Raises:
        devicebench.errors.DevicebenchError: bad input (an unknown workload, a baseline
            this machine cannot run, a user workload that does not load or fit).
    """
    from devicebench.advisor.advice import advise_workload, default_baseline, parse_baseline
    from devicebench.advisor.facts import workload_facts
    from devicebench.advisor.figures import device_figures
    from devicebench.advisor.floor import refuse_short_budget
    from devicebench.advisor.reruns import with_reruns
    from devicebench.env.probe import probe_host_layer
    from devicebench.measure.cpuspeed import CpuSpeedSampler
    from devicebench.measure.load import MachineLoad, read_load
    from devicebench.store import recorded_run
    from devicebench.store.ops import latest_ops_run
    from devicebench.trials.plan import installed_backends, validate_spec
    from devicebench.trials.stability import finding_line, stability_findings
    from devicebench.validate import check_advise_request
    from devicebench.workloads.loader import check_workload_runs, validate_workload_ref

    check_advise_request(budget, baseline, allow_batch_change, db, None, epochs)
    validate_workload_ref(workload)
    snapshot = snapshot or probe_host_layer()
    if not installed_backends(snapshot):
        from devicebench.errors import InputError

        raise InputError("no deep-learning framework is installed",
                         fix="pip install 'devicebench[tensorflow,jax]'")
    default, why = default_baseline(snapshot, workload)
    spec = parse_baseline(baseline, workload, default.backend)
    if baseline is None or "device=" not in baseline:
        spec = spec.with_(device=default.device)
    validate_spec(spec, snapshot)  # as `run` refuses --device gpu:7 on a CPU machine
    if baseline is not None:
        why = "given with --baseline" + ("" if "device=" in baseline else
                                         f" ({default.device}: the default device)")
    # A budget below the least a comparison has cost here (issue 27, item 15): refused.
    refuse_short_budget(db, snapshot, spec, budget, equivalence_steps, workload_facts(workload),
                        allow_batch_change)
    # A user workload that does not load, returns the wrong thing or whose data does not
    # fit its model is bad input (exit 2), found in a throwaway worker before searching.
    check_workload_runs(workload, spec.backend)
    options = {"argv": sys.argv[1:], "workload": workload, "budget": budget}
    with recorded_run(db, snapshot, "advise", options) as rec, \
            CpuSpeedSampler() as sampler:  # the CPU's own speed while trials run
        # `devicebench ops` figures of this machine (same hardware and versions), if any.
        load_before = read_load()
        found = latest_ops_run(rec.store, rec.machine_id)
        every = {d: f for d in {w.device for w in found[1]}
                 if (f := device_figures(*found, d))} if found else {}
        report = Reporter(f"advise {shown_as or workload}", on_progress, budget_s=budget)
        trial_event = report.trial_events()

        def event(kind: str, spec: Any, info: dict[str, Any]) -> None:
            if not started:
                started.append(True)
                report.started()
            trial_event(kind, spec, info)
            if on_event is not None:
                on_event(kind, spec, info)

        started: list[bool] = []
        advice = advise_workload(
            workload, snapshot, baseline=spec, budget_s=budget,
            allow_batch_change=allow_batch_change, equivalence_steps=equivalence_steps,
            facts=workload_facts(workload), epochs=epochs, figures=every.get(spec.device),
            device_figures=every, baseline_reason=why,
            on_result=lambda r: (rec.keep_trial(r), on_result(r) if on_result else None),
            on_event=event)
        report.finished()
        speed = sampler.stop()
        load_after = read_load()
        # Stability findings of the final's trials, the machine's load around them and
        # the CPU's own speed during them.
        stability = stability_findings([r.result for r in advice.rows], load_before,
                                       load_after, cpu_speed=speed)
        advice = replace(advice, stability=stability,
                         notes=[*advice.notes, *(finding_line(f) for f in stability)],
                         load=MachineLoad(load_before, load_after, speed).to_dict())
        # The final's CIs widened by how far this machine's earlier runs of the same
        # configurations moved, as `run` shows them (issue 25).
        advice = with_reruns(advice, rec.store, rec.machine_id, rec.run_id)
        rec.summary = advice.to_dict()
    if rec.problems:  # results the store would not take: kept aside
        advice = replace(advice, notes=[*advice.notes, *rec.problems])
    return advice


# The dispatch probe: multiply and matmul at small sizes, one call per op ("compiled")
# and 64 chained inside one compiled call ("in-graph"): the per-call and per-op costs the
# accelerator and dispatch reasons use, in seconds rather than `ops`' minutes (jax's
# per-op cost is its matmul's: XLA fuses a chain of multiplies into one kernel).
DISPATCH_PROBE_SETTINGS: dict[str, Any] = {
    "ops": ("multiply", "matmul"), "modes": ("compiled", "in-graph"), "sizes": (2, 8),
    "threads": None, "chain": 64, "block_seconds": 0.02, "blocks": 7,
    "max_call_seconds": 0.25, "torch_compile": False}


def ensure_dispatch_figures(db: Path | None, snapshot, backend: str,
                            timeout: float = 120.0,
                            on_progress: OnProgress | None = None) -> str | None:
    """When no ``devicebench ops`` run is stored for this machine, measure the per-op
    dispatch cost of ``backend`` on the CPU and the accelerator (one worker each, a few
    seconds) and store it as an ``ops`` run, which ``advise`` then reads like any other
    (and later runs reuse). Returns a line saying what was measured, or None when
    figures were already stored or nothing could be measured. ``on_progress``: each
    worker (k of n) as it starts (:mod:`devicebench.progress`)."""
    import time

    from devicebench.ops.runner import plan_ops, run_ops
    from devicebench.store import ResultStore, recorded_run
    from devicebench.store.ops import add_ops_result, latest_ops_run
    from devicebench.trials.plan import machine_devices

    with ResultStore.open(db) as store:
        if latest_ops_run(store, store.add_machine(snapshot)) is not None:
            return None
    devices = [d for d in machine_devices(snapshot) if d != "mps" or backend == "torch"]
    accelerators = [d for d in devices if d != "cpu"][:1]
    plan = plan_ops(snapshot, backends=[backend], devices=["cpu", *accelerators],
                    **DISPATCH_PROBE_SETTINGS)
    t0 = time.monotonic()
    with recorded_run(db, snapshot, "ops", {"argv": ["(dispatch probe)"],
                                            **DISPATCH_PROBE_SETTINGS}) as rec:
        report = Reporter("dispatch probe", on_progress)
        report.started(f"the per-op dispatch cost of {backend}", total=len(plan.configs))
        results = run_ops(plan, timeout=timeout,
                          on_start=lambda config, i, n: report.progress(
                              f"measuring {config.label}: multiply and matmul, one call "
                              "and 64 chained", done=i, total=n),
                          on_result=lambda r: add_ops_result(rec.store, rec.run_id, r))
        report.finished()
        run_id = rec.run_id
    ok = [r for r in results if r.status == "ok"]
    if not ok:
        return None
    return (f"measured the per-op dispatch cost of {backend} on "
            f"{', '.join(r.device for r in ok)} in {time.monotonic() - t0:.0f} s "
            f"(stored as ops run #{run_id}; `devicebench ops` measures every op, size and "
            "mode)")
