"""From a stored run to the figures a report shows: the headline answer per workload,
step time per configuration with its CI, the recommendation and its reasons, loss
curves, memory, the machine's op sweep (speed-up vs size, crossover) and doctor's
findings. Renderers in ``report/`` format a :class:`RunReport`; they compute nothing.

Example:
    >>> from devicebench.store import ResultStore
    >>> with ResultStore.open(":memory:") as store:
    ...     build_report(store, None)  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot
from devicebench.errors import InputError
from devicebench.fmt import fmt_bytes, fmt_rate
from devicebench.measure.load import MachineLoad
from devicebench.measure.stats import Ratio, Summary, paired_ratio, ratio_of_medians
from devicebench.ops.analysis import analyse
from devicebench.results.monitor_report import MonitorFigures, monitor_figures
from devicebench.results.reruns import rerun_lines, with_rerun_spread
from devicebench.schema import envelope
from devicebench.store.db import ResultStore
from devicebench.store.ops import fullest_ops_run
from devicebench.store.runs import (
    MONITOR_COMMAND,
    TRAINING_COMMANDS,
    StoredRun,
    latest_run_id,
    load_run,
)
from devicebench.trials.epochs import fit_estimate
from devicebench.trials.headline import Headline, device_partner, headline
from devicebench.trials.result import TrialResult
from devicebench.trials.stability import finding_line, stability_findings
from devicebench.trials.summary import compare

SAME_MATH = ("reference", "same")


@dataclass(frozen=True)
class ConfigFigures:
    """One configuration of a workload in the run."""

    label: str
    spec: dict[str, Any]
    status: str
    error: str
    median_s: float | None
    ci_low_s: float | None
    ci_high_s: float | None
    n_blocks: int
    speedup: Ratio | None  # vs the workload's reference (>1: faster)
    is_reference: bool
    samples_per_s: float | None
    epoch_s: float | None
    first_step_s: float | None
    peak_device_memory_bytes: int | None
    peak_rss_bytes: int | None
    loss_verdict: str
    loss_detail: str
    loss_curve: list[tuple[int, float]]  # (step, loss): equivalence steps, or checkpoints
    spread_warning: str
    fit: dict[str, Any] | None = None  # FitEstimate.to_dict(): epoch parts, whole fit


@dataclass
class WorkloadFigures:
    workload: str
    run_id: int
    command: str
    configs: list[ConfigFigures]
    headline: Headline
    recommendation: str = ""
    reasons: list[str] = field(default_factory=list)
    code: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class OpsCurve:
    """Speed-up of one path over its reference, per size (n: n×n tensors)."""

    label: str
    reference: str
    points: list[tuple[int, float, float, float]]  # size, value, ci_low, ci_high
    crossover: int | None


@dataclass
class OpsFigures:
    op: str
    curves: list[OpsCurve]
    verdict: list[str]


@dataclass
class OpsSection:
    run_id: int
    started_at: str
    against: str  # what the curves compare: "accelerator vs the same path on the CPU" ...
    ops: list[OpsFigures]
    peaks: dict[str, str]
    notes: list[str]


@dataclass
class RunReport:
    """Everything a report shows, for one run (plus the same machine's newest run of
    the other kind: the op sweep next to training, or training next to the op sweep)."""

    generated_at: str
    devicebench_version: str
    run_id: int
    run_label: str
    machine: dict[str, Any]
    environment: list[tuple[str, str]]
    findings: list[dict[str, Any]]
    has_accelerator: bool
    workloads: list[WorkloadFigures] = field(default_factory=list)
    ops: OpsSection | None = None
    notes: list[str] = field(default_factory=list)
    monitor: MonitorFigures | None = None  # a monitored fit: its blocks, nothing else
    stability: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for w, wd in zip(self.workloads, d["workloads"], strict=True):
            wd["headline"] = w.headline.to_dict()  # the same shape advise --json prints
        return envelope("report", d)


# -- environment -------------------------------------------------------------------------
def accelerators_seen(snap: EnvSnapshot) -> list[str]:
    """GPU names any source reported (nvidia-smi, the Apple chip, a framework)."""
    names: list[str] = []
    if snap.nvidia_smi is not None:
        names += [g.name for g in snap.nvidia_smi.gpus if g.name]
    for name, fw in snap.frameworks.items():
        for d in fw.gpu_devices:
            names.append(f"{d.kind} via {name}" + (f" ({d.description})" if d.description
                                                    else ""))
    return names


def environment_lines(snap: EnvSnapshot) -> list[tuple[str, str]]:
    """(label, value) pairs: the machine as doctor summarises it."""
    h = snap.host
    cores = f"{h.cpu_cores_physical or '?'} cores / {h.cpu_cores_logical or '?'} threads"
    lines = [("OS", f"{h.os_version or h.os} [{h.machine}]"),
             ("CPU", f"{h.apple_chip or h.cpu_model or 'unknown'}, {cores}, RAM "
                     f"{fmt_bytes(h.ram_bytes)}"),
             ("Python", f"{h.python_version} ({h.python_implementation})")]
    if snap.nvidia_smi is not None:
        smi = snap.nvidia_smi
        gpus = ", ".join(g.name for g in smi.gpus) or smi.error or "no GPUs listed"
        lines.append(("NVIDIA", f"driver {smi.driver_version or '?'} (CUDA "
                                f"{smi.cuda_version or '?'}): {gpus}"))
    lines.append(("accelerators", ", ".join(accelerators_seen(snap)) or "none seen"))
    for name, p in snap.frameworks.items():
        if p.status == "ok":
            devs = ", ".join(d.kind for d in p.physical_devices) or "none"
            lines.append((name, f"{p.version}, devices: {devs}"))
        else:
            first = p.error.strip().splitlines()[0] if p.error.strip() else ""
            lines.append((name, f"{p.status}: {first}"))
    if not snap.frameworks:
        fws = ", ".join(f"{k} {v}" for k, v in sorted(snap.distributions.items()))
        lines.append(("installed", fws or "unknown"))
    lines.append(("Keras backend", snap.keras_backend))
    lines.append(("snapshot", snap.created_at or "no date"))
    return lines


# -- training ----------------------------------------------------------------------------
def _curve(t: TrialResult) -> list[tuple[int, float]]:
    if t.equivalence_losses:
        return [(i + 1, float(v)) for i, v in enumerate(t.equivalence_losses)]
    pts = []
    for k, v in t.loss_checkpoints.items():
        try:
            pts.append((int(k), float(v)))
        except (TypeError, ValueError):
            continue
    return sorted(pts)


def _config(t: TrialResult, speedup: Ratio | None, is_ref: bool,
            step: Summary | None = None) -> ConfigFigures:
    """One configuration's figures; ``step``: its step time as shown (the CI widened by
    earlier runs), else the trial's own."""
    st = step or t.step_time
    return ConfigFigures(
        t.spec.label, t.spec.to_dict(), t.status, t.error.splitlines()[0] if t.error else "",
        st.median if st else None, st.ci_low if st else None, st.ci_high if st else None,
        st.n if st else 0, speedup, is_ref, t.samples_per_second, t.epoch_seconds,
        t.first_step_seconds, t.peak_device_memory_bytes, t.peak_rss_bytes, t.loss_verdict,
        t.loss_detail, _curve(t), t.spread_warning,
        est.to_dict() if (est := fit_estimate(t)) is not None else None)


