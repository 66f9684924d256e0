"""From a trial's raw samples to the figures a user holds against their training log:
the epoch as Keras' log shows it (training pass + validation pass) and how long a whole
``fit`` of the script's N epochs takes (the first epoch, compilation included, then
N-1 steady epochs).

Example:
    >>> est = fit_estimate(result)  # doctest: +SKIP
    >>> f"a fit of {est.epochs} epochs takes about {est.fit_s:.1f} s"  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devicebench.measure.stats import Summary, summarize
from devicebench.trials.result import TrialResult


@dataclass(frozen=True)
class FitEstimate:
    """One trial's epoch and whole-fit figures.

    Attributes:
        train_s: the steady training pass of one epoch (median step x steps per epoch).
        validation_s: the steady validation pass (median; None: the workload does not
            validate).
        validation_samples: size of the validation set (0: none).
        epoch: per-round epochs (training + validation measured in the same round),
            summarised with a bootstrap CI of the median; the figure shown is
            :attr:`epoch_s` (the two parts' medians added, as the parts are shown).
        one_time_s: what the first epoch costs beyond a steady one: the first step's
            tracing/compilation, fit's start and the warm-up until the step time
            settled, and the first validation pass's compilation.
        epochs: N, the epochs the workload's script trains (None: not stated, no fit
            figure).
    """

    train_s: float
    validation_s: float | None
    validation_samples: int
    epoch: Summary
    one_time_s: float
    epochs: int | None

    @property
    def epoch_s(self) -> float:
        """One steady epoch as Keras' log shows it: training + validation."""
        return self.train_s + (self.validation_s or 0.0)

    @property
    def epoch_ci(self) -> tuple[float, float]:
        """95% CI of an epoch (per-round bootstrap), widened to hold :attr:`epoch_s`."""
        return (min(self.epoch.ci_low, self.epoch_s), max(self.epoch.ci_high, self.epoch_s))

    @property
    def first_epoch_s(self) -> float:
        return self.epoch_s + self.one_time_s

    @property
    def fit_s(self) -> float | None:
        """A fit of N epochs: the first epoch plus N-1 steady ones."""
        if not self.epochs:
            return None
        return self.one_time_s + self.epochs * self.epoch_s

    @property
    def fit_ci(self) -> tuple[float, float] | None:
        """95% CI of :attr:`fit_s` from the epoch's CI (the one-time cost is one sample
        and carries no CI of its own)."""
        if not self.epochs:
            return None
        low, high = self.epoch_ci
        return (self.one_time_s + self.epochs * low, self.one_time_s + self.epochs * high)

    def to_dict(self) -> dict[str, Any]:
        return {"train_s": self.train_s, "validation_s": self.validation_s,
                "validation_samples": self.validation_samples,
                "epoch_s": self.epoch_s, "epoch_ci95": list(self.epoch_ci),
                "first_epoch_s": self.first_epoch_s, "one_time_s": self.one_time_s,
                "epochs": self.epochs, "fit_s": self.fit_s,
                "fit_ci95": list(self.fit_ci) if self.fit_ci else None}


def fit_estimate(result: TrialResult, epochs: int | None = None) -> FitEstimate | None:
    """The epoch and whole-fit figures of ``result`` (None: not measured).

    Args:
        result: a trial with timed blocks.
        epochs: N (default: the workload's own ``epochs``).
    """
    if result.status != "ok" or not result.block_seconds or result.steps_per_epoch <= 0:
        return None
    spe = result.steps_per_epoch
    steps = result.round_step_times
    val_by_round: dict[int, float] = {}
    for rnd, v in zip(result.validation_rounds, result.validation_seconds, strict=False):
        val_by_round.setdefault(rnd, v)
    validates = bool(result.validation_seconds)
    per_round = [spe * s + val_by_round.get(r, 0.0) for r, s in steps.items()
                 if not validates or r in val_by_round]
    if not per_round:
        return None
    epoch = summarize(per_round)
    step = result.step_time.median
    val = result.validation_pass_seconds
    one_time = 0.0
    if result.first_step_seconds is not None:
        one_time += max(0.0, result.first_step_seconds - step)
    if result.warmup_seconds is not None and result.warmup_blocks:
        block = step * max(result.steps_per_block, 1)
        one_time += max(0.0, result.warmup_seconds - result.warmup_blocks * block)
    if val is not None and result.validation_first_seconds is not None:
        one_time += max(0.0, result.validation_first_seconds - val)
    return FitEstimate(train_s=step * spe, validation_s=val,
                       validation_samples=result.validation_samples, epoch=epoch,
                       one_time_s=one_time, epochs=epochs or result.workload_epochs)
