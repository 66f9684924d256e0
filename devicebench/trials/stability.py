"""Stability checks on measured trials, pyperf-style (pyperf's ``check`` warns when a
benchmark's standard deviation is over 10% of its mean, when it has too few values, and
suggests what to do): each returns findings with the number, why it matters and what to
do, never prints. Used by ``run``, ``advise`` and ``report``."""

from __future__ import annotations

from collections.abc import Iterable

from devicebench.env.finding import Finding
from devicebench.fmt import fmt_time
from devicebench.measure.cpuspeed import CpuSpeed
from devicebench.measure.load import LoadReading, steal_fraction
from devicebench.trials.replication import process_cis, processes_disagree
from devicebench.trials.result import TrialResult

SPREAD_LIMIT = 0.10  # a spread (IQR, or across processes) over 10% of the median
MIN_ROUNDS = 5  # fewer timed rounds than this: the CI rests on too little
OTHER_LOAD_PER_CORE = 0.5  # load from other processes above this per core: busy
STEAL_LIMIT = 0.05  # the hypervisor took more than 5% of CPU time for other guests
SPEED_LIMIT = 0.10  # the reference loop's slowest tenth over 10% above its fastest
MIN_SPEED_SAMPLES = 5  # fewer reference samples than this (a run under ~2 s): no judgement
QUIET = "close other programs (browsers, IDEs, builds) and rerun"


def _rounds(r: TrialResult) -> int:
    return len(set(r.block_rounds)) if r.block_rounds else len(r.block_seconds)


def trial_findings(results: Iterable[TrialResult]) -> list[Finding]:
    """Per trial: processes that disagree beyond their own CIs, a spread over 10% of the
    median, too few rounds."""
    out: list[Finding] = []
    for r in results:
        st = r.step_time
        if r.status != "ok" or st is None:
            continue
        who = f"{r.spec.workload} {r.spec.label}"
        ci = f"figures for it here are ±{st.rel_ci_halfwidth:.0%}"
        if r.processes > 1 and processes_disagree(r):
            cis = ", ".join(f"{fmt_time((lo + hi) / 2)} [{fmt_time(lo)}–{fmt_time(hi)}]"
                            for lo, hi in process_cis(r).values())
            out.append(Finding(
                "stability.processes-disagree", "warning",
                f"{who}: its worker processes disagree",
                observed=(f"{r.processes} processes measured medians {r.process_spread:.0%} "
                          f"apart, beyond their own 95% CIs ({cis})"),
                why=("each process settles at its own speed for its life: one process's CI "
                     "does not say what a rerun gives; the CI shown spans the processes"),
                fix=f"{ci}; {QUIET}, or give it more processes (a larger --budget)"))
        spread = max((st.q3 - st.q1) / st.median if st.median > 0 else 0.0,
                     r.process_spread)
        if spread > SPREAD_LIMIT:
            out.append(Finding(
                "stability.wide-spread", "warning", f"{who}: its step times spread widely",
                observed=(f"spread {spread:.0%} of the median ({fmt_time(st.median)}; "
                          f"interquartile range {fmt_time(st.q3 - st.q1)}"
                          + (f", processes {r.process_spread:.0%} apart" if r.processes > 1
                             else "") + ")"),
                why="above 10% the median moves from run to run by more than most "
                    "speed-ups worth acting on",
                fix=f"{ci}; {QUIET}, or measure more rounds (run --rounds 15)"))
        n = _rounds(r)
        if n < MIN_ROUNDS:
            out.append(Finding(
                "stability.too-few-rounds", "warning", f"{who}: too few rounds",
                observed=f"{n} timed round(s) (at least {MIN_ROUNDS} make a CI)",
                why="a bootstrap CI over fewer rounds is the sample range, not a CI",
                fix=f"measure more: run --rounds {2 * MIN_ROUNDS}, or advise --budget 120"))
    return out


