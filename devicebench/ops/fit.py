"""The cost model of a call, t(n) = overhead + work(n) / rate, and the comparisons built on
it: speed-up with a CI between two paths, and the crossover size.

Pure numpy; no framework.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from devicebench.measure.stats import Ratio

TUKEY_C = 4.685  # bisquare: 95% efficiency under normal noise
MIN_SCALE = 0.02  # relative deviations below ~2% are never down-weighted
L1_FLOOR = 1e-3
MAX_ITER = 50


@dataclass(frozen=True)
class CostFit:
    """t = overhead + work / rate, fitted to the median seconds per call.

    Attributes:
        overhead: seconds per call that do not depend on the size (dispatch, launch).
        rate: work per second on large inputs (FLOP/s or bytes/s); ``inf`` when no
            size was large enough for the work to show.
        n_points: points used.
        rel_residual: median absolute relative residual (0.05: the model is within 5%
            of the typical point).
    """

    overhead: float
    rate: float
    n_points: int
    rel_residual: float

    def predict(self, work: float) -> float:
        """Seconds per call for ``work``."""
        return self.overhead + (work / self.rate if np.isfinite(self.rate) else 0.0)

    def break_even_work(self) -> float:
        """The work at which the arithmetic takes as long as the overhead."""
        return self.overhead * self.rate


def _solve(w: np.ndarray, t: np.ndarray, u: np.ndarray) -> tuple[float, float]:
    """Weighted least squares on relative residuals with overhead, 1/rate >= 0."""
    sw = np.sqrt(u)
    a_mat = np.column_stack([sw / t, sw * w / t])
    (a, b), *_ = np.linalg.lstsq(a_mat, sw, rcond=None)
    if a < 0:  # through the origin: b only
        x = w / t
        a, b = 0.0, float(np.sum(u * x) / np.sum(u * x * x))
    if b < 0:  # constant: a only
        x = 1 / t
        a, b = float(np.sum(u * x) / np.sum(u * x * x)), 0.0
    return float(a), float(b)


def _converged(a: float, b: float, a_new: float, b_new: float) -> bool:
    return (abs(a_new - a) <= 1e-9 * max(a, 1e-12)
            and abs(b_new - b) <= 1e-9 * max(b, 1e-30))


def fit_cost_model(work: Sequence[float], seconds: Sequence[float]) -> CostFit:
    """Robust fit of t = overhead + work / rate on relative residuals.

    Relative residuals let a 2×2 call of 10 µs weigh as much as a 4096×4096 one of
    50 ms, so the overhead comes from the small sizes and the rate from the large ones.
    The fit starts from least absolute deviations and is refined with Tukey bisquare
    weights, so a point measured while the machine was busy (or in another cache
    regime) drags neither parameter. Both parameters are kept non-negative.

    Args:
        work: FLOPs or bytes per call at each point.
        seconds: median seconds per call at each point (> 0).

    Raises:
        ValueError: fewer than 2 points, or a non-positive time.

    Example:
        >>> w = [1e3, 1e5, 1e7]
        >>> f = fit_cost_model(w, [20e-6 + x / 1e9 for x in w])
        >>> round(f.overhead * 1e6), round(f.rate / 1e9)
        (20, 1)
    """
    w = np.asarray(work, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if w.size < 2 or w.size != t.size:
        raise ValueError("need at least 2 points of (work, seconds)")
    if np.any(t <= 0) or np.any(w < 0):
        raise ValueError("seconds must be positive and work non-negative")
    # Start from the least-absolute-deviations line (the regression analogue of the
    # median), then reweight with Tukey's bisquare: a point off by many robust scales —
    # a size measured while another process held the cores — gets no weight at all.
    a, b = _solve(w, t, np.ones_like(t))
    for _ in range(MAX_ITER):
        r = (t - a - b * w) / t
        a_new, b_new = _solve(w, t, 1.0 / np.maximum(np.abs(r), L1_FLOOR))
        if _converged(a, b, a_new, b_new):
            a, b = a_new, b_new
            break
        a, b = a_new, b_new
    r = (t - a - b * w) / t
    scale = max(1.4826 * float(np.median(np.abs(r - np.median(r)))), MIN_SCALE)
    for _ in range(MAX_ITER):
        z = ((t - a - b * w) / t) / (TUKEY_C * scale)
        u = np.where(np.abs(z) < 1, (1 - z * z) ** 2, 0.0)
        if np.count_nonzero(u) < 2:
            break
        a_new, b_new = _solve(w, t, u)
        if _converged(a, b, a_new, b_new):
            a, b = a_new, b_new
            break
        a, b = a_new, b_new
    r = (t - a - b * w) / t
    rate = 1.0 / b if b > 0 else float("inf")
    return CostFit(overhead=a, rate=rate, n_points=int(w.size),
                   rel_residual=float(np.median(np.abs(r))))


def crossover_size(speedups: Sequence[tuple[int, Ratio | None]]) -> int | None:
    """The smallest size from which the candidate is faster at every measured size.

    "Faster" means the 95% CI of the speed-up lies above 1. Sizes without a ratio are
    ignored. Returns None when the candidate is not clearly faster at the largest
    measured size (it never wins within the sweep).

    Example:
        >>> from devicebench.measure.stats import Ratio
        >>> crossover_size([(2, Ratio(0.1, 0.09, 0.11, 5)), (64, Ratio(3, 2.5, 3.5, 5))])
        64
    """
    measured = sorted((s, r) for s, r in speedups if r is not None)
    if not measured or measured[-1][1].ci_low <= 1:
        return None
    cross = measured[-1][0]
    for size, ratio in reversed(measured):
        if ratio.ci_low <= 1:
            break
        cross = size
    return cross
