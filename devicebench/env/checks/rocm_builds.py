"""Round 18 (issue 24): which ROCm a framework build is for, read against the machine.

* TensorFlow's PyPI package on an AMD machine: its GPU build for ROCm is the separate
  ``tensorflow-rocm`` distribution (``[rocm_tf]``);
* TensorFlow's ROCm build saying it ignores the GPU because its target is not in its list of
  supported ones, where the target *is* in that list, glued to its neighbour without a
  separator (``gfx1030gfx1100``: tensorflow-rocm 2.14.0.600's bug, fixed upstream);
* a framework whose import fails for a ROCm library's soname, where its wheels name the ROCm
  release they were built for (``jax-rocm60-plugin``: 6.0, ``torch ...+rocm6.2``) and the ROCm
  on the loader's path is another release (``/opt/rocm-6.2.1``) (``[rocm_release_wheels]``).
"""

from __future__ import annotations

import re

from devicebench.env.checks._util import DISPLAY, KB, has_nvidia_gpu
from devicebench.env.checks.rocm import amd_agents
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

_GLUED = re.compile(r"gfx[0-9a-f]+?(?=gfx|$)")
_PATH_ROCM = re.compile(r"/opt/rocm-(\d+\.\d+(?:\.\d+)?)")


def check_tf_not_rocm(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A discrete AMD GPU in rocminfo, no NVIDIA one, and TensorFlow's PyPI package (not
    tensorflow-rocm) whose build is not a ROCm one: TensorFlow runs on the CPU."""
    probe = snap.frameworks.get("tensorflow")
    info = kb["rocm_tf"]
    agents = [(g, n) for g, n in amd_agents(snap) if g not in kb["rocm"]["integrated"]]
    if probe is None or not agents or has_nvidia_gpu(snap) or snap.has(info["dist"]):
        return []
    if probe.build.get("is_rocm_build") or any(d.kind == "GPU" for d in probe.physical_devices):
        return []
    have = snap.version_of("tensorflow") or probe.version
    gpus = ", ".join(f"{n or g} ({g})" for g, n in agents)
    return [Finding(
        "rocm.tf-not-rocm", "error",
        f"TensorFlow {have} is not a ROCm build ({info['dist']}): it cannot use the AMD GPU",
        observed=f"AMD GPU {gpus} in rocminfo; tensorflow {have} installed, {info['dist']} not"
                 + ("; built for CUDA " + str(probe.build["cuda_version"])
                    if probe.build.get("cuda_version") else ""),
        why="PyPI's tensorflow package carries CUDA (Linux) or CPU kernels only; TensorFlow for "
            "AMD GPUs is AMD's separate ROCm build, which must match the installed ROCm.",
        fix=info["fix"], source=info["source"])]


def check_tf_rocm_glued_targets(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """TensorFlow's ROCm build ignores a GPU whose target is in its supported list only glued
    to another target (no separator): the build's list is broken, not the GPU unsupported."""
    probe = snap.frameworks.get("tensorflow")
    if probe is None:
        return []
    said = probe.reported.get("rocm_gpu_ignored")
    if not said:
        return []
    name, gfx, listed = said["gpu"], said["gfx"], said["supported"]
    entries = [e.strip() for e in listed.split(",")]
    glued = [e for e in entries if len(_GLUED.findall(e)) > 1]
    if gfx in entries or not any(gfx in _GLUED.findall(e) for e in glued):
        return []
    info = kb["rocm_tf"]
    return [Finding(
        "rocm.tf-supported-list-broken", "error",
        f"TensorFlow {probe.version or snap.version_of(info['dist'])} ignores the {gfx} GPU "
        "though it supports it: its list of targets is missing a separator",
        observed=f"TensorFlow ignored {name} ({gfx}); its supported list reads "
                 f"'{', '.join(glued)}' glued together",
        why=f"The build compares the GPU's target with each entry of its supported list; an "
            f"entry '{glued[0]}' matches neither target, so a supported GPU is dropped and "
            "TensorFlow runs on the CPU (tensorflow-rocm 2.14.0.600's bug).",
        fix=info["glued_fix"], source=info["glued_source"])]


def _built_for_rocm(snap: EnvSnapshot, kb: KB) -> tuple[str, str]:
    """(the ROCm release a wheel names, that wheel) or ("", "")."""
    for dist in sorted(snap.distributions):
        for pattern, fmt in kb["rocm_release_wheels"]["patterns"]:
            m = re.fullmatch(pattern, dist + "==" + snap.version_of(dist))
            if m:
                return fmt.format(*m.groups()), dist
    return "", ""


def check_rocm_release_soname(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A framework's import fails for a ROCm library's soname; its wheels are built for one
    ROCm release and the ROCm on the loader's path is another (or none is named)."""
    info = kb["rocm_release_wheels"]
    names = "|".join(re.escape(s) for s in kb["rocm_sdk_wheels"]["sonames"])
    missing = re.compile(rf"((?:{names})[\w.+-]*\.so[.\d]*): cannot open shared object file")
    built, wheel = _built_for_rocm(snap, kb)
    if not built:
        return []
    for name, probe in snap.frameworks.items():
        m = missing.search("\n".join([probe.error, *probe.messages, probe.said]))
        if not m or (name == "torch" and not wheel.startswith("torch")):
            continue
        where = " ".join(snap.env_vars.get(v, "") for v in ("LD_LIBRARY_PATH", "ROCM_PATH"))
        found = sorted(set(_PATH_ROCM.findall(where)))
        if found and all(f.startswith(built) for f in found):
            continue  # the release it was built for is on the path: another cause
        on_path = (f"the loader's path has ROCm {', '.join(found)}" if found
                   else "no ROCm release is named on LD_LIBRARY_PATH or ROCM_PATH")
        return [Finding(
            "rocm.wheel-for-another-rocm", "error",
            f"{DISPLAY.get(name, name)}'s ROCm wheels are built for ROCm {built}, and {m[1]} "
            "is missing",
            observed=f"{wheel} {snap.version_of(wheel)} (ROCm {built}); import failed: {m[1]}: "
                     f"cannot open shared object file; {on_path}",
            why="A ROCm wheel links the sonames of the ROCm release it was built with; another "
                "release ships other sonames (a library's major bumps between releases), so the "
                "loader cannot find them and the import fails.",
            fix=info["fix"].format(built=built), source=info["source"])]
    return []