def load_findings(before: LoadReading | None, after: LoadReading | None,
                  own_workers: int = 1) -> list[Finding]:
    """Load from other processes during the measurement: the 1-minute load average
    before (nothing of ours yet) and after (less ``own_workers``: the interleaved
    workers keep about one core busy at a time), and the CPU steal between."""
    out: list[Finding] = []
    if before is None or after is None:
        return out
    cores = max(before.cores, 1)
    other_before = before.load1
    other_after = max(0.0, after.load1 - own_workers)
    busy = max(other_before, other_after)
    if busy > OTHER_LOAD_PER_CORE * cores:
        out.append(Finding(
            "stability.machine-busy", "warning", "other processes loaded the machine",
            observed=(f"1-minute load average {before.load1:.2f} before and {after.load1:.2f} "
                      f"after the measurement on {cores} cores (about {busy:.1f} from other "
                      "processes)"),
            why="other work shares the cores and changes speed during the run; ratios "
                "measured interleaved suffer least, absolute times most",
            fix=f"{QUIET}; until then read the absolute step times as ±their CI or worse"))
    steal = steal_fraction(before, after)
    if steal is not None and steal > STEAL_LIMIT:
        out.append(Finding(
            "stability.cpu-steal", "warning", "the hypervisor took CPU time",
            observed=f"CPU steal {steal:.0%} of CPU time during the measurement",
            why="on a shared virtual machine other guests ran on these cores; speed "
                "varies with their load, not with the configuration",
            fix="rerun at a quieter time, or on a dedicated (non-shared) machine"))
    return out


def cpu_speed_findings(speed: CpuSpeed | None) -> list[Finding]:
    """The CPU's own speed changing during the measurement: the reference loop of
    :mod:`devicebench.measure.cpuspeed`, timed on its thread's CPU clock, slower in some
    samples than in others by more than :data:`SPEED_LIMIT` (other tenants of a cloud
    host's physical cores, turbo or thermal limits: invisible to the load average)."""
    if speed is None or len(speed.samples) < MIN_SPEED_SAMPLES or speed.fastest <= 0:
        return []
    varied = speed.slowest / speed.fastest - 1
    if varied <= SPEED_LIMIT:
        return []
    return [Finding(
        "stability.cpu-speed", "warning", "the CPU's own speed changed during the run",
        observed=(f"a fixed reference loop, timed on its thread's CPU clock (time spent "
                  f"waiting for other processes is not counted), took "
                  f"{fmt_time(speed.fastest)}–{fmt_time(speed.slowest)} (fastest to slowest "
                  f"tenth of {len(speed.samples)} samples): over 1.2x its fastest in "
                  f"{speed.slow_share:.0%} of them, {speed.mean_slowdown:.0%} slower on "
                  "average"),
        why=("the same instructions ran at different speeds: the host shares this "
             "machine's physical cores with other work (a cloud VM's other tenants; its "
             "idle cores may also come back slow), or turbo and thermal limits change the "
             "clock; every figure here moves with "
             "it, absolute times most, ratios of configurations measured interleaved "
             "least, and a rerun at another time lands elsewhere"),
        fix=(f"read absolute times here as ±{max(speed.mean_slowdown, varied / 2):.0%} or "
             "worse and compare configurations within one run, not across runs; for "
             "steady absolute figures use a dedicated machine on mains power"))]


def stability_findings(results: Iterable[TrialResult], before: LoadReading | None = None,
                       after: LoadReading | None = None, own_workers: int = 1,
                       cpu_speed: CpuSpeed | None = None) -> list[Finding]:
    """Every stability finding for ``results``, the machine's load around them and the
    CPU's own speed during them."""
    return (trial_findings(results) + load_findings(before, after, own_workers)
            + cpu_speed_findings(cpu_speed))


def finding_line(f: Finding) -> str:
    """One line for the notes under a table: what, the number, what to do."""
    return f"stability: {f.title}: {f.observed} — {f.fix}"


def brief_lines(findings: Iterable[Finding]) -> list[str]:
    """The findings condensed for a short summary (the main job's): one line per kind,
    naming the trials it concerns and what to do.

    Example:
        >>> f = [Finding("stability.wide-spread", "warning", f"w {t}: its step times "
        ...              "spread widely", "", "", "quiet the machine") for t in "ab"]
        >>> brief_lines(f)
        ['stability: its step times spread widely (w a, w b) — quiet the machine']
    """
    kinds: dict[str, list[Finding]] = {}
    for f in findings:
        kinds.setdefault(f.id, []).append(f)
    lines = []
    for group in kinds.values():
        first = group[0]
        whos = [f.title.partition(": ")[0] for f in group if ": " in f.title]
        what = first.title.partition(": ")[2] if whos else first.title
        line = f"stability: {what}"
        if whos:
            line += f" ({', '.join(dict.fromkeys(whos))})"
        lines.append(f"{line} — {first.fix}")
    return lines
