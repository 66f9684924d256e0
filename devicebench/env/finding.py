"""`Finding`: one thing doctor has to say, with the evidence and the fix."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")


@dataclass(frozen=True)
class Finding:
    """A diagnosis produced by a check.

    Attributes:
        id: stable identifier, e.g. ``"metal.tf-too-new"``; tests and users key on it.
        severity: ``"error"`` (it will not work / gives wrong results), ``"warning"``
            (it works, but slower or fragile), ``"info"`` (worth knowing).
        title: a short headline.
        observed: what was seen, with the versions or numbers.
        why: why it matters.
        fix: the exact command or code that fixes it ("" when nothing is to be done).
        source: where the knowledge comes from (URL or issue), "" when self-evident.
        location: ``"path:line"`` for script findings, "" for environment findings.
        related: ids of environment facts this finding depends on, for cross-reference.

    Example:
        >>> f = Finding("env.rosetta", "error", "Python runs under Rosetta",
        ...             observed="sysctl.proc_translated=1", why="no Metal GPU",
        ...             fix="install an arm64 Python")
        >>> f.severity, f.location
        ('error', '')
    """

    id: str
    severity: Severity
    title: str
    observed: str
    why: str
    fix: str = ""
    source: str = ""
    location: str = ""
    related: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, got {self.severity!r}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["related"] = list(self.related)
        return d


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Errors first, then warnings, then info; stable within a severity."""
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(findings, key=lambda f: order[f.severity])
