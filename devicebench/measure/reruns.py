"""Run-to-run spread: how much earlier runs of the same figure on this machine moved
beyond their own CIs, and a CI widened by it.

A run's CI resamples its own rounds and worker processes, all inside one minute. On a
machine whose speed drifts over minutes (a cloud VM's neighbours, a laptop's turbo and
thermal limits) a rerun lands outside it: on the project's 2-core VM eight reruns of one
ratio, each with a ±10-15% CI, moved ±23% (docs/STATISTICS.md). The runs are then treated
as a random-effects meta-analysis: each run's figure is the truth plus a run effect plus
its own sampling error, and the between-run variance ``tau^2`` of the run effect is
estimated from the runs' figures and their CIs (DerSimonian & Laird, "Meta-analysis in
clinical trials", Controlled Clinical Trials 7, 1986 — the method of moments on
Cochran's Q). Everything is on the log scale, where a speed figure's error is about
symmetric. The widened CI is this run's own, each half-width combined with
``1.96 * tau`` in quadrature: what a rerun here should land in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959964
# Runs (this one included) before the between-run variance is estimated: with two, Q
# has one degree of freedom and tau swings from 0 to the whole difference.
MIN_RUNS = 3


@dataclass(frozen=True)
class RerunSpread:
    """What the earlier runs of one figure on this machine say.

    Attributes:
        runs: runs behind the estimate, this one included.
        tau: between-run standard deviation of log(figure) beyond the runs' own CIs
            (0: the runs agree within their CIs; 0.1: reruns move about ±10% (1 sd)).
        values: each run's figure, oldest first, this run's last.
    """

    runs: int
    tau: float
    values: tuple[float, ...]

    @property
    def percent(self) -> float:
        """The 95% between-run range as a share of the figure (1.96 tau, on the log
        scale, as a percentage: 0.23 = reruns land within about ±23%)."""
        return math.exp(Z95 * self.tau) - 1


def log_se(value: float, low: float, high: float) -> float:
    """The standard error of log(value) read from its 95% CI (the two log half-widths'
    mean, over 1.96)."""
    if min(value, low, high) <= 0 or high < low:
        raise ValueError(f"not a positive figure with its CI: {value} [{low}, {high}]")
    return (math.log(high) - math.log(low)) / (2 * Z95)


def between_runs(figures: Sequence[tuple[float, float, float]]) -> RerunSpread | None:
    """DerSimonian-Laird estimate of the between-run sd of log(figure) from runs'
    ``(value, ci_low, ci_high)``; None with fewer than :data:`MIN_RUNS` usable runs.

    Example:
        >>> agree = between_runs([(1.00, 0.95, 1.05), (1.01, 0.96, 1.06), (0.99, 0.94, 1.04)])
        >>> agree.tau
        0.0
        >>> apart = between_runs([(1.0, 0.97, 1.03), (1.3, 1.26, 1.34), (0.8, 0.78, 0.82)])
        >>> round(apart.tau, 2), f"{apart.percent:.0%}"
        (0.25, '62%')
    """
    usable = [(v, lo, hi) for v, lo, hi in figures if min(v, lo, hi) > 0 and hi >= lo]
    if len(usable) < MIN_RUNS:
        return None
    y = [math.log(v) for v, _, _ in usable]
    # A run whose CI is a point (one block) would get infinite weight: floor its se.
    var = [max(log_se(v, lo, hi), 1e-3) ** 2 for v, lo, hi in usable]
    w = [1 / s for s in var]
    sw = sum(w)
    mean = sum(wi * yi for wi, yi in zip(w, y, strict=True)) / sw
    q = sum(wi * (yi - mean) ** 2 for wi, yi in zip(w, y, strict=True))
    denom = sw - sum(wi * wi for wi in w) / sw
    tau2 = max(0.0, (q - (len(usable) - 1)) / denom) if denom > 0 else 0.0
    return RerunSpread(len(usable), math.sqrt(tau2), tuple(v for v, _, _ in usable))


def widened(value: float, low: float, high: float, tau: float) -> tuple[float, float]:
    """``value``'s CI with ``1.96 * tau`` added in quadrature to each log half-width.

    Example:
        >>> lo, hi = widened(2.0, 1.9, 2.1, 0.1)
        >>> round(lo, 3), round(hi, 3)
        (1.633, 2.448)
    """
    if tau <= 0 or min(value, low, high) <= 0:
        return low, high
    extra = (Z95 * tau) ** 2
    down = math.sqrt(math.log(value / min(low, value)) ** 2 + extra)
    up = math.sqrt(math.log(max(high, value) / value) ** 2 + extra)
    return value * math.exp(-down), value * math.exp(up)
