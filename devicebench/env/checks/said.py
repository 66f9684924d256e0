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


def check_framework_says(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """Each ``[[framework_says]]`` sentence a framework printed, quoted, with its cause/fix.

    A row applies when its ``pattern`` matches a framework's kept output, the framework is
    one of the row's ``frameworks`` (all when absent), no distribution in
    ``unless_installed`` is installed and no row named in ``unless_said`` matched; one
    finding per row, naming every framework that said it.
    """
    rows = kb.get("framework_says", [])
    hits: dict[str, tuple[dict, list[str], dict[str, str], str]] = {}
    for row in rows:
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
                          cuda=str(probe.build.get("cuda_version") or ""))
            hits[row["id"]] = (row, [who], values, m[0].strip()[:MAX_QUOTE])
    out = []
    for rid, (row, who, values, quote) in hits.items():
        if any(other in hits for other in row.get("unless_said", [])):
            continue
        out.append(Finding(
            rid, row["severity"], _fill(row["title"], values),
            observed=f"{' and '.join(who)} printed: \"{quote}\"",
            why=_fill(row["why"], values), fix=_fill(row["fix"], values),
            source=row["source"],
            related=[_COVERED + c for c in row.get("covered_by", [])]))
    return out


def drop_said_covered(findings: list[Finding]) -> list[Finding]:
    """Leave out a quoted sentence whose cause another finding (``covered_by``) names."""
    ids = {f.id for f in findings}
    return [f for f in findings
            if not any(r.startswith(_COVERED) and r[len(_COVERED):] in ids for r in f.related)]
