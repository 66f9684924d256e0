"""A package that extends a framework fails to import after it (issue 24: the failures
"inside packages the probe does not import" that every round's misses listed).

The probe worker imports each installed package of
:data:`devicebench.backends.extensions.EXTENSIONS` after its framework and keeps what it
raised. The error names the cause; the kind of error says which fix works: a missing C++
symbol (built for another framework release), a missing attribute of the framework (a name
the installed release removed or has not added yet), a missing module (an undeclared
dependency), or the process dying in it.
"""

from __future__ import annotations

import re

from devicebench.backends.extensions import dist_of
from devicebench.env.checks._util import KB
from devicebench.env.checks.said import ABI_ERROR
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

_NO_ATTR = re.compile(r"module '([\w.]+)' has no attribute '(\w+)'|cannot import name '(\w+)' "
                      r"from '([\w.]+)'")
_NO_MODULE = re.compile(r"No module named '([\w.]+)'")
_DISPLAY = {"torch": "PyTorch", "jax": "JAX", "tensorflow": "TensorFlow"}


def _fix(error: str, dist: str, module: str, fw: str, fw_v: str) -> str:
    if ABI_ERROR.search(error):
        return (f"install the {dist} build made for {fw} {fw_v} (its install page's wheel "
                f"index for this {fw} and CUDA, e.g. pip install --force-reinstall "
                f"--no-cache-dir {dist} -f <that index>), or build it here from source "
                f"against the installed {fw}")
    if m := _NO_ATTR.search(error):
        owner = m.group(1) or m.group(4) or ""
        if owner.split(".")[0] in (fw, "tf", "keras", "jax", "jaxlib"):
            return (f"install the {dist} release made for {fw} {fw_v} (pip install -U {dist}), "
                    f"or the {fw} release this {dist} was written for: `{owner}` has no "
                    f"`{m.group(2) or m.group(3)}` in {fw_v}")
    if m := _NO_MODULE.search(error):
        missing = m.group(1).split(".")[0]
        if missing != module.split(".")[0]:
            return (f"pip install {missing.replace('_', '-')}  # {dist} imports it without "
                    f"declaring it (or pin the {dist} release that did not need it)")
    if error.startswith(("the process died", "hung")):
        return (f"run `python -c \"import {fw}, {module}\"` to see it fail on its own, then "
                f"reinstall {dist} for {fw} {fw_v}")
    return (f"reinstall {dist} for {fw} {fw_v} (pip install --force-reinstall --no-cache-dir "
            f"{dist}); if that does not help, its release notes name the {fw} releases it "
            "supports")


def check_extension_imports(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """Each installed extension whose import after its framework failed, with the error it
    raised and the fix its kind of error calls for (compiled torch extensions with a missing
    C++ symbol that ``[[torch_extensions]]`` knows are ``torch.extension-abi``'s)."""
    known = {row["module"] for row in kb.get("torch_extensions", [])}
    out: list[Finding] = []
    for fw, probe in sorted(snap.frameworks.items()):
        errors = probe.extra.get("extension_errors") or {}
        fw_v = probe.version or snap.version_of(fw) or "?"
        for module, error in sorted(errors.items()):
            error = str(error)
            if fw == "torch" and module in known and ABI_ERROR.search(error):
                continue  # torch.extension-abi says it, with the package's own fix
            dist = dist_of(fw, module) or module.split(".")[0]
            have = snap.version_of(dist)
            first = error.strip().splitlines()[0][:200] if error.strip() else "(no message)"
            out.append(Finding(
                "package.extension-import-fails", "warning",
                f"{dist}{' ' + have if have else ''} fails to import after "
                f"{_DISPLAY.get(fw, fw)} {fw_v}: {first}",
                observed=f"`import {module}` in the {fw} probe, after {fw} {fw_v} imported "
                         f"fine: \"{first}\"",
                why=f"{dist} is installed but cannot be imported with this {fw}: a script "
                    f"that imports it fails there, while {fw} alone looks healthy.",
                fix=_fix(error, dist, module, fw, fw_v),
                source="devicebench.backends.extensions (the probe imports each installed "
                       "extension after its framework)"))
    return out
