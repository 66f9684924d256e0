"""What the advisor knows of a workload before measuring it: a built-in's own figures,
or what a captured script's capture recorded."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WorkloadFacts:
    """What is known of a workload before measuring it (every field None or empty when
    not known: a user's own workload).

    Attributes:
        batch_size: its own batch size; tags: e.g. ``("recurrent",)``;
        flops_per_step: analytic FLOPs of one training step; epochs: the epochs its
        script trains; timesteps: a recurrent loop's length.
    """

    batch_size: int | None = None
    tags: tuple[str, ...] = ()
    flops_per_step: float | None = None
    epochs: int | None = None
    timesteps: int | None = None


def workload_facts(workload: str) -> WorkloadFacts:
    """What :func:`advise_workload` knows of a built-in workload (its batch size, tags,
    analytic FLOPs per step, the epochs its script trains, a recurrent loop's length);
    for a captured script, what its capture recorded; nothing for other user workloads."""
    from devicebench.workloads import BUILTIN_WORKLOADS
    from devicebench.workloads.script import capture_facts

    w = BUILTIN_WORKLOADS.get(workload)
    if w is None:  # a captured script's, else nothing
        return WorkloadFacts(**{k.removeprefix("workload_"): v
                                for k, v in capture_facts(workload).items()})
    return WorkloadFacts(batch_size=w.batch_size, tags=tuple(w.tags),
                         flops_per_step=w.flops_per_step(), epochs=w.epochs,
                         timesteps=w.params.get("timesteps"))
