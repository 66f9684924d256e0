"""Turn trial results into comparison rows (derived numbers only; renderers format them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from devicebench.measure.reruns import RerunSpread
from devicebench.measure.stats import Ratio, Summary, paired_ratio
from devicebench.trials.epochs import FitEstimate, fit_estimate
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec


@dataclass(frozen=True)
class ComparisonRow:
    result: TrialResult
    is_reference: bool
    speedup: Ratio | None  # reference step time / this step time (>1: faster)
    fit: FitEstimate | None = None  # the epoch (training + validation) and a whole fit
    # Earlier runs of the same figures on this machine (devicebench.results.reruns): the
    # run-to-run spread, and the CIs widened by it (``speedup`` then holds the widened
    # ratio, ``speedup_this_run`` this run's own; ``step_time_reruns`` the widened step).
    step_reruns: RerunSpread | None = None
    speedup_reruns: RerunSpread | None = None
    speedup_this_run: Ratio | None = None
    step_time_reruns: Summary | None = None

    @property
    def step_time(self) -> Summary | None:
        """The step time as shown: its CI widened by this machine's run-to-run spread
        when earlier runs give one, else the run's own."""
        return self.step_time_reruns or self.result.step_time

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        st = self.step_time
        d: dict[str, Any] = {
            "workload": r.spec.workload,
            "label": r.spec.label,
            "spec": r.spec.to_dict(),
            "spec_key": r.spec.key,
            "status": r.status,
            "error": r.error,
            "is_reference": self.is_reference,
            "step_time_s": None,
            "samples_per_s": r.samples_per_second,
            "epoch_s": r.epoch_seconds,
            "train_epoch_s": r.train_epoch_seconds,
            "validation_s": r.validation_pass_seconds,
            "steps_per_epoch": r.steps_per_epoch,
            "fit": self.fit.to_dict() if self.fit is not None else None,
            "achieved_flops": r.achieved_flops,
            "flops_per_step": r.flops_per_step,
            "first_step_s": r.first_step_seconds,
            "warmup_s": r.warmup_seconds,
            "setup_s": r.setup_seconds,
            "import_s": r.import_seconds,
            "peak_device_memory_bytes": r.peak_device_memory_bytes,
            "peak_rss_bytes": r.peak_rss_bytes,
            "loss_verdict": r.loss_verdict,
            "loss_detail": r.loss_detail,
            "loss_checkpoints": r.loss_checkpoints,
            "final_loss": r.final_loss,
            "data_note": r.data_note,
            "placement": r.placement,
            "input_s_per_batch": r.input_seconds_per_batch,
            "jit_resolved": r.jit_resolved,
            "spread_warning": r.spread_warning,
            "raw": {"block_seconds": r.block_seconds, "block_rounds": r.block_rounds,
                    "block_replicas": r.block_replicas,
                    "steps_per_block": r.steps_per_block,
                    "validation_seconds": r.validation_seconds,
                    "validation_rounds": r.validation_rounds,
                    "validation_first_seconds": r.validation_first_seconds},
        }
        if st is not None:
            d["step_time_s"] = {"median": st.median, "q1": st.q1, "q3": st.q3,
                                "ci95": [st.ci_low, st.ci_high], "n_blocks": st.n,
                                "processes": r.processes,
                                "process_spread": r.process_spread}
            if self.step_reruns is not None and r.step_time is not None:
                own = r.step_time
                d["step_time_s"]["ci95_this_run"] = [own.ci_low, own.ci_high]
                d["step_time_s"]["reruns"] = _spread(self.step_reruns)
        if self.speedup is not None:
            s = self.speedup
            d["speedup_vs_reference"] = {"value": s.value, "ci95": [s.ci_low, s.ci_high],
                                         "rounds": s.n_rounds,
                                         "processes": list(s.processes)}
            if self.speedup_reruns is not None:
                own = self.speedup_this_run or s
                d["speedup_vs_reference"]["ci95_this_run"] = [own.ci_low, own.ci_high]
                d["speedup_vs_reference"]["reruns"] = _spread(self.speedup_reruns)
        return d


def _spread(s: RerunSpread) -> dict[str, Any]:
    return {"runs": s.runs, "between_run_sd_log": s.tau, "between_run_range": s.percent,
            "values": list(s.values)}


def compare(results: list[TrialResult], epochs: int | None = None) -> list[ComparisonRow]:
    """Rows per workload and group measured together; the reference is the trial whose
    verdict is ``reference``. Results of different groups are never paired: each group
    is compared within itself. ``epochs``: the whole fit each row shows (default: the
    workload's own epochs)."""
    rows: list[ComparisonRow] = []
    by_group: dict[tuple[str, str], list[TrialResult]] = {}
    for r in results:
        by_group.setdefault((r.spec.workload, r.group_id), []).append(r)
    for group in by_group.values():
        ref = next((r for r in group if r.loss_verdict == "reference"), None)
        for r in group:
            ratio = None
            if ref is not None and r is not ref and r.status == "ok" and r.block_seconds:
                ratio = paired_ratio(ref.round_step_times, r.round_step_times)
            rows.append(ComparisonRow(r, r is ref, ratio, fit_estimate(r, epochs)))
    return rows


def ratios_precise(reference: TrialSpec, rel_halfwidth: float
                   ) -> Callable[[dict[TrialSpec, TrialResult]], bool]:
    """A stop rule for :meth:`TrialGroup.measure` (its ``enough``): stop once every
    trial's paired speed-up over ``reference`` has a 95% CI within ±``rel_halfwidth`` of
    its value. A comparison is about the ratio, and two step times each within ±3% can
    still give a ratio whose CI is wider: this rule takes more rounds where it is.

    Example:
        >>> run_workload_group([a, b], RunOptions(target_ci=0, budget_seconds=120),
        ...                    enough=ratios_precise(a, 0.02))  # doctest: +SKIP
    """

    def enough(results: dict[TrialSpec, TrialResult]) -> bool:
        base = results.get(reference)
        if base is None or base.status != "ok":
            return True  # nothing to compare with: more rounds cannot help
        for spec, r in results.items():
            if spec == reference or r.status != "ok" or not r.block_seconds:
                continue
            q = paired_ratio(base.round_step_times, r.round_step_times)
            if q is None or (q.ci_high - q.ci_low) / 2 > rel_halfwidth * q.value:
                return False
        return True

    return enough
