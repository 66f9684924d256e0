"""How a trial's timed blocks are cut and its set-up steps capped: one home for the rule
the worker follows, a profile's replay imitates and the search's budget predicts."""

from __future__ import annotations

import math
from dataclasses import dataclass

TARGET_BLOCK_SECONDS = 0.25
MAX_EPOCHS_PER_BLOCK = 8
# Blocks are whole epochs when every live trial's epoch is at most this long
# (RunOptions.whole_epoch_seconds), else K full batches of about TARGET_BLOCK_SECONDS.
WHOLE_EPOCH_SECONDS = 3.0
# Fewest equivalence steps a time cap may leave (a slow candidate still gets a loss check).
MIN_EQUIVALENCE_STEPS = 10
# Steps (the first included) after which a trial already slower than the parent's
# screening threshold stops its equivalence steps: it will not be timed.
SCREEN_MIN_STEPS = 5


@dataclass(frozen=True)
class BlockPlan:
    """``steps_per_block`` steps per timed block: ``epochs_per_block`` whole epochs
    (``fit_steps`` None) or one ``fit`` epoch of ``fit_steps`` full batches."""

    steps_per_block: int
    epochs_per_block: int
    fit_steps: int | None


def plan_blocks(step_seconds: float, steps_per_epoch: int, whole_epochs: bool,
                steps_per_execution: int = 1) -> BlockPlan:
    """Whole epochs (as many as make about TARGET_BLOCK_SECONDS, at most
    MAX_EPOCHS_PER_BLOCK), or K full batches of about TARGET_BLOCK_SECONDS (a multiple of
    ``steps_per_execution``, at most an epoch's).

    Example:
        >>> plan_blocks(0.001, 219, whole_epochs=False).steps_per_block
        219
        >>> plan_blocks(0.001, 219, whole_epochs=True).epochs_per_block
        2
    """
    if whole_epochs:
        epoch = step_seconds * steps_per_epoch
        epochs = min(MAX_EPOCHS_PER_BLOCK,
                     max(1, math.ceil(TARGET_BLOCK_SECONDS / max(epoch, 1e-6))))
        return BlockPlan(steps_per_epoch * epochs, epochs, None)
    k = max(1, math.ceil(TARGET_BLOCK_SECONDS / max(step_seconds, 1e-6)))
    k = max(steps_per_execution, min(k, steps_per_epoch) // steps_per_execution
            * steps_per_execution)
    return BlockPlan(k, 1, k)
