"""What the frameworks said, read as a table: their own diagnostic sentences -> findings.

A framework (or NumPy, the CUDA driver, the OpenMP runtime it loads) often names the cause
of a broken environment in its own import or first-use output: "A module that was compiled
using NumPy 1.x cannot be run in NumPy 2.0.0", "cuDNN version incompatibility: PyTorch was
compiled against ... but found runtime version ...", "Error 804: forward compatibility was
attempted on non supported HW". ``[[framework_says]]`` in ``knowledge.toml`` is one table of
such sentences (a regular expression over the text the probe kept, whitespace collapsed:
:func:`devicebench.env.messages.said_text`) with the cause, the fix and the cited source of
each; :func:`check_framework_says` turns each sentence found into one finding that quotes it.
Rows name the finding ids that already say the same with more knowledge (``covered_by``):
:func:`drop_said_covered` then leaves the quote out.
"""

from __future__ import annotations

import functools
import re

from devicebench.env.checks._util import DISPLAY, KB
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot, FrameworkProbe

MAX_QUOTE = 300
_COVERED = "covered_by:"


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _text(probe: FrameworkProbe) -> str:
    """The probe's kept output; snapshots saved before ``said`` existed: its kept lines."""
    if probe.said:
        return probe.said
    old = "\n".join([*probe.messages, probe.error,
                     str((probe.extra or {}).get("first_use_error", ""))])
    return " ".join(old.split())


def _fill(template: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m[1], m[0]), template)


def _torch_values(snap: EnvSnapshot, kb: KB, row: dict) -> dict[str, str]:
    """Values a fix template may name about the installed torch (round 14): ``torch_index``,
    the wheel index of its own variant (``+cu126`` -> ``.../whl/cu126``; a placeholder when
    its version has no variant tag), and ``addon_release``, the release of the row's
    ``addon`` that ``[[addon_builds]]`` pairs with the installed torch release (the bare
    name when none is listed).

    Example:
        >>> from devicebench.env.snapshot import EnvSnapshot
        >>> s = EnvSnapshot(distributions={"torch": "2.6.0+cu126"})
        >>> v = _torch_values(s, {"addon_builds": [{"dist": "xformers", "framework": "torch",
        ...     "builds": [["==0.0.29.post3", "2.6.0"]]}]}, {"addon": "xformers"})
        >>> v["torch_index"], v["addon_release"]
        ('https://download.pytorch.org/whl/cu126', 'xformers==0.0.29.post3')
    """
    torch_v = snap.version_of("torch") or ""
    local = torch_v.partition("+")[2]
    out = {"torch_index": "https://download.pytorch.org/whl/"
                          + (local if re.fullmatch(r"cu\d+|rocm[\d.]+|cpu", local)
                             else "<the cuXXX of your torch>")}
    addon = row.get("addon")
    if addon:
        release = torch_v.partition("+")[0]
        entry = next((e for e in kb.get("addon_builds", []) if e["dist"] == addon), None)
        spec = next((s for s, fw in (entry or {}).get("builds", []) if fw == release), "")
        out["addon_release"] = f"{addon}{spec}"
    return out