def _latest_per_spec(trials: list[TrialResult]) -> list[TrialResult]:
    by_key: dict[str, TrialResult] = {}
    for t in trials:
        by_key[t.spec.key] = t
    return list(by_key.values())


def _ratio(base: TrialResult, cand: TrialResult, interleaved: bool) -> Ratio | None:
    """``base`` time / ``cand`` time: paired by round only inside one interleaved group."""
    if interleaved and base.group_id == cand.group_id:
        r = paired_ratio(base.round_step_times, cand.round_step_times)
        if r is not None:
            return r
    return ratio_of_medians(base.step_samples, cand.step_samples)


def _fmt_ratio(s: Ratio) -> str:
    how = f"{s.n_rounds} interleaved rounds" if s.interleaved else "not interleaved"
    return f"{s.value:.2f}x (95% CI {s.ci_low:.2f}–{s.ci_high:.2f}, {how})"


def _headline(trials: list[TrialResult], run: StoredRun, has_accel: bool) -> Headline:
    """The one accelerator answer (:func:`~devicebench.trials.headline.headline`): an
    advise run's stored headline as it printed it; for a ``run``, its reference
    configuration against the same configuration on the other device."""
    w = trials[0].spec.workload
    summary = run.summary or {}
    if (run.command == "advise" and summary.get("workload") == w
            and isinstance(summary.get("headline"), dict)):
        return Headline.from_dict(summary["headline"])
    ref = next((t for t in trials if t.loss_verdict == "reference"), trials[0])
    group = [t for t in trials if t.group_id == ref.group_id]
    partner = device_partner(ref.spec, [t.spec for t in group])
    return headline(ref.spec, partner, {t.spec: t for t in group}, has_accel)


