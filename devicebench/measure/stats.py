"""Robust statistics on raw timing samples: median, IQR, bootstrap CIs, paired ratios.

Bootstraps use a fixed seed so a stored result always renders the same figures.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

CI_LEVEL = 0.95
N_BOOT = 2000


@dataclass(frozen=True)
class Summary:
    """Median, quartiles and a 95% CI of the median of a set of samples (seconds)."""

    n: int
    median: float
    q1: float
    q3: float
    ci_low: float
    ci_high: float

    @property
    def rel_ci_halfwidth(self) -> float:
        """Half the CI width relative to the median (0.03 = ±3%)."""
        if self.median <= 0:
            return float("inf")
        return (self.ci_high - self.ci_low) / 2 / self.median


def _rng() -> np.random.Generator:
    return np.random.default_rng(20261129)


def summarize(samples: Sequence[float]) -> Summary:
    """Summarise samples; with fewer than 3 the CI is the sample range (honestly wide).

    Example:
        >>> summarize([1.0, 1.1, 0.9, 1.0]).median
        1.0
    """
    x = np.asarray(samples, dtype=float)
    if x.size == 0:
        raise ValueError("no samples")
    q1, med, q3 = np.percentile(x, [25, 50, 75])
    lo, hi = _bootstrap_ci(x, np.median)
    return Summary(int(x.size), float(med), float(q1), float(q3), lo, hi)


def _bootstrap_ci(x: np.ndarray, statistic) -> tuple[float, float]:
    """95% bootstrap CI of ``statistic`` (a numpy reduction taking ``axis``) over ``x``;
    with fewer than 3 samples, the sample range (honestly wide)."""
    if x.size < 3:
        return float(x.min()), float(x.max())
    idx = _rng().integers(0, x.size, size=(N_BOOT, x.size))
    alpha = (1 - CI_LEVEL) / 2
    lo, hi = np.quantile(statistic(x[idx], axis=1), [alpha, 1 - alpha])
    return float(lo), float(hi)


def mean_ci(samples: Sequence[float]) -> tuple[float, float, float]:
    """The mean and a 95% bootstrap CI of it (with fewer than 3 samples, the range):
    for a total over many repetitions (a fit of N epochs), whose expectation is N times
    the mean, not the median.

    Example:
        >>> mean_ci([1.0, 1.0, 1.0, 2.0])[0]
        1.25
    """
    x = np.asarray(samples, dtype=float)
    if x.size == 0:
        raise ValueError("no samples")
    return (float(x.mean()), *_bootstrap_ci(x, np.mean))


@dataclass(frozen=True)
class Ratio:
    """A speed-up ``baseline / candidate`` with its 95% CI (>1: the candidate is faster)."""

    value: float
    ci_low: float
    ci_high: float
    n_rounds: int
    # True: paired by interleaved round; False: independent samples (ratio of medians).
    interleaved: bool = True
    # Worker processes behind (baseline, candidate): (1, 1) unless replicated, when the
    # CI resamples processes as well as rounds.
    processes: tuple[int, int] = (1, 1)

    @property
    def significant(self) -> bool:
        """True when the CI excludes 1 (a real difference, not noise)."""
        return self.ci_low > 1 or self.ci_high < 1


class RoundTimes(dict[int, float]):
    """Round index -> step time, tagged with the group whose rounds they are (round
    indices mean something only inside one interleaved group; "": untagged).

    ``by_process`` (optional) holds the same rounds per worker process (replica ->
    round -> step time) when more than one process measured the trial: a paired ratio
    then resamples processes too (:func:`paired_ratio`)."""

    def __init__(self, times: dict[int, float] | None = None, group: str = "",
                 by_process: dict[int, dict[int, float]] | None = None) -> None:
        super().__init__(times or {})
        self.group = group
        self.by_process = by_process or {}

    @property
    def processes(self) -> int:
        """How many worker processes measured these rounds (1 when untagged)."""
        return max(1, len(self.by_process))


class UnpairedGroups(ValueError):
    """Rounds of two different groups were about to be paired (a bug in the caller)."""


def paired_ratio(
    baseline: dict[int, float], candidate: dict[int, float]
) -> Ratio | None:
    """Speed-up of ``candidate`` over ``baseline`` from per-round step times.

    Rounds interleave the configurations (A B A B ...), so drift hits both alike: the
    figure is the median over rounds of each round's own ratio (the paired estimate; a
    ratio of the two sides' medians would let a slow minute that fell on one side's
    median round move it), and the bootstrap resamples whole rounds, keeping each
    round's pair together.

    Args:
        baseline, candidate: round index -> median step time in that round
            (:class:`RoundTimes` carry their group).

    Returns:
        the median of the common rounds' own ratios with a bootstrap CI over rounds, or None
        without common rounds (or none with both times positive).

    Raises:
        UnpairedGroups: both are tagged with their groups and the groups differ: their
            rounds were not interleaved, so pairing them would print a false CI.
    """
    ga, gb = getattr(baseline, "group", ""), getattr(candidate, "group", "")
    if ga and gb and ga != gb:
        raise UnpairedGroups(f"rounds of group {ga!r} paired with rounds of group {gb!r}: "
                             "only trials measured in one interleaved group pair by round")
    rounds = sorted(set(baseline) & set(candidate))
    if not rounds:
        return None
    lr = _round_log_ratios(np.array([baseline[r] for r in rounds]),
                           np.array([candidate[r] for r in rounds]))
    if lr.size == 0:
        return None
    pb = getattr(baseline, "by_process", {}) or {}
    pc = getattr(candidate, "by_process", {}) or {}
    if len(pb) > 1 or len(pc) > 1:
        return _hierarchical_ratio(pb or {0: dict(baseline)}, pc or {0: dict(candidate)},
                                   rounds, lr)
    value = float(np.exp(np.median(lr)))
    if lr.size < 3:
        return Ratio(value, float(np.exp(lr.min())), float(np.exp(lr.max())), len(rounds))
    idx = _rng().integers(0, lr.size, size=(N_BOOT, lr.size))
    boots = np.exp(np.median(lr[idx], axis=1))
    alpha = (1 - CI_LEVEL) / 2
    lo, hi = np.quantile(boots, [alpha, 1 - alpha])
    return Ratio(value, float(min(lo, value)), float(max(hi, value)), len(rounds))


def _round_log_ratios(b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """log(baseline / candidate) of each round whose two times are positive and known."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lr = np.log(b) - np.log(c)
    return lr[np.isfinite(lr)]


