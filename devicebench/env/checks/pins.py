"""A project's own pins (requirements of a distribution that is not installed: the user's
app or repository, recorded in the snapshot's ``requires``) that cannot install here.

pip answers both with "No matching distribution found", which reads as a network or index
problem; the cause is the platform or the Python:

* a requirement naming a package (or extra) that exists only for other systems
  (``[[platform_packages]]``: JAX's CUDA plugins on Windows, ...);
* a pin to a release with no wheel for this Python (``torch_python``,
  ``tensorflow_python`` and ``[[package_python]]`` ranges per release).
"""

from __future__ import annotations

import re

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from devicebench.env.checks._util import KB, major_minor, matches, platform_conflict
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot


def _python_ranges(kb: KB) -> dict[str, tuple[dict[str, str], str]]:
    ranges = {"torch": (kb["torch_python"]["releases"], kb["torch_python"]["source"]),
              "tensorflow": (kb["tensorflow_python"]["releases"],
                             kb["tensorflow_python"]["source"])}
    for entry in kb.get("package_python", []):
        ranges[entry["dist"]] = (entry["releases"], entry["source"])
    return ranges


def _range_for(version: str, releases: dict[str, str]) -> str:
    """The Python range of the most specific release key that prefixes ``version``."""
    parts = version.split("+")[0].split(".")
    for n in range(len(parts), 0, -1):
        key = ".".join(parts[:n])
        if key in releases:
            return releases[key]
    return ""


def _newest_python(spec: str) -> str:
    return next((f"3.{m}" for m in range(30, 5, -1) if matches(f"3.{m}", spec)), "")


def _venv_fix(snap: EnvSnapshot, python: str, line: str) -> str:
    if snap.host.os == "Windows":
        return (f"py -{python} -m venv .venv && .venv\\Scripts\\activate && "
                f"pip install \"{line}\"")
    return f"python{python} -m venv .venv && . .venv/bin/activate && pip install '{line}'"


def check_project_pins(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """Warnings for a project's requirements that have no wheel on this OS or Python."""
    py = ".".join(map(str, major_minor(snap.host.python_version)[:2]))
    ranges = _python_ranges(kb)
    out: list[Finding] = []
    for owner, lines in sorted(snap.requires.items()):
        if snap.has(owner):
            continue  # an installed package's requirements are pip_check's
        for line in lines:
            where = f"{snap.host.os} {snap.host.machine}".strip()
            name = platform_conflict(line, snap, kb)
            if name:
                out.append(Finding(
                    "install.pin-not-for-platform", "warning",
                    f"{owner} asks for {name}, which has no wheels for {where}",
                    observed=f"{owner}'s requirement '{line}'; this is {where}",
                    why=f"{name} is published only for other systems, so pip backtracks "
                        "through older releases or answers 'No matching distribution "
                        "found': the platform, not the index.",
                    fix=("run the project in WSL2 (the Linux wheels there): pip install "
                         f"'{line}'" if snap.host.os == "Windows" else
                         f"drop '{line}' here (use the CPU build of the framework) or "
                         "run on a machine it is published for"),
                    source=next(e["source"] for e in kb["platform_packages"]
                                if re.search(e["pattern"], line))))
                continue
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            dist = canonicalize_name(req.name)
            pins = [s.version for s in req.specifier if s.operator in ("==", "===")]
            if dist not in ranges or not pins or not py:
                continue
            releases, source = ranges[dist]
            spec = _range_for(pins[0], releases)
            if not spec or matches(py, spec):
                continue
            good = _newest_python(spec)
            out.append(Finding(
                "install.pin-not-for-python", "warning",
                f"{owner} pins {dist}=={pins[0]}, which has no wheels for Python {py}",
                observed=f"{owner}'s requirement '{line}'; Python {snap.host.python_version}; "
                         f"{dist} {pins[0]} has wheels for Python {spec}",
                why="pip only installs a release built for the running Python, so the pin "
                    "fails with 'No matching distribution found' (from versions: none).",
                fix=_venv_fix(snap, good, line) if good else f"relax the pin on {dist}",
                source=source))
    return out