def _run_recommendation(wf: WorkloadFigures) -> None:
    """For a ``run``: the fastest configuration that trains the same model, and why."""
    same = [c for c in wf.configs if c.status == "ok" and c.median_s
            and c.loss_verdict in SAME_MATH]
    if not same:
        wf.recommendation = "none: no configuration finished with the reference's loss"
        return
    best = min(same, key=lambda c: c.median_s or 0.0)
    ref = next((c for c in wf.configs if c.is_reference), None)
    wf.recommendation = best.label
    if best.is_reference or ref is None:
        wf.reasons.append(f"{best.label} is the fastest measured configuration "
                          f"({best.median_s * 1e3:.3g} ms per step).")
    elif best.speedup is not None:
        wf.reasons.append(f"{best.label} is {_fmt_ratio(best.speedup)} faster per step than "
                          f"the reference {ref.label}.")
        if best.speedup.ci_low <= 1:
            wf.reasons.append("Its CI includes 1: the difference may be noise; measure more "
                              "rounds (devicebench run --rounds N).")
    if best.loss_verdict == "same":
        wf.reasons.append(f"It trains the same model: loss same as the reference "
                          f"({best.loss_detail}).")
    for c in wf.configs:
        if c.status == "ok" and c.loss_verdict in ("differs", "nan"):
            wf.reasons.append(f"{c.label} is not recommended: its loss {c.loss_verdict} "
                              f"({c.loss_detail}).")
        elif c.status != "ok":
            wf.reasons.append(f"{c.label} did not finish: {c.status}: {c.error}")
        if c.spread_warning:
            wf.notes.append(f"{c.label}: {c.spread_warning}")


def _advice_recommendation(wf: WorkloadFigures, summary: dict[str, Any]) -> None:
    rec = summary.get("recommended")
    wf.recommendation = summary.get("verdict") or ""
    if isinstance(rec, dict):
        wf.notes.append(f"advise recommended {rec.get('backend')}/{rec.get('device')}")
    wf.reasons = [str(r.get("text", r)) if isinstance(r, dict) else str(r)
                  for r in summary.get("reasons", [])]
    wf.code = str(summary.get("code") or "")
    wf.notes += [str(n) for n in summary.get("notes", [])]


def training_figures(run: StoredRun, has_accel: bool, store: ResultStore | None = None
                     ) -> list[WorkloadFigures]:
    """Per workload of a ``run`` or ``advise`` run: configurations, headline, advice.
    With ``store``, a ``run``'s CIs are widened by how far the machine's earlier runs of
    the same configurations moved (:mod:`devicebench.results.reruns`), as `run` showed."""
    interleaved = run.command == "run"  # one group per workload, measured in rounds
    out: list[WorkloadFigures] = []
    workloads = list(dict.fromkeys(t.spec.workload for t in run.trials))
    for w in workloads:
        trials = _latest_per_spec([t for t in run.trials if t.spec.workload == w])
        reruns: list[str] = []
        if interleaved:
            rows = compare(trials)
            if store is not None:
                rows = with_rerun_spread(rows, store, run.machine.id, run.id)
                reruns = rerun_lines(rows)
            configs = [_config(r.result, r.speedup, r.is_reference, r.step_time)
                       for r in rows]
        else:
            base = trials[0]
            configs = [_config(t, None if t is base or t.status != "ok" or not t.block_seconds
                               or not base.block_seconds else _ratio(base, t, False),
                               t is base) for t in trials]
        wf = WorkloadFigures(w, run.id, run.command, configs,
                             _headline(trials, run, has_accel))
        summary = run.summary
        if run.command == "advise" and summary and summary.get("workload") == w:
            _advice_recommendation(wf, summary)
        else:
            _run_recommendation(wf)
        wf.notes += reruns
        out.append(wf)
    return out


def _stability(run: StoredRun) -> list[Finding]:
    """Stability findings of a stored run's trials, and of the machine's load around
    them where the run stored it (runs since schema 5's replication do)."""
    load = MachineLoad.from_dict((run.summary or {}).get("load"))
    return stability_findings(_latest_per_spec(run.trials), load.before, load.after,
                              cpu_speed=load.cpu_speed)


