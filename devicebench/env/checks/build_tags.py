"""Built-with versions named in a wheel's own version tag, against the library installed.

``jaxlib 0.4.25+cuda12.cudnn89`` says it was compiled against cuDNN 8.9; a cuDNN loads only
with the same major version and an equal or newer minor one. The installed cuDNN is read
from the nvidia-* wheel's version, else from the soname the loader finds (major only).
"""

from __future__ import annotations

import re

from devicebench.env.checks._util import KB, major_minor
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot


def _installed(snap: EnvSnapshot, entry: dict) -> tuple[tuple[int, ...], str]:
    """(major, minor) of the library installed and where that was read; () when unknown."""
    for wheel in entry["wheels"]:
        if snap.has(wheel):
            return major_minor(snap.version_of(wheel))[:2], f"{wheel} {snap.version_of(wheel)}"
    pattern = re.compile(re.escape(entry["soname"]) + r"\.(\d+)$")
    for soname in sorted({**snap.system_cuda_libs, **snap.ld_path_cuda_libs}):
        m = pattern.match(soname)
        if m:
            return (int(m.group(1)),), f"{soname} ({snap.loader_finds(soname)})"
    return (), ""


def check_build_tags(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A library older (or of another major version) than the one a build's tag names.

    Example:
        >>> from devicebench.env.checks import load_knowledge
        >>> from devicebench.env.snapshot import EnvSnapshot, HostInfo
        >>> s = EnvSnapshot(host=HostInfo(os="Linux"), distributions={
        ...     "jaxlib": "0.4.25+cuda12.cudnn89", "nvidia-cudnn-cu12": "9.0.0.312"})
        >>> [f.id for f in check_build_tags(s, load_knowledge())]
        ['build.library-older-than-tag']
    """
    out = []
    for entry in kb.get("build_tags", []):
        version = snap.version_of(entry["dist"])
        tag = re.search(entry["tag"], version.partition("+")[2])
        if not tag:
            continue
        built = (int(tag.group(1)), int(tag.group(2)))
        have, where = _installed(snap, entry)
        if not have or (have[0] == built[0] and (len(have) < 2 or have[1] >= built[1])):
            continue
        lib, want = entry["library"], f"{built[0]}.{built[1]}"
        wheel = next((w for w in entry["wheels"] if snap.has(w)), entry["wheels"][0])
        out.append(Finding(
            "build.library-older-than-tag", "error",
            f"{entry['dist']} {version} is built for {lib} {want}, but {lib} "
            f"{'.'.join(map(str, have))} is installed",
            observed=f"{entry['dist']} {version}; installed: {where}",
            why=f"{lib} loads only with the major version a build was compiled against and an "
                "equal or newer minor one; otherwise the framework reports it cannot load "
                f"{lib} (or a version mismatch) and falls back to the CPU.",
            fix=f"pip install '{wheel}=={want}.*'  # or: {entry['upgrade']} (a build for the "
                f"installed {lib})",
            source=entry["source"]))
    return out
