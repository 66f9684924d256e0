"""``advise`` as a job on this machine: validate the input, probe the host, search and
compare, store the trials and the advice. The CLI (``devicebench advise``, the main job)
and the Python API (:func:`devicebench.advise`) both call :func:`run_advice`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from devicebench.advisor.advice import (
    AdviceResult,
    advise_workload,
    default_baseline,
    parse_baseline,
)


def workload_facts(workload: str) -> dict[str, Any]:
    """What :func:`advise_workload` knows of a built-in workload (its batch size, tags,
    analytic FLOPs per step, the epochs its script trains, a recurrent loop's length);
    nothing for a user's workload."""
    from devicebench.workloads import BUILTIN_WORKLOADS

    w = BUILTIN_WORKLOADS.get(workload)
    if w is None:
        return {}
    return {"workload_batch_size": w.batch_size, "workload_tags": w.tags,
            "workload_flops_per_step": w.flops_per_step(), "workload_epochs": w.epochs,
            "workload_timesteps": w.params.get("timesteps")}


def run_advice(workload: str, *, baseline: str | None, budget: float, allow_batch_change: bool,
               db: Path | None, snapshot=None, equivalence_steps: int = 50,
               epochs: int | None = None, on_event=None) -> AdviceResult:
    """Validate, advise on this machine, store: what ``devicebench advise``, the main job
    and :func:`devicebench.advise` do. ``on_event(kind, spec, info)`` reports progress.

    Raises:
        devicebench.errors.DevicebenchError: bad input (an unknown workload, a baseline
            this machine cannot run, a user workload that does not load or fit).
    """
    from devicebench.advisor.figures import device_figures
    from devicebench.env.probe import probe_host_layer
    from devicebench.store import recorded_run
    from devicebench.store.ops import latest_ops_run
    from devicebench.trials.plan import installed_backends, validate_spec
    from devicebench.workloads.loader import check_workload_runs, validate_workload_ref

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
    # A user workload that does not load, returns the wrong thing or whose data does not
    # fit its model is bad input (exit 2), found in a throwaway worker before searching.
    check_workload_runs(workload, spec.backend)
    options = {"argv": sys.argv[1:], "workload": workload, "budget": budget}
    with recorded_run(db, snapshot, "advise", options) as rec:
        # `devicebench ops` figures of this machine (same hardware and versions), if any.
        found = latest_ops_run(rec.store, rec.machine_id)
        every = {d: f for d in {w.device for w in found[1]}
                 if (f := device_figures(*found, d))} if found else {}
        advice = advise_workload(
            workload, snapshot, baseline=spec, budget_s=budget,
            allow_batch_change=allow_batch_change, equivalence_steps=equivalence_steps,
            **workload_facts(workload), epochs=epochs, figures=every.get(spec.device),
            device_figures=every, baseline_reason=why,
            on_result=lambda r: rec.store.add_trial(rec.run_id, r), on_event=on_event)
        rec.summary = advice.to_dict()
    return advice
