"""Small helpers shared by the checks: version parsing and derived snapshot facts."""

from __future__ import annotations

import re
from typing import Any

from devicebench.env.snapshot import EnvSnapshot, FrameworkProbe

KB = dict[str, Any]

_LEADING_NUMBERS = re.compile(r"\d+(?:\.\d+)*")
_EXC_LINE = re.compile(r"^[\w.]*(Error|Exception|Abort\w*)\b.*:")

# Display names for probe keys and distributions.
DISPLAY = {"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch", "keras": "Keras"}


def parse_version(text: str | None) -> tuple[int, ...]:
    """Parse the leading numeric release of a version string into an int tuple.

    Pre-release, local and build suffixes are dropped; "" or junk gives ``()``.

    Example:
        >>> parse_version("2.16.0rc1"), parse_version("2.5.1+cu124"), parse_version("")
        ((2, 16, 0), (2, 5, 1), ())
    """
    if not text:
        return ()
    m = _LEADING_NUMBERS.match(str(text).strip())
    if not m:
        return ()
    return tuple(int(p) for p in m.group(0).split("."))


def major_minor(text: str | None) -> tuple[int, ...]:
    """``"2.18.1"`` -> ``(2, 18)``; ``"12"`` -> ``(12, 0)``; ``""`` -> ``()``."""
    v = parse_version(text)
    if not v:
        return ()
    return (v + (0,))[:2]


def in_range(version: str, low: str = "", high: str = "") -> bool:
    """True if ``version`` lies in [low, high], bounds compared on their own precision.

    ``high="2.19"`` includes every 2.19.x; an empty bound is open.
    """
    v = parse_version(version)
    if not v:
        return False
    lo = parse_version(low)
    hi = parse_version(high)
    if lo and v[: len(lo)] < lo:
        return False
    if hi and v[: len(hi)] > hi:
        return False
    return True


def fmt_mm(v: tuple[int, ...]) -> str:
    """``(3, 12)`` -> ``"3.12"``."""
    return ".".join(str(p) for p in v)


def tf_distributions(snap: EnvSnapshot, kb: KB) -> list[str]:
    """Installed distributions that provide the ``tensorflow`` package, in KB order."""
    return [d for d in kb["tensorflow"]["distributions"] if snap.has(d)]


def tf_version(snap: EnvSnapshot, kb: KB) -> str:
    """The installed TensorFlow version: the probe's, else the first TF distribution's."""
    probe = snap.frameworks.get("tensorflow")
    if probe is not None and probe.version:
        return probe.version
    for dist in tf_distributions(snap, kb):
        if dist != "tensorflow-macos" or not snap.has("tensorflow"):
            return snap.version_of(dist)
    return ""


def legacy_keras_on(snap: EnvSnapshot, kb: KB) -> bool:
    """True if TF_USE_LEGACY_KERAS has a value TensorFlow treats as true."""
    value = snap.env_vars.get("TF_USE_LEGACY_KERAS")
    return value is not None and value in kb["tensorflow"]["legacy_keras_true_values"]


def ok_probe(snap: EnvSnapshot, name: str) -> FrameworkProbe | None:
    """The framework's probe if it imported fine, else None."""
    probe = snap.frameworks.get(name)
    if probe is not None and probe.status == "ok":
        return probe
    return None


def hardware_gpus(snap: EnvSnapshot) -> list[str]:
    """Human names of the GPUs the hardware has (NVIDIA via nvidia-smi, Apple via the chip)."""
    names: list[str] = []
    if snap.nvidia_smi is not None:
        names += [f"{g.name or 'NVIDIA GPU'} (GPU {g.index})" for g in snap.nvidia_smi.gpus]
    if snap.is_apple_silicon and snap.host.apple_chip:
        names.append(f"{snap.host.apple_chip} GPU")
    return names


def has_nvidia_gpu(snap: EnvSnapshot) -> bool:
    """True if nvidia-smi listed at least one GPU."""
    return snap.nvidia_smi is not None and bool(snap.nvidia_smi.gpus)


def metal_release(kb: KB, version: str) -> dict[str, Any] | None:
    """The KB entry for a tensorflow-metal release, matched on its full version."""
    v = parse_version(version)[:3]
    for rel in kb["metal"]["releases"]:
        if parse_version(rel["version"]) == v:
            return rel
    return None


def build_cuda_version(probe: FrameworkProbe) -> str:
    """The CUDA version a framework was built with, from its probe's build info ("" if none)."""
    value = probe.build.get("cuda_version")
    if value in (None, "", False):
        return ""
    return str(value)


def shorten(text: str, limit: int = 600) -> str:
    """The informative part of an error text, at most ``limit`` characters.

    Tracebacks end with the cause: start at the last line that names an exception
    (``...Error: ...``) when there is one, else keep the tail.
    """
    text = text.strip()
    lines = text.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if _EXC_LINE.match(lines[i]):
            text = "\n".join(lines[i:])
            if len(text) > limit:
                return text[:limit] + "…"
            return text
    if len(text) <= limit:
        return text
    return "…" + text[-limit:]
