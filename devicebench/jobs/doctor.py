"""The doctor job: probe this machine (each framework imported in its own
subprocess), check it against the known problems and, given a script, read it (never
run it) for pitfalls. What ``devicebench doctor`` and :func:`devicebench.doctor` do."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devicebench.errors import InputError
from devicebench.progress import OnProgress, Reporter
from devicebench.schema import envelope


@dataclass(frozen=True)
class DoctorResult:
    """What :func:`doctor` found: the machine's snapshot, the findings (most severe
    first as the checks order them) and, given a script, what reading it found.

    Attributes:
        snapshot: the machine (:class:`devicebench.env.snapshot.EnvSnapshot`).
        findings: :class:`devicebench.env.finding.Finding`, the script's included.
        script: :class:`devicebench.script_check.ScriptReport`, or None.
        saved_to: where the snapshot was written (``save=``), or None.
    """

    snapshot: Any
    findings: list[Any]
    script: Any = None
    saved_to: Path | None = None

    @property
    def errors(self) -> list[Any]:
        return [f for f in self.findings if f.severity == "error"]

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` document: counts, findings, the script read (if any), the
        snapshot."""
        from devicebench.env.finding import SEVERITIES, sort_findings

        ordered = sort_findings(self.findings)
        doc: dict[str, Any] = {
            "summary": {s: sum(f.severity == s for f in ordered) for s in SEVERITIES},
            "findings": [f.to_dict() for f in ordered],
        }
        if self.script is not None:
            doc["script"] = self.script.to_dict()
        doc["snapshot"] = self.snapshot.to_dict()
        return envelope("doctor", doc)


def doctor(script: str | Path | None = None, *, frameworks: list[str] | None = None,
           timeout: float = 60.0, snapshot: str | Path | None = None,
           concurrent: bool = True, save: str | Path | None = None,
           on_progress: OnProgress | None = None) -> DoctorResult:
    """Probe this machine, check it and, given ``script``, read it for pitfalls.

    Args:
        frameworks: which to import (None: every installed one; ``[]``: none).
        timeout: seconds allowed for each framework's import.
        snapshot: a saved snapshot (``doctor --save``) to check instead of probing.
        concurrent: import the frameworks at once (False: one after another, exact
            import times, slower).
        save: write the snapshot (JSON) to this file.
        on_progress: progress events (:mod:`devicebench.progress`): one per framework
            probed. Default: one line each on stderr when it is a terminal, else none.

    Raises:
        devicebench.errors.DevicebenchError: a script that cannot be read or parsed, a
            snapshot file that is not one, a ``save`` path that cannot be written.
    """
    from devicebench.env.checks import run_checks
    from devicebench.validate import check_doctor_request

    check_doctor_request(script, frameworks, timeout, snapshot, concurrent)
    save = Path(save) if save is not None else None
    if save is not None and save.is_dir():
        raise InputError(f"--save path is a directory: {save}",
                         fix=f"pass a file name, e.g. {save}/env.json")
    source = None
    if script is not None:  # the static analyser is imported only to read a script
        from devicebench.script_check import read_script

        # Read once (a pipe gives its text once): bad input before the probe.
        source = read_script(script)
    if snapshot is not None:
        from devicebench.env.snapshot import load_snapshot

        snap = load_snapshot(Path(snapshot))
    else:
        from devicebench.env.probe import probe_environment

        report = Reporter("doctor", on_progress)
        snap = probe_environment(
            frameworks, timeout=timeout, concurrent=concurrent,
            on_framework=lambda name: report.progress(
                f"probing {name} (imported in a subprocess)"))
        report.finished()
    findings = run_checks(snap)
    read = None
    if source is not None:
        from devicebench.script_check import inspect_script

        read = inspect_script(source, snap)
        findings = findings + read.findings
    if save is not None:
        try:
            save.write_text(snap.to_json() + "\n", encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write snapshot to {save}: {exc.strerror}",
                             fix="choose a writable path") from None
    return DoctorResult(snap, findings, read, save)
