"""A script's own input pipeline (a ``tf.data.Dataset``, ``PyDataset`` or generator,
timed apart at capture) against the training step the advice measured on the
materialised arrays: ``input pipeline: 4.10 ms/batch vs step 2.30 ms``, and a finding
when the pipeline is the slower of the two (the step would wait for it, so the step
times, measured without it, overstate what the script's fit() reaches)."""

from __future__ import annotations

from typing import Any

from devicebench.fmt import fmt_duration

FIX = ("speed the pipeline up first: .cache() after the expensive map, "
       ".map(..., num_parallel_calls=tf.data.AUTOTUNE), .prefetch(tf.data.AUTOTUNE); "
       "for a PyDataset, workers=N (and use_multiprocessing=True for Python-heavy work)")


def _step(row: Any) -> float | None:
    st = getattr(getattr(row, "result", None), "step_time", None)
    return float(st.median) if st is not None and st.median else None


def pipeline_figures(info: dict[str, Any], baseline_row: Any = None,
                     recommended_row: Any = None) -> dict[str, Any] | None:
    """The comparison as data (``--json``'s ``input_pipeline``), or None when the script
    fed fit() arrays or its pipeline could not be timed.

    ``info`` is the capture's record (``pipeline_seconds_per_batch``, ...); the rows are
    the advice's final rows of the script as written and of the recommended change.

    Example:
        >>> pipeline_figures({"source": "generator", "pipeline_seconds_per_batch": 0.004,
        ...                   "pipeline_batches_timed": 9})["slower_than_step"]
        False
    """
    per_batch = info.get("pipeline_seconds_per_batch")
    if not per_batch or (info.get("source") or "arrays") == "arrays":
        return None
    step, rec = _step(baseline_row), _step(recommended_row)
    if recommended_row is not None and recommended_row is baseline_row:
        rec = None
    how = ("a second pass over it" if info.get("pipeline_method") == "second pass"
           else "while its batches were read at capture (read once)")
    workers = info.get("pipeline_workers")
    out: dict[str, Any] = {
        "source": info.get("source"), "seconds_per_batch": per_batch,
        "first_pass_seconds_per_batch": info.get("pipeline_first_pass_seconds_per_batch"),
        "first_batch_seconds": info.get("pipeline_first_batch_seconds"),
        "batches_timed": info.get("pipeline_batches_timed"),
        "method": info.get("pipeline_method"), "workers": workers,
        "batches_materialised": info.get("batches"),
        "step_seconds": step, "recommended_step_seconds": rec,
        "slower_than_step": bool(step and per_batch > step),
        "slower_than_recommended": bool(rec and per_batch > rec),
    }
    line = f"input pipeline: {fmt_duration(per_batch)}/batch vs step {fmt_duration(step)}"
    line += " (your script as written" + (f"; recommended {fmt_duration(rec)})" if rec else ")")
    line += (f" — your {out['source']} read alone, not overlapped with training, over "
             f"{out['batches_timed']} batches ({how}); the steps ran on its materialised "
             "batches")
    if workers:
        line += f"; your fit() reads it with workers={workers}, which this did not"
    out["line"] = line
    finding = ""
    if out["slower_than_step"]:
        finding = (f"your {out['source']} is slower than the training step "
                   f"({fmt_duration(per_batch)} vs {fmt_duration(step)} per batch): your "
                   f"fit() waits for its input, so it reaches about "
                   f"{fmt_duration(per_batch)}/step at best, and a faster device or knob "
                   f"shortens only the part not spent waiting — {FIX}")
        out["verdict_note"] = (f"your input pipeline ({fmt_duration(per_batch)}/batch) is "
                               "slower than the step: speed it up first (see the finding)")
    elif out["slower_than_recommended"]:
        finding = (f"your {out['source']} ({fmt_duration(per_batch)}/batch) is slower than "
                   f"the recommended step ({fmt_duration(rec)}): the speed-up is capped "
                   f"at what the pipeline delivers — {FIX}")
        out["verdict_note"] = (f"capped by your input pipeline ({fmt_duration(per_batch)}"
                               "/batch): see the finding")
    out["finding"] = finding
    return out
