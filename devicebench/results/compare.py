"""``devicebench compare A B``: the same workload and configuration measured in two runs
(on one machine or two), as a ratio of median step times with a 95% CI.

Two runs were never interleaved: their blocks come from different processes at
different times (and perhaps different machines), so nothing pairs a block of A with a
block of B. The CI resamples each run's blocks independently (a bootstrap per side), and
every row says "not interleaved": drift between the two runs is not cancelled the way
it is inside one run's interleaved rounds.

Example:
    >>> from devicebench.store import ResultStore
    >>> with ResultStore.open(":memory:") as store:
    ...     compare_runs(store, 1, 2)  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from devicebench.errors import InputError
from devicebench.measure.stats import Ratio, ratio_of_medians, summarize
from devicebench.schema import envelope
from devicebench.store.db import ResultStore
from devicebench.store.runs import StoredRun, load_run
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec

PAIRING = "not interleaved: two independent runs; CI from resampling each run's blocks separately"


def spec_differences(a: TrialSpec, b: TrialSpec) -> list[str]:
    """``"device: gpu:0 vs cpu"`` for every field in which the two specs differ."""
    da, db = a.to_dict(), b.to_dict()
    return [f"{k}: {da[k]} vs {db[k]}" for k in da if da[k] != db[k]]


def machine_differences(a: StoredRun, b: StoredRun) -> list[str]:
    """What differs between the two runs' machines (hardware, OS, Python, frameworks)."""
    if a.machine.fingerprint == b.machine.fingerprint:
        return []
    ia, ib = a.machine.identity(), b.machine.identity()
    out = [f"{k}: {ia[k]} vs {ib[k]}" for k in ("cpu", "gpu", "os", "python") if ia[k] != ib[k]]
    fa, fb = ia["frameworks"], ib["frameworks"]
    for name in sorted(set(fa) | set(fb)):
        if fa.get(name) != fb.get(name):
            out.append(f"{name}: {fa.get(name, 'absent')} vs {fb.get(name, 'absent')}")
    return out


@dataclass(frozen=True)
class Side:
    """One run's trial of the compared configuration."""

    run_id: int
    label: str
    median: float
    ci_low: float
    ci_high: float
    n_blocks: int

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "label": self.label, "median_step_s": self.median,
                "ci95": [self.ci_low, self.ci_high], "n_blocks": self.n_blocks}


@dataclass(frozen=True)
class CompareRow:
    """One configuration in both runs. ``speedup`` = median A / median B (>1: B faster)."""

    workload: str
    a: Side
    b: Side
    speedup: Ratio
    spec_differences: list[str]

    @property
    def verdict(self) -> str:
        s = self.speedup
        ci = f"[95% CI {s.ci_low:.2f}–{s.ci_high:.2f}]"
        if s.ci_low > 1:
            return f"run {self.b.run_id} is {s.value:.2f}x faster {ci}"
        if s.ci_high < 1:
            return f"run {self.b.run_id} is {1 / s.value:.2f}x slower {ci}"
        return f"no clear difference ({s.value:.2f}x {ci})"

    def to_dict(self) -> dict[str, Any]:
        s = self.speedup
        return {"workload": self.workload, "a": self.a.to_dict(), "b": self.b.to_dict(),
                "speedup_b_over_a": {"value": s.value, "ci95": [s.ci_low, s.ci_high],
                                     "interleaved": False, "pairing": PAIRING},
                "spec_differences": self.spec_differences, "verdict": self.verdict}


@dataclass
class RunComparison:
    """Everything ``compare`` says: rows, what differs, and what has no counterpart."""

    run_a: int
    run_b: int
    label_a: str
    label_b: str
    machine_differences: list[str]
    rows: list[CompareRow] = field(default_factory=list)
    only_in_a: list[str] = field(default_factory=list)
    only_in_b: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return envelope("compare", {
            "run_a": self.run_a, "run_b": self.run_b,
            "label_a": self.label_a, "label_b": self.label_b,
            "interleaved": False, "pairing": PAIRING,
            "machine_differences": self.machine_differences,
            "rows": [r.to_dict() for r in self.rows], "only_in_a": self.only_in_a,
            "only_in_b": self.only_in_b, "notes": self.notes})


def _latest_ok(run: StoredRun, workload: str | None) -> dict[str, TrialResult]:
    """Per spec key, the run's last ``ok`` trial with timed blocks (an advise run may
    measure a spec in a rung and again in its final: the final is the later one)."""
    out: dict[str, TrialResult] = {}
    for t in run.trials:
        if t.status == "ok" and t.block_seconds and (workload is None
                                                     or t.spec.workload == workload):
            out[t.spec.key] = t
    return out


