"""A framework that fails to import (error, crash, timeout): the likeliest cause read
from its error text (wrong architecture, a macOS too old for the wheel, CUDA libraries
missing), with the fix."""

from __future__ import annotations

import dataclasses
import re

from devicebench.env.checks._util import (
    DISPLAY,
    KB,
    as_version,
    at_least,
    fmt_mm,
    macos_version,
    major_minor,
    shorten,
    tf_distributions,
    tf_version,
)
from devicebench.env.checks.apple import metal_install_fix
from devicebench.env.checks.cuda import tf_cuda_fix
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

_FAILED = ("error", "crashed", "timeout")
_DIST_OF = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch", "keras": "keras"}
_CUDA_LIBS = ("libcudnn", "libcuda", "libcublas", "libcudart", "libnvrtc", "libnccl")
_BUILT_FOR = re.compile(r"built for (?:Mac OS X|macOS) (\d+(?:\.\d+)*)")
_WRONG_ARCH = re.compile(r"incompatible architecture|wrong architecture", re.I)
_HAVE_NEED = re.compile(r"have\s*[('\"]+(\w+)[)'\"]+\s*,\s*need\s*[('\"]+(\w+)[)'\"]+")


def _wrong_arch_hint(
    name: str, probe_error: str, snap: EnvSnapshot, kb: KB
) -> tuple[str, str, tuple]:
    """A wheel built for the other CPU architecture: name the installed distribution."""
    m = _HAVE_NEED.search(probe_error)
    have, need = (m.group(1), m.group(2)) if m else ("another architecture", "this one")
    if name == "tensorflow":
        installed = tf_distributions(snap, kb) or ["tensorflow"]
    else:
        installed = [_DIST_OF.get(name, name)]
    version = snap.version_of(installed[0])
    why = (
        f"The installed {' and '.join(installed)} {version} contains binaries for {have}, "
        f"but this Python runs as {need}: the wheel was built for the other CPU "
        "architecture (installed under Rosetta, copied from another Mac, or from a cached "
        "wheel)."
    )
    if snap.host.rosetta:
        return (why, "install an arm64 Python first (see env.rosetta), then reinstall "
                f"{installed[0]} in a fresh venv", ("env.rosetta",))
    target = installed[0]
    if name == "tensorflow" and snap.is_apple_silicon and version:
        # Apple Silicon: tensorflow-macos up to 2.12, `tensorflow` itself from 2.13.
        use_tf = at_least(version, kb["tensorflow_macos"]["use_tensorflow_from"])
        target = "tensorflow" if use_tf else "tensorflow-macos"
    pin = f"=={fmt_mm(major_minor(version))}.*" if version else ""
    return (
        why,
        f"pip uninstall -y {' '.join(installed)} && pip install --no-cache-dir "
        f"'{target}{pin}'  # check first: python -c 'import platform; "
        "print(platform.machine())' must print arm64 on Apple Silicon",
        (),
    )


