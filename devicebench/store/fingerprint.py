"""The machine fingerprint: which results are comparable, and what ``--resume`` may skip."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from devicebench.env.snapshot import EnvSnapshot

# Versions that change what a trial measures. Only installed ones enter the fingerprint.
FINGERPRINT_DISTRIBUTIONS: tuple[str, ...] = (
    "tensorflow",
    "tensorflow-cpu",
    "tensorflow-macos",
    "tensorflow-metal",
    "keras",
    "jax",
    "jaxlib",
    "jax-metal",
    "torch",
)


def _gpus(snapshot: EnvSnapshot) -> list[str]:
    """GPU names: nvidia-smi's and the Apple chip; framework-reported ones only without those.

    Framework descriptions depend on which frameworks loaded this time, so a transient
    probe failure would otherwise turn the same machine into a new one.
    """
    names: list[str] = []
    if snapshot.nvidia_smi is not None:
        names.extend(g.name for g in snapshot.nvidia_smi.gpus if g.name)
    if snapshot.host.apple_chip:
        names.append(snapshot.host.apple_chip)
    if not names:
        seen = {
            d.description
            for fw in snapshot.frameworks.values()
            for d in fw.gpu_devices
            if d.description
        }
        names.extend(sorted(seen))
    return names


def machine_identity(snapshot: EnvSnapshot) -> dict[str, Any]:
    """The facts the fingerprint hashes (also stored, human-readable, in ``machines``)."""
    host = snapshot.host
    return {
        "cpu": host.cpu_model,
        "cores": {"physical": host.cpu_cores_physical, "logical": host.cpu_cores_logical},
        "gpus": _gpus(snapshot),
        "os": " ".join(p for p in (host.os, host.os_version, host.machine) if p),
        "python": " ".join(
            p for p in (host.python_implementation, host.python_version, host.python_arch) if p
        ),
        "frameworks": {
            name: snapshot.distributions[name]
            for name in FINGERPRINT_DISTRIBUTIONS
            if snapshot.distributions.get(name)
        },
    }


def machine_fingerprint(snapshot: EnvSnapshot) -> tuple[str, dict[str, Any]]:
    """A stable hash of CPU, core counts, GPUs, OS, Python and framework versions.

    Two snapshots of the same machine and software stack give the same hash, whatever
    else differs (time, env vars, probe timings); upgrading TensorFlow gives a new one.

    Returns:
        ``(hash, identity)``: a 16-hex-digit hash and the dict it was computed from.

    Example:
        >>> from devicebench.env.snapshot import HostInfo
        >>> fp, ident = machine_fingerprint(EnvSnapshot(host=HostInfo(cpu_model="x")))
        >>> len(fp), ident["cpu"]
        (16, 'x')
    """
    identity = machine_identity(snapshot)
    canon = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()[:16], identity
