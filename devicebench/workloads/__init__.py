"""Built-in workloads and their registry.

Every workload module is numpy-only at import time, so listing them is cheap and needs no
deep-learning framework.

Example:
    >>> from devicebench.workloads import get_workload
    >>> get_workload("seed-rnn").batch_size
    32
"""

from __future__ import annotations

from devicebench.errors import SpecError
from devicebench.workloads import (
    lstm_forecast,
    mlp,
    mnist_cnn,
    seed_rnn,
    small_resnet,
    tiny_transformer,
)
from devicebench.workloads.base import TrainData, Workload

__all__ = ["BUILTIN_WORKLOADS", "TrainData", "Workload", "get_workload", "workload_names"]

BUILTIN_WORKLOADS: dict[str, Workload] = {
    module.WORKLOAD.name: module.WORKLOAD
    for module in (seed_rnn, mnist_cnn, lstm_forecast, mlp, small_resnet, tiny_transformer)
}


def workload_names() -> list[str]:
    """Names of the built-in workloads, in registry order."""
    return list(BUILTIN_WORKLOADS)


def get_workload(name: str) -> Workload:
    """Return the built-in workload called ``name``.

    Raises:
        SpecError: ``name`` is not a built-in workload; the message lists the valid names.
    """
    try:
        return BUILTIN_WORKLOADS[name]
    except KeyError:
        raise SpecError(
            f"unknown workload {name!r}", fix=f"choose one of: {', '.join(workload_names())}"
        ) from None
