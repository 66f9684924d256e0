"""Compiled extensions the probe does not import, against the torch they were built for
(issue 24, round 22).

vLLM, xformers and flash-attn ship binaries compiled against one torch release: beside
another torch their ``_C`` libraries fail to load (undefined C++ symbols such as
``c10::cuda::SetDevice`` or a ``torch::Library`` signature), or xformers prints "xFormers
was built for PyTorch X" and disables its kernels. The probe imports torch only, so torch
itself works; the pair is read from the installed distributions' versions and the table
``[[extension_torch_builds]]`` (each row its source).
"""

from __future__ import annotations

from devicebench.env.checks._util import KB, as_version, major_minor
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot


def _row_for(dist: str, version: str, kb: KB, os_name: str = "") -> dict | None:
    base = version.split("+")[0]
    for row in kb.get("extension_torch_builds", []):
        if row.get("os", os_name) != os_name:  # a row for one OS's wheels only
            continue
        if row["dist"] == dist and base in row["releases"]:
            return row
    return None


def _within(torch: str, top: str) -> bool:
    """torch at or below ``top``: by major.minor, or by patch where ``top`` names one
    ("2.2.1", round 24)."""
    t, v = as_version(top), as_version(torch.split("+")[0])
    if t is not None and v is not None and len(t.release) >= 3:
        return (v.release + (0, 0))[:3] <= t.release[:3]
    return major_minor(torch) <= major_minor(top)


def check_extension_torch_build(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """An installed vllm / xformers / flash-attn release built for another torch release."""
    torch = snap.version_of("torch")
    have = major_minor(torch)
    if not have:
        return []
    out = []
    for dist in sorted({r["dist"] for r in kb.get("extension_torch_builds", [])}):
        version = snap.version_of(dist)
        row = _row_for(dist, version, kb, snap.host.os) if version else None
        if row is None:
            continue
        top = row.get("torch_max", "")
        if major_minor(row["torch_min"]) <= have and (not top or _within(torch, top)):
            continue
        want = row["torch_min"] if row["torch_min"] == top else \
            f"{row['torch_min']} or later" if not top else f"{row['torch_min']} to {top}"
        out.append(Finding(
            "extension.built-for-other-torch", "warning",
            f"{dist} {version} was built for torch {want}, not the installed torch {torch}",
            observed=f"{dist} {version} beside torch {torch}",
            why=f"{dist} ships compiled CUDA/C++ extensions linked against one torch "
                "release's C++ API: beside another torch its native library fails to load "
                "(an undefined symbol at import) or its kernels are disabled. The probe "
                f"imports torch only, which works; {dist} does not. {row['why']}",
            fix=row["fix"], source=row["source"]))
    return out