def _side(run_id: int, t: TrialResult) -> Side:
    s = summarize(t.step_samples)
    return Side(run_id, t.spec.label, s.median, s.ci_low, s.ci_high, s.n)


def _row(a_run: int, a: TrialResult, b_run: int, b: TrialResult) -> CompareRow | None:
    ratio = ratio_of_medians(a.step_samples, b.step_samples)
    if ratio is None:
        return None
    return CompareRow(a.spec.workload, _side(a_run, a), _side(b_run, b), ratio,
                      spec_differences(a.spec, b.spec))


def _pick(trials: dict[str, TrialResult], label: str, which: str, run: StoredRun) -> TrialResult:
    found = [t for t in trials.values() if t.spec.label == label]
    if len(found) != 1:
        have = ", ".join(sorted({f"{t.spec.workload} {t.spec.label}"
                                 for t in trials.values()})) or "none"
        n = "no" if not found else f"{len(found)}"
        raise InputError(f"run {run.id} has {n} ok trial labelled {label!r} "
                         f"(--config-{which}); it has: {have}",
                         fix="pass one of those labels, and --workload NAME when several match")
    return found[0]


def compare_runs(store: ResultStore, run_a: int, run_b: int, *, workload: str | None = None,
                 config_a: str | None = None, config_b: str | None = None
                 ) -> RunComparison:
    """Compare two stored runs configuration by configuration.

    Without ``config_a``/``config_b``, trials are matched by identical spec (same
    workload, backend, device, precision, jit, batch size, pipeline, threads, ...);
    different machines are allowed and their differences listed. With both, those two
    configurations (labels as ``devicebench run`` prints them) are compared and every
    spec field that differs is flagged.

    Raises:
        InputError: a run is missing, A and B are the same run, one label is given
            without the other, or nothing can be matched (the message lists what each
            run has and how to choose).
    """
    if run_a == run_b:
        raise InputError(f"A and B are the same run ({run_a})",
                         why="configurations inside one run were measured interleaved; "
                             "`devicebench report` shows their paired speed-ups",
                         fix=f"devicebench report --run {run_a}")
    if (config_a is None) != (config_b is None):
        raise InputError("--config-a and --config-b go together",
                         fix="pass both, e.g. --config-a jax/gpu:0 --config-b jax/cpu")
    a, b = load_run(store, run_a), load_run(store, run_b)
    ta, tb = _latest_ok(a, workload), _latest_ok(b, workload)
    if workload is not None and not ta and not tb:  # `--workload nope`: say which exist
        have = sorted({t.spec.workload for t in a.trials + b.trials})
        raise InputError(f"no measured {workload!r} in run {a.id} or {b.id}",
                         fix="pass --workload with one of: " + (", ".join(have) or
                                                                "(no trials in either run)"))
    out = RunComparison(a.id, b.id, a.label, b.label, machine_differences(a, b))
    if config_a is not None and config_b is not None:
        x, y = _pick(ta, config_a, "a", a), _pick(tb, config_b, "b", b)
        if x.spec.workload != y.spec.workload:
            raise InputError(f"the two configurations train different workloads "
                             f"({x.spec.workload} vs {y.spec.workload})",
                             why="a step of one model says nothing about a step of another",
                             fix="pick configurations of the same workload (--workload NAME)")
        row = _row(a.id, x, b.id, y)
        if row is not None:
            out.rows.append(row)
        if row is not None and row.spec_differences:
            out.notes.append("the configurations differ (" + "; ".join(row.spec_differences)
                             + "): the ratio compares those settings as well as the runs")
        return out
    for key, x in ta.items():
        y = tb.get(key)
        if y is None:
            out.only_in_a.append(f"{x.spec.workload} {x.spec.label}")
            continue
        row = _row(a.id, x, b.id, y)
        if row is not None:
            out.rows.append(row)
    out.only_in_b = [f"{t.spec.workload} {t.spec.label}" for k, t in tb.items() if k not in ta]
    if not out.rows:
        raise InputError(
            f"runs {a.id} and {b.id} share no configuration with a measured step time "
            f"(A: {', '.join(out.only_in_a) or 'none'}; B: {', '.join(out.only_in_b) or 'none'})",
            why="only the same workload and configuration can be compared as it is",
            fix="pick two with --config-a LABEL --config-b LABEL (differences are flagged), "
                "or measure the same spec: devicebench run WORKLOAD --backend B --device D")
    return out
