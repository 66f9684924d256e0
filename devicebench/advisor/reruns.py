"""The advice's final figures against this machine's earlier runs of the same
configurations: what `run` and `report` show (:mod:`devicebench.results.reruns`), and a
caveat when the recommendation rests on a speed-up that reruns here would not hold.

The verdict stays the one measured now (the final's interleaved rounds, in several worker
processes): it is right for this minute. What changes is what the user is told to expect
on a rerun: the final's CIs widened by how far earlier runs of the same pairs moved, and,
when that widened CI of the recommended speed-up reaches 1, a line saying so.
"""

from __future__ import annotations

from dataclasses import replace

from devicebench.advisor.advice import AdviceResult
from devicebench.results.reruns import rerun_lines, with_rerun_spread
from devicebench.store.db import ResultStore


def with_reruns(advice: AdviceResult, store: ResultStore, machine_id: int,
                run_id: int) -> AdviceResult:
    """``advice`` with its final rows' CIs widened by this machine's earlier runs of the
    same configurations (run ``run_id``'s own kept beside them: ``ci95_this_run``) and
    the notes saying how far reruns moved; unchanged when no earlier run measured them."""
    rows = with_rerun_spread(advice.rows, store, machine_id, run_id)
    notes = rerun_lines(rows)
    if not notes:
        return advice
    caveat = rerun_caveat(replace(advice, rows=rows))
    return replace(advice, rows=rows,
                   notes=[*advice.notes, *notes, *([caveat] if caveat else [])])


def rerun_caveat(advice: AdviceResult) -> str | None:
    """One line when the recommended speed-up is significant in this run but its CI
    widened by earlier runs includes 1 (a rerun here may find no gain), else None.

    Example:
        >>> from devicebench.trials.spec import TrialSpec
        >>> rerun_caveat(AdviceResult("seed-rnn", TrialSpec("seed-rnn"), 40.0)) is None
        True
    """
    row = advice.recommended_row
    if row is None or row.speedup is None or row.speedup_this_run is None:
        return None
    own, shown, spread = row.speedup_this_run, row.speedup, row.speedup_reruns
    if own.ci_low <= 1 or shown.ci_low > 1 or spread is None:
        return None
    return (f"{row.result.spec.label}: {own.value:.2f}x faster in this run [95% CI "
            f"{own.ci_low:.2f}-{own.ci_high:.2f}x], but this machine's earlier runs of the "
            f"same pair moved ±{spread.percent:.0%} ({spread.runs - 1} earlier runs): across "
            f"runs [{shown.ci_low:.2f}-{shown.ci_high:.2f}x], which includes no gain; close "
            "other programs and rerun advise before relying on it")
