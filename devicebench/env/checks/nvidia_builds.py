"""NVIDIA's own framework builds and the CUDA runtime's driver message.

``nvidia-tensorflow 1.15.5+nv23.03`` names the NGC release it comes from; each release is
built on the CUDA its release notes name, which the driver check reads as TensorFlow's build
CUDA when the import failed before TensorFlow could say it. Any framework's error or log
saying ``CUDA driver version is insufficient for CUDA runtime version`` is the runtime's own
report that the driver is older than the CUDA the build was linked with.
"""

from __future__ import annotations

import re

from devicebench.env.checks._util import DISPLAY, KB, build_cuda_version, major_minor
from devicebench.env.checks.cuda import cuda_gap
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

_NV_TAG = re.compile(r"\+nv(\d{2})\.(\d{1,2})\b")


def nvidia_tf_release(snap: EnvSnapshot, kb: KB) -> tuple[str, str]:
    """(NGC release "YY.MM", its CUDA) of an installed nvidia-tensorflow; ("", "") if unknown.

    Example:
        >>> from devicebench.env.checks import load_knowledge
        >>> from devicebench.env.snapshot import HostInfo
        >>> s = EnvSnapshot(host=HostInfo(os="Linux"),
        ...                 distributions={"nvidia-tensorflow": "1.15.5+nv23.3"})
        >>> nvidia_tf_release(s, load_knowledge())
        ('23.03', '12.1')
    """
    entry = kb.get("nvidia_tf_builds", {})
    m = _NV_TAG.search(snap.version_of(entry.get("dist", "nvidia-tensorflow")))
    if not m:
        return "", ""
    release = f"{m.group(1)}.{int(m.group(2)):02d}"
    return release, entry.get("releases", {}).get(release, "")


def tf_build_cuda(snap: EnvSnapshot, kb: KB) -> str:
    """TensorFlow's build CUDA: its own build info, else nvidia-tensorflow's release row."""
    probe = snap.frameworks.get("tensorflow")
    own = build_cuda_version(probe, snap) if probe is not None else ""
    return own or nvidia_tf_release(snap, kb)[1]


def nvidia_tf_for_driver(snap: EnvSnapshot, kb: KB) -> str:
    """A pip pin of the newest known nvidia-tensorflow release whose CUDA the driver supports."""
    entry = kb.get("nvidia_tf_builds", {})
    smi = snap.nvidia_smi
    have = major_minor(smi.cuda_version) if smi is not None else ()
    if not nvidia_tf_release(snap, kb)[0] or not have:
        return ""
    fits = [r for r, cuda in entry.get("releases", {}).items() if major_minor(cuda) <= have]
    if not fits:
        return ""
    best = max(fits)
    return (f"pip install 'nvidia-tensorflow=={entry['tf_version']}+nv{best}'  # NVIDIA's "
            f"release {best}, built on CUDA {entry['releases'][best]}")


def _says_insufficient(text: str, kb: KB) -> bool:
    pattern = kb.get("driver_insufficient", {}).get("pattern", "")
    return bool(pattern) and pattern.lower() in text.lower()


def check_driver_insufficient(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A framework's error or log carries the CUDA runtime's 'driver version is insufficient'
    while the driver check could not say it (the build's CUDA unknown, or only a minor gap)."""
    out = []
    smi = snap.nvidia_smi
    for name, probe in snap.frameworks.items():
        text = "\n".join([probe.error, probe.said, *probe.messages, *probe.load_errors])
        if not _says_insufficient(text, kb):
            continue
        build = tf_build_cuda(snap, kb) if name == "tensorflow" else build_cuda_version(
            probe, snap)
        if cuda_gap(snap, kb, build)[0] in ("major", "driver"):
            continue  # cuda.driver-too-old names the build and the driver it needs
        display = DISPLAY.get(name, name)
        dist = ("nvidia-tensorflow" if name == "tensorflow" and snap.has("nvidia-tensorflow")
                else name)
        driver = (f"NVIDIA driver {smi.driver_version or '?'} (CUDA up to "
                  f"{smi.cuda_version or '?'})" if smi is not None else "the NVIDIA driver")
        build_txt = f"CUDA {build}" if build else "a CUDA this snapshot does not name"
        older = f" for CUDA {smi.cuda_version} or older" if smi is not None and \
            smi.cuda_version else " for an older CUDA"
        out.append(Finding(
            "cuda.driver-older-than-runtime", "error",
            f"{display}: the NVIDIA driver is older than the CUDA its build runs",
            observed=f"{display} ({dist} {snap.version_of(dist) or probe.version or '?'}, "
                     f"built for {build_txt}) says 'CUDA driver version is insufficient for "
                     f"CUDA runtime version'; {driver}",
            why="This is the CUDA runtime's own error (cudaErrorInsufficientDriver): the "
                "installed driver is older than the CUDA runtime the framework was built "
                "with, so no GPU can be used and training runs on the CPU (or fails).",
            fix="update the NVIDIA driver to one for the build's CUDA (Ubuntu: sudo "
                "ubuntu-drivers install; else https://www.nvidia.com/Download/index.aspx), "
                "then check that nvidia-smi's 'CUDA Version' reaches it; or install a "
                f"{dist} build{older}"
                + (f": {nvidia_tf_for_driver(snap, kb)}" if dist == "nvidia-tensorflow"
                   and nvidia_tf_for_driver(snap, kb) else ""),
            source=kb["driver_insufficient"]["source"]))
    return out
