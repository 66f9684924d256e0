"""Machine profiles: what every candidate configuration cost and measured on one machine.

A profile is a table (workload x trial spec) of recorded figures: import, set-up,
first-step and per-block step-time samples, loss trajectory, memory. The advisor is judged
on it by replay (:mod:`devicebench.profiles.replay`), as hyper-parameter search research
judges a search policy on tabular benchmarks (HPOBench, NAS-Bench): cheaply, repeatably,
on machines we do not have. Candidates a profile lacks are *absent* — a replay reports
them as not measured there — never invented.

Each record says where its figures come from (``origin``):

- ``measured``: raw per-block samples from a devicebench run on that machine;
- ``printed``: only the summary devicebench printed there (median, CI, first step): a
  replay serves the median for every block (no spread of its own);
- ``published``: derived from a figure someone published (Apple Silicon): a replay serves
  it as ``printed``; the profile is labelled derived.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from devicebench.errors import InputError
from devicebench.trials.spec import TrialSpec

PROFILE_SCHEMA = "devicebench-machine-profile"
PROFILE_VERSION = 1
ORIGINS = ("measured", "printed", "published")
PROFILES_DIR = Path(__file__).parent / "data"


@dataclass
class TrialRecord:
    """One candidate configuration of one workload on the profiled machine."""

    spec: TrialSpec
    origin: str = "measured"  # measured | printed | published
    source: str = ""
    status: str = "ok"
    error: str = ""
    import_seconds: float = 0.0
    setup_seconds: float = 0.0
    first_step_seconds: float | None = None
    warmup_seconds: float = 0.0
    # Per-step times, one per timed block (a block's seconds / its steps).
    step_seconds: list[float] = field(default_factory=list)
    setup_step_seconds: float | None = None  # default: the median of step_seconds
    batch_size: int = 0
    steps_per_epoch: int = 1
    flops_per_step: float | None = None
    loss_steps: list[int] = field(default_factory=list)  # steps of equivalence_losses
    equivalence_losses: list[float] = field(default_factory=list)
    loss_verdict: str = ""  # as recorded there, against that run's reference
    final_loss: float | None = None
    input_seconds_per_batch: float | None = None
    peak_device_memory_bytes: int | None = None
    peak_rss_bytes: int | None = None
    jit_resolved: bool | None = None
    placement: dict[str, Any] = field(default_factory=dict)
    data_note: str = ""

    def __post_init__(self) -> None:
        if self.origin not in ORIGINS:
            raise InputError(f"profile record {self.spec.label}: origin {self.origin!r} "
                             f"is not one of {', '.join(ORIGINS)}")
        if self.status == "ok" and not self.step_seconds:
            raise InputError(f"profile record {self.spec.label}: status ok but no "
                             "step_seconds", fix="record at least one block's step time")

    @property
    def median_step(self) -> float | None:
        return statistics.median(self.step_seconds) if self.step_seconds else None

    @property
    def setup_step(self) -> float | None:
        return self.setup_step_seconds or self.median_step

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["spec"] = self.spec.to_dict()
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialRecord:
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["spec"] = TrialSpec.from_dict(data["spec"])
        return cls(**kwargs)


@dataclass
class MachineProfile:
    """A machine's recorded table of candidates, its environment and device figures.

    Attributes:
        name: short id (``h200``, ``m1-published``, ``cpu-vm``).
        label: what the machine is, in words.
        derived: True when the figures were not measured by devicebench (published ones).
        snapshot: the machine's ``EnvSnapshot`` as a dict (what the advisor sees).
        figures: device -> ``DeviceFigures`` fields from an ``ops`` run there.
        workloads: workload -> its records.
        notes: provenance, in words.
    """

    name: str
    label: str
    snapshot: dict[str, Any]
    workloads: dict[str, list[TrialRecord]]
    derived: bool = False
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def record(self, spec: TrialSpec) -> TrialRecord | None:
        """The record of exactly ``spec`` (None: absent from this profile)."""
        return next((r for r in self.workloads.get(spec.workload, []) if r.spec == spec),
                    None)

    def env_snapshot(self):
        from devicebench.env.snapshot import EnvSnapshot

        return EnvSnapshot.from_dict(self.snapshot)

    def device_figures(self, device: str):
        from devicebench.advisor.figures import DeviceFigures

        f = self.figures.get(device)
        return DeviceFigures(**f) if f else None

    def to_dict(self) -> dict[str, Any]:
        return {"schema": PROFILE_SCHEMA, "version": PROFILE_VERSION, "name": self.name,
                "label": self.label, "derived": self.derived, "notes": self.notes,
                "snapshot": self.snapshot, "figures": self.figures,
                "workloads": {w: [r.to_dict() for r in rs]
                              for w, rs in self.workloads.items()}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MachineProfile:
        if data.get("schema") != PROFILE_SCHEMA:
            raise InputError("not a devicebench machine profile (no "
                             f"\"schema\": \"{PROFILE_SCHEMA}\")",
                             fix="pass a file written by `devicebench profile record` or "
                                 "one of devicebench/profiles/data/*.json")
        if data.get("version") != PROFILE_VERSION:
            raise InputError(f"machine profile version {data.get('version')!r} is not "
                             f"{PROFILE_VERSION}", fix="record the profile again")
        return cls(name=data["name"], label=data["label"], derived=bool(data["derived"]),
                   notes=list(data.get("notes", [])), snapshot=data["snapshot"],
                   figures=dict(data.get("figures", {})),
                   workloads={w: [TrialRecord.from_dict(r) for r in rs]
                              for w, rs in data["workloads"].items()})

    def to_json(self) -> str:
        """The profile file's text (what :meth:`save` writes)."""
        return json.dumps(self.to_dict(), indent=1) + "\n"

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json())


def load_profile(path_or_name: str | Path) -> MachineProfile:
    """A profile from a JSON file, or a shipped one by name (``h200``, ``m1-published``,
    ``cpu-vm``).

    Raises:
        InputError: missing file, not JSON, or not a profile.

    Example:
        >>> load_profile("h200").label  # doctest: +ELLIPSIS
        'one NVIDIA H200...'
    """
    path = Path(path_or_name)
    if not path.exists() and (PROFILES_DIR / f"{path_or_name}.json").exists():
        path = PROFILES_DIR / f"{path_or_name}.json"
    if not path.is_file():
        shipped = ", ".join(sorted(p.stem for p in PROFILES_DIR.glob("*.json")))
        raise InputError(f"no machine profile {str(path_or_name)!r}",
                         fix=f"pass a profile file or one of: {shipped}")
    try:
        data = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path} is not a JSON machine profile ({exc})",
                         fix="pass a file written by `devicebench profile record`") from None
    return MachineProfile.from_dict(data)
