"""Do two trials train the same model? Compare loss trajectories from the same weights."""

from __future__ import annotations

import math
from collections.abc import Sequence

from devicebench.trials.result import TrialResult

# float32 runs from the same initial weights agree to ~1e-6 relative over 200 steps
# across TF (jit on/off), JAX and torch on this project's reference machine; 1e-3
# leaves room for reduction-order differences on other hardware. Reduced precision
# rounds every activation to 8-11 mantissa bits, so it gets its own, wider tolerance.
RTOL_FLOAT32 = 1e-3
RTOL_MIXED = 5e-2
ATOL = 1e-6


def tolerance_for(precision: str) -> float:
    return RTOL_FLOAT32 if precision == "float32" else RTOL_MIXED


def compare_losses(
    reference: Sequence[float], candidate: Sequence[float], rtol: float
) -> tuple[str, str]:
    """Verdict ``same`` | ``differs`` | ``nan`` with the numbers behind it.

    Example:
        >>> compare_losses([1.0, 0.5], [1.0, 0.5000001], 1e-3)[0]
        'same'
    """
    if any(not math.isfinite(v) for v in candidate):
        step = next(i for i, v in enumerate(candidate, 1) if not math.isfinite(v))
        return "nan", f"loss is {candidate[step - 1]} at step {step}"
    n = min(len(reference), len(candidate))
    if n == 0:
        return "n/a", "no loss trajectory to compare"
    worst, worst_step = 0.0, 0
    for i in range(n):
        ref, cand = reference[i], candidate[i]
        rel = abs(cand - ref) / max(abs(ref), ATOL)
        if rel > worst:
            worst, worst_step = rel, i + 1
    detail = (f"max relative difference {worst:.1e} at step {worst_step} of {n} "
              f"(tolerance {rtol:.0e})")
    if worst_step:
        detail += (f"; loss {candidate[worst_step - 1]:.6g} vs reference "
                   f"{reference[worst_step - 1]:.6g}")
    return ("same" if worst <= rtol else "differs"), detail


def loss_check(reference: TrialResult, candidate: TrialResult) -> tuple[str, str]:
    """The equivalence policy the trial engine is given (``TrialGroup(loss_check=...)``):
    ``candidate``'s equivalence losses against ``reference``'s, within the wider of the
    two precisions' tolerances."""
    rtol = max(tolerance_for(candidate.spec.precision),
               tolerance_for(reference.spec.precision))
    return compare_losses(reference.equivalence_losses, candidate.equivalence_losses, rtol)
