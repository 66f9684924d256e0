"""Small helpers shared by the checks: version comparison (``packaging``) and derived facts."""

from __future__ import annotations

import re
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from devicebench.env.snapshot import EnvSnapshot, FrameworkProbe

KB = dict[str, Any]

_EXC_LINE = re.compile(r"^[\w.]*(Error|Exception|Abort\w*)\b.*:")

# Display names for probe keys and distributions.
DISPLAY = {"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch", "keras": "Keras"}


def as_version(text: str | None) -> Version | None:
    """A PEP 440 version, or None for "" / junk.

    Example:
        >>> as_version("2.5.1+cu124").release, as_version("2.16.0rc1").is_prerelease, as_version("")
        ((2, 5, 1), True, None)
    """
    if not text:
        return None
    try:
        return Version(str(text).strip())
    except InvalidVersion:
        return None


def matches(version: str | None, spec: str) -> bool:
    """True if ``version`` satisfies the specifier string (pre-releases count; "" spec: any).

    Example:
        >>> matches("2.19.3", ">=2.18,<2.20"), matches("2.20.0rc0", "<2.20"), matches("", ">=1")
        (True, False, False)
    """
    v = as_version(version)
    if v is None:
        return False
    return SpecifierSet(spec).contains(v, prereleases=True)


def at_least(version: str | None, minimum: str) -> bool:
    """``version >= minimum`` on release numbers (a pre-release counts as its release).

    Example:
        >>> at_least("2.16.0rc0", "2.16"), at_least("2.15.1", "2.16"), at_least("", "1")
        (True, False, False)
    """
    v, m = as_version(version), as_version(minimum)
    if v is None or m is None:
        return False
    return v.release >= m.release


def major_minor(text: str | None) -> tuple[int, ...]:
    """``"2.18.1"`` -> ``(2, 18)``; ``"12"`` -> ``(12, 0)``; ``""`` -> ``()``."""
    v = as_version(text)
    if v is None:
        return ()
    return (v.release + (0,))[:2]


def macos_version(snap: EnvSnapshot) -> Version | None:
    """The macOS product version the probe recorded (``host.macos_version``), or None."""
    if snap.host.os != "Darwin":
        return None
    return as_version(snap.host.macos_version)



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


def installed_version(snap: EnvSnapshot, dist: str) -> str:
    """The installed version of ``dist`` under either spelling of its name (``-`` or ``_``).

    Example:
        >>> installed_version(EnvSnapshot(distributions={"orbax_checkpoint": "0.5.0"}),
        ...                   "orbax-checkpoint")
        '0.5.0'
    """
    return snap.version_of(dist) or snap.version_of(dist.replace("-", "_")) \
        or snap.version_of(dist.replace("_", "-"))


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
    """The KB entry for a tensorflow-metal release, matched on its version."""
    v = as_version(version)
    for rel in kb["metal"]["releases"]:
        if v is not None and as_version(rel["version"]) == Version(v.base_version):
            return rel
    return None


def build_cuda_version(probe: FrameworkProbe, snap: EnvSnapshot | None = None) -> str:
    """The CUDA version a framework was built with ("" if none or unknown).

    TensorFlow and PyTorch report it in their build info; for JAX it is the CUDA major of
    the installed ``jax-cuda<N>-plugin`` (JAX does not report it itself), or of a CUDA-built
    jaxlib's local version (``0.4.24+cuda12.cudnn89``, the wheels before the plugin split).
    """
    value = probe.build.get("cuda_version")
    if value not in (None, "", False):
        return str(value)
    if probe.name == "jax" and snap is not None:
        for dist in sorted(snap.distributions, reverse=True):
            m = re.fullmatch(r"jax-cuda(\d+)-plugin", dist)
            if m:
                return m.group(1)
        m = re.search(r"\+cuda(\d+)", snap.version_of("jaxlib"))
        if m:
            return m.group(1)
    return ""


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


_EXPORT = re.compile(r"\bexport (\w+)=")
_UNSET = re.compile(r"\bunset (\w+)")
_INLINE = re.compile(r"(?<![\w=])([A-Z][A-Z0-9_]*)=(\S+) (python|jupyter|pytest)\b")


_SINGLE_QUOTED = re.compile(r"(?<![\w'])'([\w.\-\[\],<>=!~*+]+)'(?![\w'])")


def fit_fix_to_platform(fix: str, os_name: str) -> str:
    """A fix's shell syntax for the platform it is printed for: on Windows (cmd.exe)
    ``export A=1`` is ``set A=1``, ``unset A`` is ``set A=``, ``A=1 python x.py`` is
    ``set A=1 && python x.py`` and a single-quoted requirement is double-quoted. Text
    meant for WSL2 ("inside WSL2") is left as it is.

    Example:
        >>> fit_fix_to_platform("KERAS_BACKEND=jax python train.py", "Windows")
        'set KERAS_BACKEND=jax && python train.py'
        >>> fit_fix_to_platform("pip install 'torch==2.3.1'", "Windows")
        'pip install "torch==2.3.1"'
    """
    if os_name != "Windows" or "WSL2" in fix:
        return fix
    fix = _EXPORT.sub(r"set \1=", fix)
    fix = _UNSET.sub(r"set \1=", fix)
    # cmd.exe quotes only with double quotes: pip would get 'torch==2.3.1' with its quotes
    # ("Invalid requirement"); double quotes work in cmd.exe and PowerShell alike.
    fix = _SINGLE_QUOTED.sub(r'"\1"', fix)
    return _INLINE.sub(r"set \1=\2 && \3", fix)


def platform_conflict(fix: str, snap: EnvSnapshot, kb: KB) -> str:
    """The part of ``fix`` naming a package that does not exist for this machine (a CUDA
    plugin on a Mac, Apple's Metal plugin on Linux, ...: ``[[platform_packages]]``), or "".
    Text after "WSL2" is for WSL2's Linux, not this system.

    Example:
        >>> from devicebench.env.checks import load_knowledge
        >>> from devicebench.env.snapshot import EnvSnapshot, HostInfo
        >>> mac = EnvSnapshot(host=HostInfo(os="Darwin", machine="arm64"))
        >>> platform_conflict("pip install 'jax-cuda12-plugin==0.4.28'", mac, load_knowledge())
        'jax-cuda12-plugin'
    """
    text = fix.split("WSL2")[0]
    for entry in kb.get("platform_packages", []):
        m = re.search(entry["pattern"], text)
        if not m:
            continue
        need = entry.get("needs", "")
        ok = snap.host.os in entry["os"] and (
            need != "nvidia" or has_nvidia_gpu(snap) or snap.host.os == "Linux"
        ) and (need != "apple-silicon" or snap.host.machine == "arm64")
        if not ok:
            return m.group(0)
    return ""