def settled(times: Sequence[float], tolerance: float = 0.15) -> bool:
    """Warm-up is over when the last two blocks differ by less than ``tolerance``."""
    if len(times) < 2:
        return False
    a, b = times[-2], times[-1]
    return abs(a - b) <= tolerance * max(a, b)


def ratio_of_medians(baseline: Sequence[float], candidate: Sequence[float]) -> Ratio | None:
    """Speed-up ``median(baseline) / median(candidate)`` with a bootstrap 95% CI.

    The two sets come from different processes (different backends or devices), so
    they are resampled independently (no pairing). ``n_rounds`` holds the smaller
    sample count. Returns None when either set is empty or a median is not positive.

    Example:
        >>> r = ratio_of_medians([2.0, 2.1, 1.9], [1.0, 1.05, 0.95])
        >>> round(r.value, 2)
        2.0
    """
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    if b.size == 0 or c.size == 0:
        return None
    mb, mc = float(np.median(b)), float(np.median(c))
    if mb <= 0 or mc <= 0:
        return None
    value = mb / mc
    if b.size < 3 or c.size < 3:
        lo = float(b.min() / c.max())
        hi = float(b.max() / c.min()) if c.min() > 0 else float("inf")
        return Ratio(value, min(lo, value), max(hi, value), int(min(b.size, c.size)),
                     interleaved=False)
    rng = np.random.default_rng(20261130)  # its own stream: figures stay as they were
    bb = np.median(b[rng.integers(0, b.size, size=(N_BOOT, b.size))], axis=1)
    cc = np.median(c[rng.integers(0, c.size, size=(N_BOOT, c.size))], axis=1)
    ok = cc > 0
    boots = bb[ok] / cc[ok]
    alpha = (1 - CI_LEVEL) / 2
    lo, hi = np.quantile(boots, [alpha, 1 - alpha]) if boots.size else (value, value)
    return Ratio(value, float(min(lo, value)), float(max(hi, value)), int(min(b.size, c.size)),
                 interleaved=False)


# -- across worker processes ----------------------------------------------------------
# A process here settles at its own speed for its life (DESIGN: five reruns of one
# configuration gave 3.6-7.8 ms/step, each with a within-run CI of a few %): the rounds
# of one process are not independent draws of what a rerun would give. With two or more
# processes per configuration the CI comes from a two-level (hierarchical) bootstrap:
# resample the processes, then the rounds within each chosen process (Davison & Hinkley,
# "Bootstrap Methods and their Application", 1997, sec. 3.8: resampling at both stages
# of a two-stage design). With one process it is the ordinary bootstrap over rounds.