def check_framework_says(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """Each ``[[framework_says]]`` sentence a framework printed, quoted, with its cause/fix.

    A row applies when its ``pattern`` matches a framework's kept output, the framework is
    one of the row's ``frameworks`` (all when absent), the host is the row's ``os`` (any when
    absent), no distribution in
    ``unless_installed`` is installed and no row named in ``unless_said`` matched; one
    finding per row, naming every framework that said it.
    """
    rows = kb.get("framework_says", [])
    hits: dict[str, tuple[dict, list[str], dict[str, str], str]] = {}
    for row in rows:
        if row.get("os", snap.host.os) != snap.host.os:
            continue  # a row for one OS's messages (Windows' path limit)
        for name, probe in snap.frameworks.items():
            if row.get("frameworks") and name not in row["frameworks"]:
                continue
            if any(snap.has(d) for d in row.get("unless_installed", [])):
                continue
            m = _compiled(row["pattern"]).search(_text(probe))
            if not m:
                continue
            who = DISPLAY.get(name, name)
            if row["id"] in hits:
                hits[row["id"]][1].append(who)
                continue
            values = {k: v for k, v in m.groupdict().items() if v is not None}
            values.update(framework=who, version=probe.version or snap.version_of(name),
                          cuda=str(probe.build.get("cuda_version") or "?"),
                          **_torch_values(snap, kb, row))
            hits[row["id"]] = (row, [who], values, m[0].strip()[:MAX_QUOTE])
    out = []
    for rid, (row, who, values, quote) in hits.items():
        if any(other in hits for other in row.get("unless_said", [])):
            continue
        # a row may say what the sentence means inside a container (the host's kernel module)
        where = "container_" if snap.host.in_container and "container_why" in row else ""
        out.append(Finding(
            rid, row["severity"], _fill(row["title"], values),
            observed=f"{' and '.join(who)} printed: \"{quote}\"",
            why=_fill(row[where + "why"], values), fix=_fill(row[where + "fix"], values),
            source=row["source"],
            related=[_COVERED + c for c in row.get("covered_by", [])]))
    return out


ABI_ERROR = re.compile(r"undefined symbol: \S+|Symbol not found: \S+|operator \S+ does not exist")


def check_extension_abi(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A compiled torch extension (``[[torch_extensions]]``) whose import, after torch, fails
    with a missing C++ symbol: it was built against another torch release."""
    probe = snap.frameworks.get("torch")
    errors = (probe.extra.get("extension_errors") or {}) if probe is not None else {}
    out = []
    for row in kb.get("torch_extensions", []):
        m = ABI_ERROR.search(str(errors.get(row["module"], "")))
        if not m:
            continue
        dist, torch_v = row["dist"], probe.version or snap.version_of("torch")
        have = snap.version_of(dist)
        out.append(Finding(
            "torch.extension-abi", "error",
            f"{dist} {have} was built against another torch than the installed {torch_v}",
            observed=f"importing {row['module']} after torch {torch_v}: \"{m[0][:200]}\"",
            why=f"{dist}'s compiled library calls torch's C++ functions by their exact "
                "signatures; a binary built for another torch release (or C++ ABI) misses "
                "them and its import fails.",
            fix=row["fix"], source=row["source"],
            related=[_COVERED + c for c in row.get("covered_by", [])]))
    return out


def check_bundled_runtimes(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """Two installed distributions that each ship their own copy of a once-per-process runtime
    (``[[bundled_runtimes]]``: Intel's OpenMP libiomp5md.dll on Windows)."""
    out = []
    for row in kb.get("bundled_runtimes", []):
        if snap.host.os != row["platform"]:
            continue
        have = [f"{d} {snap.version_of(d)}" for d in row["dists"] if snap.has(d)]
        if len(have) < 2:
            continue
        lib = row["library"]
        out.append(Finding(
            "runtime.bundled-twice", "warning",
            f"{len(have)} installed packages each ship their own {lib}",
            observed="; ".join(have) + f" ({row['platform']})",
            why=f"A program that imports two of them loads two copies of {lib}; Intel's OpenMP "
                "runtime then aborts ('OMP: Error #15: Initializing libiomp5md.dll, but found "
                "libiomp5md.dll already initialized') or, allowed to go on, can give wrong "
                "results.",
            fix=f"if it aborts so, keep one {lib}: rename the copy in one package's directory "
                "(e.g. site-packages\\ctranslate2), or install those packages from one source "
                "(all conda or all pip); KMP_DUPLICATE_LIB_OK=TRUE only hides it",
            source=row["source"]))
    return out


def drop_said_covered(findings: list[Finding]) -> list[Finding]:
    """Leave out a quoted sentence whose cause another finding (``covered_by``) names."""
    ids = {f.id for f in findings}
    return [f for f in findings
            if not any(r.startswith(_COVERED) and r[len(_COVERED):] in ids for r in f.related)]
