"""Shared by the doctor's rule tests: a corpus case's raw probe inputs, and the findings the
doctor gives when they are replayed through the probe's own interpretation."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from devicebench.env.checks import run_checks
from devicebench.env.finding import Finding
from devicebench.env.interpret import snapshot_from_raw

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "env_corpus"


def case_raw(corpus: str, url_end: str) -> dict:
    """A copy of the raw inputs of the case in ``CORPUS/<corpus>.json`` whose URL ends so."""
    cases = json.loads((CORPUS / f"{corpus}.json").read_text(encoding="utf-8"))["cases"]
    return copy.deepcopy(next(c for c in cases if c["url"].endswith(url_end))["raw"])


def finding_ids(raw: dict) -> dict[str, Finding]:
    """The doctor's findings on ``raw`` replayed, by id."""
    return {f.id: f for f in run_checks(snapshot_from_raw(raw))}


# The host layers the doctor rule tests of rounds 22-25 build their raw cases on.
LINUX = {"system": "Linux", "machine": "x86_64", "python_version": "3.10.12",
         "python_implementation": "CPython", "conda_env": False, "python_prefix": "/usr",
         "os_release_name": "Ubuntu 22.04.3 LTS", "kernel_release": "5.15.0-91-generic"}
WIN = {"system": "Windows", "machine": "AMD64", "python_version": "3.10.11",
       "python_implementation": "CPython", "platform": "Windows-10-10.0.22631-SP0",
       "python_prefix": "C:\\Users\\u\\venv", "conda_env": False}


def warned(raw: dict, *, infos: bool = False) -> dict[str, Finding]:
    """The doctor's warnings and errors on ``raw`` replayed, by id (``infos``: every finding)."""
    return {f.id: f for f in run_checks(snapshot_from_raw(raw)) if infos or f.severity != "info"}


def findings_by_id(raw: dict) -> dict[str, list[Finding]]:
    """The doctor's findings on ``raw`` replayed, every one, by id (a rule may give several)."""
    out: dict[str, list[Finding]] = {}
    for f in run_checks(snapshot_from_raw(raw)):
        out.setdefault(f.id, []).append(f)
    return out