# -- ops ---------------------------------------------------------------------------------
def ops_section(run: StoredRun) -> OpsSection | None:
    """Speed-up-vs-size curves of an ``ops`` run: accelerator paths against the same path
    on the CPU when there are any, else CPU framework paths against numpy."""
    if not run.ops:
        return None
    accelerators = sorted({w.device for w in run.ops if w.device != "cpu" and w.status == "ok"})
    analysis = analyse(run.ops, accelerators, [])
    against = ("each accelerator path against the same backend and mode on the CPU"
               if accelerators else "each CPU framework path against numpy (no accelerator)")
    ops: list[OpsFigures] = []
    for op in analysis.ops:
        curves = []
        for p in op.paths:
            if p.ref is None or (accelerators and p.device == "cpu"):
                continue
            pts = [(s, r.value, r.ci_low, r.ci_high) for s, r in p.speedups if r is not None]
            if pts:
                curves.append(OpsCurve(p.label, p.ref, pts, p.crossover))
        ops.append(OpsFigures(op.op, curves, list(op.verdict)))
    peaks = {d: f"{fmt_rate(p.flops_per_s, 'flops')} ({p.label}, n={p.size})"
             for d, p in analysis.peaks.items()}
    return OpsSection(run.id, run.started_at, against, ops, peaks, list(analysis.notes))


# -- the whole report ---------------------------------------------------------------------
def resolve_run(store: ResultStore, run_id: int | None) -> int:
    """``run_id``, or the newest run with results (``--last``).

    Raises:
        InputError: the database holds no run with results.
    """
    if run_id is not None:
        return run_id
    found = latest_run_id(store)
    if found is None:
        raise InputError(f"no run with results in {store.path}",
                         fix="measure first: devicebench run seed-rnn (or devicebench ops), "
                             "or import a bundle: devicebench import bundle.json")
    return found


def build_report(store: ResultStore, run_id: int | None,
                 ops_run_id: int | None = None) -> RunReport:
    """The report of run ``run_id`` (None: the newest), with the same machine's run of
    the other kind: the newest training run next to an op sweep; next to training, the
    op sweep ``ops_run_id`` or else the fullest of the machine's recent sweeps
    (:func:`~devicebench.store.ops.fullest_ops_run`).

    Raises:
        InputError: no such run / no runs; ``ops_run_id`` is not an op sweep.
    """
    from devicebench import __version__
    from devicebench.env.checks import run_checks

    run = load_run(store, resolve_run(store, run_id))
    snap = run.machine.snapshot
    has_accel = bool(accelerators_seen(snap))
    report = RunReport(
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        devicebench_version=__version__, run_id=run.id, run_label=run.label,
        machine=run.machine.identity() | {"fingerprint": run.machine.fingerprint},
        environment=environment_lines(snap),
        findings=[f.to_dict() for f in run_checks(snap)], has_accelerator=has_accel)
    if run.imported_from:
        report.notes.append(f"run {run.id} was imported from {run.imported_from}")
    if run.finished_at is None:
        report.notes.append(f"run {run.id} did not finish (interrupted): what it stored is "
                            "shown")
    if run.command == MONITOR_COMMAND:
        # A monitored fit is its own story: no other run's training figures beside it.
        from devicebench.store.monitor import load_monitor_blocks

        report.monitor = monitor_figures(run, load_monitor_blocks(store, run.id))
        return report
    training = run if run.command in TRAINING_COMMANDS else None
    ops_run = run if run.ops else None
    if ops_run_id is not None:
        named = load_run(store, ops_run_id)
        if not named.ops:
            raise InputError(f"run {ops_run_id} is not an op sweep (it is a "
                             f"{named.command} run)",
                             fix="pick an ops run from `devicebench history`")
        ops_run = named
    if training is None:
        other = latest_run_id(store, TRAINING_COMMANDS, run.machine.id)
    else:
        other = None if ops_run is not None else fullest_ops_run(store, run.machine.id)
    if other is not None:
        extra = load_run(store, other)
        if training is None and extra.command in TRAINING_COMMANDS:
            training = extra
            report.notes.append(f"training figures from run {extra.id} ({extra.command}, "
                                f"{extra.started_at[:16]}), the newest on this machine")
        elif ops_run is None and extra.ops:
            ops_run = extra
            report.notes.append(f"op-sweep figures from run {extra.id} "
                                f"({extra.started_at[:16]}), the fullest of this machine's "
                                "recent sweeps (report --ops-run ID picks another)")
    if training is not None:
        report.workloads = training_figures(training, has_accel, store)
        report.stability = _stability(training)
        shown = {n for w in report.workloads for n in w.notes}  # advise stored its own
        report.notes += [line for f in report.stability
                         if (line := finding_line(f)) not in shown]
    if ops_run is not None:
        report.ops = ops_section(ops_run)
    return report