def hierarchical_summary(by_process: dict[int, Sequence[float]]) -> Summary:
    """Median, quartiles and a 95% CI of the median of samples measured by several
    worker processes (replica -> that process's samples): the CI resamples processes,
    then samples within each, so it covers what a rerun in a fresh process would give.
    One process: :func:`summarize`.

    Example:
        >>> s = hierarchical_summary({0: [1.0, 1.01, 0.99], 1: [1.2, 1.21, 1.19]})
        >>> s.ci_low < 1.0 < 1.2 < s.ci_high
        True
    """
    groups = [np.asarray(v, dtype=float) for v in by_process.values() if len(v)]
    if not groups:
        raise ValueError("no samples")
    if len(groups) == 1:
        return summarize(groups[0])
    x = np.concatenate(groups)
    q1, med, q3 = np.percentile(x, [25, 50, 75])
    rng = _rng()
    p, width = len(groups), max(g.size for g in groups)
    padded = np.full((p, width), np.nan)
    for j, g in enumerate(groups):
        padded[j, :g.size] = g
    sizes = np.array([g.size for g in groups])
    chosen = rng.integers(0, p, size=(N_BOOT, p))  # processes, with replacement
    n = sizes[chosen][..., None]  # each chosen process's own sample count
    idx = np.floor(rng.random((N_BOOT, p, width)) * n).astype(int)  # then its samples
    draws = padded[chosen[..., None], idx]
    draws[np.arange(width)[None, None, :] >= n] = np.nan  # a smaller process: fewer
    boots = np.nanmedian(draws.reshape(N_BOOT, -1), axis=1)
    alpha = (1 - CI_LEVEL) / 2
    lo, hi = np.quantile(boots, [alpha, 1 - alpha])
    # With two processes the bootstrap can only pick {a,a},{a,b},{b,b}: keep at least
    # the span of the process medians, which is what a rerun has been seen to give.
    meds = [float(np.median(g)) for g in groups]
    return Summary(int(x.size), float(med), float(q1), float(q3),
                   float(min(lo, min(meds))), float(max(hi, max(meds))))


def process_medians(by_process: dict[int, Sequence[float]]) -> dict[int, float]:
    """Each process's median (replica -> median) of its samples."""
    return {k: float(np.median(v)) for k, v in by_process.items() if len(v)}


def between_process_spread(by_process: dict[int, Sequence[float]]) -> float:
    """(max - min) of the process medians relative to their median (0: one process)."""
    meds = list(process_medians(by_process).values())
    if len(meds) < 2:
        return 0.0
    mid = float(np.median(meds))
    return (max(meds) - min(meds)) / mid if mid > 0 else float("inf")


def _hierarchical_ratio(pb: dict[int, dict[int, float]], pc: dict[int, dict[int, float]],
                        rounds: list[int], lr: np.ndarray) -> Ratio:
    """Paired ratio across processes: each bootstrap draw resamples the baseline's and
    the candidate's processes (independently: different processes), then the common
    rounds (jointly: a round's pair stays together); a round's figure is the median of
    the chosen processes' figures in it, and the draw's ratio the median over rounds of
    each round's ratio (as :func:`paired_ratio`, whose per-round log ratios ``lr`` are)."""
    value = float(np.exp(np.median(lr)))

    def matrix(p: dict[int, dict[int, float]]) -> np.ndarray:
        m = np.full((len(p), len(rounds)), np.nan)
        for i, times in enumerate(p.values()):
            for j, r in enumerate(rounds):
                if r in times:
                    m[i, j] = times[r]
        return m

    mb, mc = matrix(pb), matrix(pc)
    rng = _rng()
    n = len(rounds)
    cols = (rng.integers(0, n, size=(N_BOOT, n)) if n >= 3
            else np.broadcast_to(np.arange(n), (N_BOOT, n)))

    def per_round(m: np.ndarray) -> np.ndarray:
        rows = rng.integers(0, m.shape[0], size=(N_BOOT, m.shape[0]))
        with warnings.catch_warnings():  # a round no chosen process measured: NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmedian(m[rows[:, :, None], cols[:, None, :]], axis=1)

    bb, cc = per_round(mb), per_round(mc)
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        # a round's pair stays together: its ratio, NaN where either side is missing
        boots = np.exp(np.nanmedian(np.log(bb) - np.log(cc), axis=1))
    boots = boots[np.isfinite(boots)]
    alpha = (1 - CI_LEVEL) / 2
    lo, hi = np.quantile(boots, [alpha, 1 - alpha]) if boots.size else (value, value)
    return Ratio(value, float(min(lo, value)), float(max(hi, value)), n,
                 processes=(len(pb), len(pc)))
