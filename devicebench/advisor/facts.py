"""What the advisor knows of a workload before measuring it: a built-in's own figures,
or what a captured script's capture recorded."""

from __future__ import annotations

from typing import Any


def workload_facts(workload: str) -> dict[str, Any]:
    """What :func:`advise_workload` knows of a built-in workload (its batch size, tags,
    analytic FLOPs per step, the epochs its script trains, a recurrent loop's length);
    for a captured script, what its capture recorded; nothing for other user workloads."""
    from devicebench.workloads import BUILTIN_WORKLOADS
    from devicebench.workloads.script import capture_facts

    w = BUILTIN_WORKLOADS.get(workload)
    if w is None:
        return capture_facts(workload)  # a captured script's, else nothing
    return {"workload_batch_size": w.batch_size, "workload_tags": w.tags,
            "workload_flops_per_step": w.flops_per_step(), "workload_epochs": w.epochs,
            "workload_timesteps": w.params.get("timesteps")}
