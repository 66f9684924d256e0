"""Which Keras a script is written for, read from the script itself (issue 24, class 21).

A script pinned to TensorFlow 2.15 runs Keras 2 wherever it is checked; the Keras installed
where devicebench runs says nothing about it. Read, in order: the script's use of `tf_keras` /
`TF_USE_LEGACY_KERAS`, its inline metadata (PEP 723 ``# /// script`` block), a
``requirements.txt`` beside it; only then the snapshot's installed Keras.
"""

from __future__ import annotations

import re
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

_KERAS3_TF = Version("2.16")  # TensorFlow 2.16 made Keras 3 its tf.keras


def declared_requirements(lines: list[str], directory: Path | None) -> list[Requirement]:
    """Requirements the script declares: its PEP 723 block, else requirements.txt beside it."""
    text = "\n".join(lines)
    block = re.search(r"^# /// script\s*$(.*?)^# ///\s*$", text, re.M | re.S)
    raw: list[str] = []
    if block:
        body = "\n".join(line[2:] if line.startswith("# ") else line[1:]
                         for line in block.group(1).splitlines())
        deps = re.search(r"dependencies\s*=\s*\[(.*?)\]", body, re.S)
        raw = re.findall(r"[\"']([^\"']+)[\"']", deps.group(1)) if deps else []
    elif directory is not None and (directory / "requirements.txt").is_file():
        try:
            raw = (directory / "requirements.txt").read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            raw = []
    out = []
    for r in raw:
        try:
            out.append(Requirement(r.split("#")[0].strip()))
        except InvalidRequirement:
            continue
    return out


def _major(req: Requirement) -> int | None:
    """Keras major version a requirement implies (None when it does not decide)."""
    probes = [Version(s.version) for s in req.specifier if s.operator in ("==", "<=", "~=")
              and re.fullmatch(r"[\d.]+", s.version)]
    if req.name.lower() in ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-macos"):
        if probes:
            return 2 if probes[0] < _KERAS3_TF else 3
        lt = [Version(s.version) for s in req.specifier if s.operator == "<"]
        return 2 if lt and lt[0] <= _KERAS3_TF else None
    if req.name.lower() == "keras" and probes:
        return probes[0].major
    if req.name.lower() in ("tf-keras", "tf_keras"):
        return 2
    return None


def keras_assumed(lines: list[str], code: str, directory: Path | None, installed: str,
                  ) -> tuple[bool, str]:
    """(Keras 2?, what that rests on) for this script; ``code`` is its text without comments."""
    text = code
    if re.search(r"^\s*(import tf_keras|from tf_keras\b)", text, re.M) or re.search(
            r"TF_USE_LEGACY_KERAS[\"']?\]?\s*=\s*[\"']?(1|True|true)", text):
        return True, "Keras 2: the script uses tf_keras / TF_USE_LEGACY_KERAS"
    for req in declared_requirements(lines, directory):
        major = _major(req)
        if major is not None:
            return major == 2, f"Keras {major}: the script declares `{req}`"
    if installed:
        major = 2 if installed[:2] in ("1.", "2.") else 3
        return major == 2, f"Keras {major}: keras {installed} is installed here"
    return False, "Keras 3 (no pin in the script and no installed Keras known)"


def pinned_keras(lines: list[str], directory: Path | None) -> tuple[str, Version] | None:
    """(the requirement, the Keras version it fixes) when the script pins TensorFlow or Keras
    to one release (``tensorflow==2.6.0`` fixes Keras 2.6: TensorFlow 2.x up to 2.15 ships
    the Keras of its own minor version); None when it pins no single release."""
    for req in declared_requirements(lines, directory):
        exact = [Version(s.version) for s in req.specifier if s.operator in ("==", "~=")
                 and re.fullmatch(r"[\d.]+", s.version)]
        if not exact:
            continue
        name = req.name.lower()
        if name in ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-macos"):
            if exact[0] < _KERAS3_TF:
                return str(req), Version(f"2.{exact[0].minor}")
            return str(req), Version("3")
        if name in ("keras", "tf-keras", "tf_keras"):
            return str(req), exact[0]
    return None


_TF_DISTS = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-macos")


def pinned_tf1(lines: list[str], directory: Path | None) -> str:
    """The requirement, when the script declares TensorFlow 1.x (``tensorflow-gpu==1.15``,
    ``tensorflow<2``); "" otherwise.

    Example:
        >>> pinned_tf1(["# /// script", '# dependencies = ["tensorflow-gpu==1.15.0"]',
        ...             "# ///"], None)
        'tensorflow-gpu==1.15.0'
        >>> pinned_tf1(["# /// script", '# dependencies = ["tensorflow>=2.12"]', "# ///"], None)
        ''
    """
    for req in declared_requirements(lines, directory):
        if req.name.lower() not in _TF_DISTS:
            continue
        bounds = [(s.operator, Version(s.version)) for s in req.specifier
                  if re.fullmatch(r"[\d.]+", s.version)]
        if any(op in ("==", "~=", "<=") and v.major == 1 or op == "<" and v <= Version("2")
               for op, v in bounds):
            return str(req)
    return ""
