"""Every formatter of figures for people, in one home below every layer that words a
figure (ops verdicts, the advisor's reasons, the monitor callback, report/). Pure
functions: numbers in, text out; nothing here prints.

Durations come in three styles, each kept where its output is already relied on:
:func:`fmt_seconds` (three significant figures, any unit from s to ps: the op sweep),
:func:`fmt_duration` (fixed decimals for table columns: run, advise, monitor, HTML) and
:func:`fmt_time` (three significant figures, ms and below: the advisor's reasons).
"""

from __future__ import annotations

import math


def fmt_seconds(s: float | None) -> str:
    """``15.2 µs``, ``3.1 ms``, ``0.42 ns``."""
    if s is None or not math.isfinite(s):
        return "-"
    if s == 0:
        return "0"
    a = abs(s)
    for scale, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
        if a >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s * 1e12:.3g} ps"


def fmt_duration(s: float | None) -> str:
    """Table style, fixed decimals: ``812 µs``, ``3.14 ms``, ``1.23 s`` (``-``: None)."""
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def fmt_time(s: float) -> str:
    """Seconds as ms, µs or ns, three significant figures (for the reasons' text)."""
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs" if s >= 1e-6 else f"{s * 1e9:.3g} ns"


def fmt_rate(rate: float | None, unit: str) -> str:
    """``27.5 GB/s`` or ``180 GFLOP/s``."""
    if rate is None or not math.isfinite(rate):
        return "-"
    name = "FLOP/s" if unit == "flops" else "B/s"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if rate >= scale:
            return f"{rate / scale:.3g} {prefix}{name}"
    return f"{rate:.3g} {name}"


def fmt_pct(pct: float | None) -> str:
    """``0.52%``, ``38%``, ``1000%``."""
    if pct is None or not math.isfinite(pct):
        return "-"
    return f"{pct:.2g}%" if pct < 10 else f"{pct:.0f}%"


def fmt_ratio(x: float) -> str:
    """``0.72x``, ``3.1x``, ``97x``, ``1300x`` (never an exponent)."""
    return f"{x:.2g}x" if x < 10 else f"{x:.0f}x"


def fmt_ratio_ci(r: object | None) -> str:
    """A speed-up with its CI and how it was measured, for the reports:
    ``"2.00x [1.90–2.10] (12 interleaved rounds)"``; "-" for None. ``r`` is a
    :class:`devicebench.measure.stats.Ratio` (value, ci_low, ci_high, n_rounds, interleaved).
    """
    if r is None:
        return "-"
    how = (f"{r.n_rounds} interleaved rounds" if getattr(r, "interleaved", True)
           else "not interleaved")
    return f"{r.value:.2f}x [{r.ci_low:.2f}–{r.ci_high:.2f}] ({how})"


def fmt_count(x: float) -> str:
    """``1.23G``, ``45.6k``, ``812``."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.0f}"


def fmt_bytes(n: int | None) -> str:
    """``1.5 GiB``, ``12.0 MiB``, ``512 B``; ``unknown`` for None or 0."""
    if not n:
        return "unknown"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
