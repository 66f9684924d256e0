"""From a trial's raw samples to the figures a user holds against their training log:
the epoch as Keras' log shows it (training pass + validation pass) and how long a whole
``fit`` of the script's N epochs takes (the first epoch's one-time cost — compilation,
fit's start, warm-up — plus N epochs at the mean epoch time: a total's expectation is N
times the mean, and an epoch now and then far slower than the median still adds to the
user's stopwatch).

Example:
    >>> est = fit_estimate(result)  # doctest: +SKIP
    >>> f"a fit of {est.epochs} epochs takes about {est.fit_s:.1f} s"  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devicebench.measure.stats import Summary, hierarchical_summary, mean_ci, summarize
from devicebench.trials.result import TrialResult

# A round over STALL_FACTOR x the median round is not training: a trial that waited while
# the others measured resumes (TensorFlow's input pipeline restarts its prefetch, the CPU
# idle) — an artifact of interleaving that a user's uninterrupted fit never sees. The
# whole-fit figure's mean leaves such rounds out.
STALL_FACTOR = 3.0


@dataclass(frozen=True)
class FitEstimate:
    """One trial's epoch and whole-fit figures.

    Attributes:
        train_s: the steady training pass of one epoch (median step x steps per epoch).
        validation_s: the steady validation pass (median; None: the workload does not
            validate).
        validation_samples: size of the validation set (0: none).
        epoch: per-round epochs (the round's training pass + its validation pass, or
            the median pass where the round timed none), summarised with a bootstrap CI
            of the median; the figure shown is :attr:`epoch_s` (the two parts' medians
            added, as the parts are shown).
        mean_epoch: the mean per-round epoch (stalled rounds left out) and its 95% CI:
            what N epochs add up to.
        one_time_s: what the first epoch costs beyond a steady one: the step's
            tracing/compilation (in the trial's first step, or in its fit's warm-up —
            TensorFlow traces fit's step again — whichever is larger: a user's fit pays
            it once), fit's start and the warm-up until the step time settled, and the
            first validation pass's compilation.
        epochs: N, the epochs the workload's script trains (None: not stated, no fit
            figure).
    """

    train_s: float
    validation_s: float | None
    validation_samples: int
    epoch: Summary
    one_time_s: float
    epochs: int | None
    mean_epoch: tuple[float, float, float]  # mean, CI low, CI high

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
        """A fit of N epochs: the one-time cost plus N mean epochs."""
        if not self.epochs:
            return None
        return self.one_time_s + self.epochs * self.mean_epoch[0]

    @property
    def fit_ci(self) -> tuple[float, float] | None:
        """95% CI of :attr:`fit_s` from the mean epoch's CI (the one-time cost is one
        sample and carries no CI of its own)."""
        if not self.epochs:
            return None
        _, low, high = self.mean_epoch
        return (self.one_time_s + self.epochs * low, self.one_time_s + self.epochs * high)

    def to_dict(self) -> dict[str, Any]:
        return {"train_s": self.train_s, "validation_s": self.validation_s,
                "validation_samples": self.validation_samples,
                "epoch_s": self.epoch_s, "epoch_ci95": list(self.epoch_ci),
                "first_epoch_s": self.first_epoch_s, "one_time_s": self.one_time_s,
                "mean_epoch_s": self.mean_epoch[0],
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
    val = result.validation_pass_seconds  # timed in a trial's first rounds only
    def epochs_of(rounds: dict[int, float]) -> list[float]:
        return [spe * s + val_by_round.get(r, val or 0.0) for r, s in rounds.items()]

    per_round = epochs_of(steps)
    if not per_round:
        return None
    # Measured in several processes: the epoch's CI resamples the processes, then their
    # rounds, and the mean epoch's CI holds every process's own mean (a rerun in a fresh
    # process lands anywhere among them), as the step time's does.
    per_process = ({k: e for k, rounds in steps.by_process.items() if (e := epochs_of(rounds))}
                   if steps.by_process else {})
    epoch = hierarchical_summary(per_process) if len(per_process) > 1 else summarize(per_round)
    steady = [e for e in per_round if e <= STALL_FACTOR * epoch.median]
    step = result.step_time.median
    first = warm = 0.0
    if result.first_step_seconds is not None:
        first = max(0.0, result.first_step_seconds - step)
    if result.warmup_seconds is not None and result.warmup_blocks:
        block = step * max(result.steps_per_block, 1)
        warm = max(0.0, result.warmup_seconds - result.warmup_blocks * block)
    # The trial compiled its step twice where the backend keeps train_on_batch's and
    # fit's apart (TensorFlow traces one tf.function per path: the first step, then
    # again in fit's warm-up); JAX and torch compile it once and fit reuses it. A user's
    # fit pays one of them: the larger.
    one_time = max(first, warm)
    if val is not None and result.validation_first_seconds is not None:
        one_time += max(0.0, result.validation_first_seconds - val)
    return FitEstimate(train_s=step * spe, validation_s=val,
                       validation_samples=result.validation_samples, epoch=epoch,
                       one_time_s=one_time, epochs=epochs or result.workload_epochs,
                       mean_epoch=_across(mean_ci(steady), per_process,
                                          STALL_FACTOR * epoch.median))


def _across(mean: tuple[float, float, float], per_process: dict[int, list[float]],
            stall: float) -> tuple[float, float, float]:
    """``mean`` (value, low, high) with its CI widened to every process's own steady mean."""
    means = [sum(k) / len(k) for v in per_process.values() if (k := [e for e in v if e <= stall])]
    if len(means) < 2:
        return mean
    return mean[0], min(mean[1], *means), max(mean[2], *means)