def _failure_hint(name: str, probe_error: str, snap: EnvSnapshot, kb: KB) -> tuple[str, str, tuple]:
    """(why, fix, related) for a failed import, recognising well-known messages."""
    err = probe_error.lower()
    dist = _DIST_OF.get(name, name)
    built_for = _BUILT_FOR.search(probe_error)
    mac = macos_version(snap)
    if built_for and mac is not None and as_version(built_for.group(1)) is not None:
        needed = built_for.group(1)
        if mac < as_version(needed):
            return (
                f"A library here was built for macOS {needed} or newer; this is macOS "
                f"{snap.host.macos_version}. The OS is too old for it (not a version mismatch"
                " between TensorFlow and the plugin: no plugin version loads on this macOS).",
                f"upgrade macOS to {needed} or newer (System Settings > General > Software "
                "Update); until then: pip uninstall -y tensorflow-metal  # train on the CPU",
                ("metal.macos-too-old",),
            )
    arch = _WRONG_ARCH.search(probe_error)
    if arch:
        return _wrong_arch_hint(name, probe_error, snap, kb)
    if "symbol not found" in err and ("metal" in err or snap.has("tensorflow-metal")):
        return (
            "Metal plugin mismatch: tensorflow-metal was built against another TensorFlow and "
            "references a symbol this TensorFlow does not export.",
            metal_install_fix(snap, kb),
            ("metal.symbol-not-found", "metal.tf-too-new", "metal.version-mismatch"),
        )
    if any(lib in err for lib in _CUDA_LIBS):
        fixes = {
            "tensorflow": tf_cuda_fix(tf_version(snap, kb), kb),
            "jax": "pip install -U 'jax[cuda12]'",
            "torch": "pip install --force-reinstall torch",
        }
        return (
            "CUDA libraries are missing or not on the library path (libcuda comes with the "
            "NVIDIA driver; cuDNN/cuBLAS come from the framework's CUDA wheels).",
            fixes.get(name, f"pip install --force-reinstall {dist}"),
            ("cuda.driver-too-old",),
        )
    if "illegal instruction" in err or "illegal hardware instruction" in err or "sigill" in err:
        if snap.host.rosetta:
            return (
                "The x86 build uses AVX, which Rosetta 2 lacked before macOS 15.",
                "install an arm64 Python and reinstall into a fresh venv (see env.rosetta)",
                ("env.rosetta",),
            )
        return (
            "The binary uses CPU instructions (e.g. AVX) this CPU does not have.",
            f"install a {dist} build for this CPU (e.g. from conda-forge), or build from source",
            (),
        )
    if "numpy" in err and ("_array_api" in err or "numpy 1.x" in err or "numpy.core" in err):
        return (
            "The framework was compiled against NumPy 1.x and cannot run with NumPy 2.",
            f"pip install 'numpy<2'  # or upgrade {dist} to a release built for NumPy 2",
            (),
        )
    if "timeout" in err or not err:
        return (
            "The import did not finish in time (a hung driver or plugin initialisation, or a "
            "very slow disk).",
            f"python -c 'import {name}'  # run by hand to see where it stops",
            (),
        )
    return (
        f"{DISPLAY.get(name, name)} cannot be used in this environment; the error says why.",
        f"python -c 'import {name}'  # reproduce; then: pip install --force-reinstall {dist}",
        (),
    )


_GENERIC_FIX = re.compile(r"(?:python -c 'import \w+'  # reproduce; then: )?"
                          r"pip install --force-reinstall [\w-]+")


def defer_generic_fixes(findings: list[Finding]) -> list[Finding]:
    """A failed import whose fix is only 'reinstall it', beside another error or warning that
    names a cause: point at that finding instead (reinstalling the same wheels reproduces the
    failure when the cause is the versions or the loader's path around them)."""
    causes = [f.id for f in findings if f.severity != "info" and f.id != "framework.import-failed"]
    if not causes:
        return findings
    out = []
    for f in findings:
        if f.id == "framework.import-failed" and _GENERIC_FIX.fullmatch(f.fix):
            f = dataclasses.replace(
                f, fix=f"fix the cause doctor names first ({', '.join(causes)}); then retry",
                related=(*f.related, *causes))
        out.append(f)
    return out


def check_probe_failures(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A framework whose import errored, crashed or hung -> error with the captured text."""
    out: list[Finding] = []
    for name, probe in sorted(snap.frameworks.items()):
        if probe.status not in _FAILED:
            continue
        display = DISPLAY.get(name, name)
        version = probe.version or snap.version_of(_DIST_OF.get(name, name)) or "?"
        error = probe.error or ("import timed out" if probe.status == "timeout" else "")
        why, fix, related = _failure_hint(name, error or probe.status, snap, kb)
        out.append(
            Finding(
                "framework.import-failed",
                "error",
                f"{display} failed to import ({probe.status})",
                observed=(
                    f"{display} {version}: probe {probe.status}; error: "
                    f"{shorten(error) or '(no output captured)'}"
                ),
                why=why,
                fix=fix,
                related=related,
            )
        )
    return out
