"""Expand command-line choices into trial specs for this machine (no framework import)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from devicebench.backends import FRAMEWORK_DISTRIBUTIONS
from devicebench.env.snapshot import EnvSnapshot
from devicebench.errors import SpecError
from devicebench.trials.spec import TrialSpec


def machine_devices(snapshot: EnvSnapshot) -> list[str]:
    """Devices this machine has: cpu, gpu:N per NVIDIA GPU, gpu:0 + mps on Apple Silicon."""
    devices = ["cpu"]
    if snapshot.nvidia_smi is not None:
        devices += [f"gpu:{g.index}" for g in snapshot.nvidia_smi.gpus]
    if snapshot.host.os == "Darwin" and snapshot.host.machine == "arm64":
        devices += ["gpu:0", "mps"]
    return list(dict.fromkeys(devices))


def installed_backends(snapshot: EnvSnapshot) -> list[str]:
    return [b for b, dists in FRAMEWORK_DISTRIBUTIONS.items()
            if any(snapshot.has(d) for d in dists)]


def check_device(device: str, snapshot: EnvSnapshot) -> None:
    """Refuse a device this machine does not have (the one rule for every entry point).

    Raises:
        SpecError: a malformed device, or one this machine lacks, listing those it has.
    """
    TrialSpec("x", backend="torch", device=device)  # validates the device's form
    here = machine_devices(snapshot)
    if device not in here:
        raise SpecError(f"this machine has no device {device!r}",
                        fix=f"use one of: {', '.join(here)} (see `devicebench doctor`)")


TF32_MIN_COMPUTE_CAPABILITY = 8.0  # Ampere: the first tensor cores with TF32


def tf32_unsupported(device: str, snapshot: EnvSnapshot) -> str | None:
    """Why ``device`` cannot run precision ``tf32``, or None if it can."""
    if not device.startswith("gpu:"):
        return f"{device} has no TF32 tensor cores (an NVIDIA GPU feature)"
    smi = snapshot.nvidia_smi
    gpu = next((g for g in (smi.gpus if smi else []) if f"gpu:{g.index}" == device), None)
    if gpu is None:
        return f"{device} is not an NVIDIA GPU (TF32 is an NVIDIA tensor-core format)"
    try:
        cc = float(gpu.compute_capability)
    except ValueError:
        return f"{device}'s compute capability is unknown (nvidia-smi did not report it)"
    if cc < TF32_MIN_COMPUTE_CAPABILITY:
        return (f"{device} ({gpu.name}) has compute capability {gpu.compute_capability}; "
                f"TF32 needs {TF32_MIN_COMPUTE_CAPABILITY:g} or newer (Ampere)")
    return None


def validate_spec(spec: TrialSpec, snapshot: EnvSnapshot) -> None:
    """Refuse a trial this machine cannot run as written: its device is missing, its
    backend is not installed (a pair that never goes together, jax on mps, is refused
    by :class:`TrialSpec` itself).
    ``run``, ``advise`` (its baseline) and the Python API all call this; ``run`` alone
    turns a missing backend into a skip note, through :func:`plan_trials`.

    Raises:
        SpecError: one line naming the value and what this machine has.
    """
    check_device(spec.device, snapshot)
    have = installed_backends(snapshot)
    if spec.backend not in have:
        raise SpecError(f"backend {spec.backend!r} is not installed",
                        fix=f"pip install 'devicebench[{spec.backend}]', or use one of: "
                            f"{', '.join(have) or 'none installed'}")
    if spec.precision == "tf32" and (why := tf32_unsupported(spec.device, snapshot)):
        raise SpecError(f"precision 'tf32' cannot run here: {why}",
                        fix="use float32 (or mixed_bfloat16 / mixed_float16)")


@dataclass
class Plan:
    specs: list[TrialSpec]
    notes: list[str] = field(default_factory=list)


def plan_trials(
    snapshot: EnvSnapshot,
    workloads: list[str],
    *,
    backends: list[str] | None = None,
    devices: list[str] | None = None,
    precisions: list[str] | None = None,
    jits: list[str] | None = None,
    batch_sizes: list[int | None] | None = None,
    pipelines: list[str] | None = None,
    threads: list[int | None] | None = None,
    steps_per_execution: int = 1,
    seed: int | None = None,
) -> Plan:
    """The cross product of the choices, minus what this machine cannot run.

    A backend that is not installed is skipped with a note (never an error); a device
    this machine does not have is an error (exit 2), as is an unknown value.
    """
    notes: list[str] = []
    have = installed_backends(snapshot)
    chosen = backends or list(have)
    usable = []
    for b in chosen:
        if b not in FRAMEWORK_DISTRIBUTIONS:
            raise SpecError(f"unknown backend {b!r}",
                            fix=f"use one of: {', '.join(FRAMEWORK_DISTRIBUTIONS)}")
        if b in have:
            usable.append(b)
        else:
            notes.append(f"skipped backend {b}: not installed "
                         f"(pip install 'devicebench[{b}]')")
    here = machine_devices(snapshot)
    for d in devices or []:
        check_device(d, snapshot)
    specs: list[TrialSpec] = []
    tf32_skipped: dict[str, str] = {}  # device -> why it cannot run tf32
    for combo in itertools.product(
        workloads, usable, devices or [d for d in here if d != "mps"],
        precisions or ["float32"], jits or ["auto"], batch_sizes or [None],
        pipelines or ["arrays"], threads or [None],
    ):
        w, b, d, p, j, bs, pl, th = combo
        if d == "mps" and b != "torch":
            continue
        if p == "tf32" and (why := tf32_unsupported(d, snapshot)):
            tf32_skipped.setdefault(d, why)
            continue
        if pl == "tf.data" and not any(snapshot.has(x) for x in
                                       FRAMEWORK_DISTRIBUTIONS["tensorflow"]):
            raise SpecError("pipeline 'tf.data' needs TensorFlow installed",
                            fix="pip install tensorflow, or use --pipeline arrays")
        specs.append(TrialSpec(w, backend=b, device=d, precision=p, jit=j, batch_size=bs,
                               pipeline=pl, threads=th,
                               steps_per_execution=steps_per_execution, seed=seed))
    notes += [f"skipped precision tf32 on {d}: {why}" for d, why in tf32_skipped.items()]
    if not specs and usable and tf32_skipped:
        d, why = next(iter(tf32_skipped.items()))
        raise SpecError(f"nothing to run: precision tf32 on {d}: {why}",
                        fix="use --precision float32 (or mixed_bfloat16 / mixed_float16), "
                            "or --device gpu:N on an NVIDIA GPU of compute capability 8.0+")
    if not specs and not notes:
        notes.append("nothing to run")
    return Plan(specs, notes)
