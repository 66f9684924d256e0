"""The profile jobs: record this machine's profile (every candidate configuration of
advise measured, interleaved), and replay advise on a recorded profile. What
``devicebench profile record`` and ``profile replay`` do."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devicebench.errors import InputError
from devicebench.progress import OnProgress
from devicebench.schema import envelope

DEFAULT_WORKLOADS = ("seed-rnn", "mnist-cnn")


@dataclass(frozen=True)
class RecordOutcome:
    """The profile written (:class:`devicebench.profiles.profile.MachineProfile`), where,
    and what each workload's sweep took."""

    profile: Any
    path: Path | None  # None: not written (the caller prints it, e.g. `-o -`)

    @property
    def notes(self) -> list[str]:
        return list(self.profile.notes)

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "name": self.profile.name, "notes": self.notes}


def record(workloads: list[str] | tuple[str, ...] | None = None, *, out: str | Path | None,
           name: str = "this-machine", label: str = "", max_rounds: int = 12,
           on_progress: OnProgress | None = None) -> RecordOutcome:
    """An exhaustive interleaved sweep of advise's candidate space for each workload
    (None: seed-rnn and mnist-cnn) on this machine, written as a profile to ``out``
    (None: returned only, for the caller to write, as ``profile record -o -`` does).

    Args:
        name: the profile's short id; label: what the machine is, in words (default:
            its CPU and OS).
        max_rounds: interleaved rounds at most per workload.
        on_progress: per workload, each set-up (k of n) and interleaved round, and what
            the sweep took (:mod:`devicebench.progress`). Default: one line each on
            stderr when it is a terminal, else none.

    Raises:
        devicebench.errors.DevicebenchError: an unknown workload or an ``out`` that is a
            directory (before anything runs).
    """
    from devicebench.advisor.advice import default_baseline
    from devicebench.env.probe import probe_host_layer
    from devicebench.profiles.record import record_profile
    from devicebench.workloads import get_workload

    names = list(DEFAULT_WORKLOADS if workloads is None else workloads)
    for w in names:
        get_workload(w)  # unknown names: one line, exit 2
    if out is not None and Path(out).is_dir():
        from devicebench.errors import InputError

        raise InputError(f"-o {out} is a directory",
                         fix=f"pass a file name, e.g. -o {Path(out) / 'profile.json'}, "
                             "or - for stdout")
    snapshot = probe_host_layer()
    host = snapshot.host
    profile = record_profile(
        name, label or f"{host.cpu_model} ({host.cpu_cores_logical} logical cores), "
        f"{host.os} {host.os_version}", snapshot, names,
        baseline_for=lambda w: default_baseline(snapshot, w)[0], max_rounds=max_rounds,
        on_progress=on_progress)
    if out is None:
        return RecordOutcome(profile, None)
    path = Path(out)
    profile.save(path)
    return RecordOutcome(profile, path)


@dataclass(frozen=True)
class ReplayOutcome:
    """advise replayed on a recorded profile: the profile, the advice and the seconds
    the advisor spent on the profiled machine's clock."""

    profile: Any
    advice: Any
    spent_s: float

    def to_dict(self) -> dict[str, Any]:
        return envelope("profile-replay", {
            "profile": self.profile.name, "derived": self.profile.derived,
            "spent_s": self.spent_s, "advice": self.advice.to_dict()})


def replay(profile: str | Path, workload: str, *, budget: float = 40.0,
           baseline: str | None = None, epochs: int | None = None) -> ReplayOutcome:
    """Run advise on a recorded machine profile (a file, or a shipped one: h200,
    m1-published): what it would answer there, on that machine's clock.

    Args:
        budget: seconds of the profiled machine's time.
        baseline: e.g. ``"backend=torch,device=gpu:0"`` (default: what the main job
            picks there).

    Raises:
        devicebench.errors.DevicebenchError: no such profile, a workload or baseline it
            did not record.
    """
    from devicebench.advisor.advice import parse_baseline
    from devicebench.profiles import load_profile
    from devicebench.profiles.replay import replay_advise

    prof = load_profile(str(profile))
    if workload not in prof.workloads:
        raise InputError(f"profile {prof.name} has no workload {workload!r}",
                         fix=f"use one of: {', '.join(prof.workloads)}")
    spec = parse_baseline(baseline, workload, "tensorflow") if baseline else None
    advice, spent = replay_advise(prof, workload, budget_s=budget, baseline=spec,
                                  epochs=epochs)
    return ReplayOutcome(prof, advice, spent)
