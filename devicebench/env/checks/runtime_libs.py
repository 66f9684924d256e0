"""Runtime libraries read from the loader's cache and the environment's ``lib/`` (round 19).

The C++ runtime (``libstdc++.so.6.0.N`` defines GLIBCXX up to 3.4.N) against the system
compiler that builds extensions on this machine, an EL7 system's GCC 4.8 runtime in a conda
environment without its own, and a system cuDNN known only by its major soname where
TensorFlow's tested build names a minor.
"""

from __future__ import annotations

import re

from devicebench.env.checks._util import KB, major_minor, ok_probe, tf_version
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

_ENV_CXX = re.compile(r"libstdc\+\+\.so\.6\.0\.(\d+)$")
# GLIBCXX_3.4.N -> the GCC release whose libstdc++ first defines it (GCC's ABI page)
_GCC_OF = {28: "10", 29: "11", 30: "12", 31: "13", 32: "13", 33: "14"}


def env_glibcxx(snap: EnvSnapshot) -> int:
    """The newest GLIBCXX_3.4.N of the environment's own libstdc++ (0 if none is listed).

    Example:
        >>> env_glibcxx(EnvSnapshot(
        ...     env_cuda_libs={"libstdc++.so.6.0.29": "/e/lib/libstdc++.so.6.0.29"}))
        29
    """
    found = [int(m.group(1)) for n in snap.env_cuda_libs if (m := _ENV_CXX.search(n))]
    return max(found, default=0)


def _os_row(snap: EnvSnapshot, rows: dict | list) -> str:
    name = snap.host.os_version
    return next((r for r in rows if name.startswith(r) and name[len(r):][:1] in ("", ".", " ")),
                "")


def check_env_cxx_older(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A conda environment's libstdc++ older than the system g++ that builds extensions."""
    entry = kb.get("cxx_runtime", {})
    if not snap.host.conda_env or not entry:
        return []
    out = []
    builders = [d for d in entry["builders"] if snap.has(d)]
    env_n = env_glibcxx(snap)
    row = _os_row(snap, entry["system_glibcxx"])
    if builders and env_n and row and env_n < entry["system_glibcxx"][row]:
        sys_n = entry["system_glibcxx"][row]
        gcc = _GCC_OF.get(sys_n, "")
        out.append(Finding(
            "libstdcxx.env-older-than-system-compiler", "warning",
            f"The environment's libstdc++ (GLIBCXX_3.4.{env_n}) is older than {row}'s g++ "
            f"needs (GLIBCXX_3.4.{sys_n}): {builders[0]}'s compiled code will not load",
            observed=f"{snap.host.python_prefix}/lib holds libstdc++.so.6.0.{env_n}; "
                     f"{', '.join(f'{d} {snap.version_of(d)}' for d in builders)} compile C++ "
                     f"on this machine with the system compiler ({row}: GCC {gcc or '?'})",
            why="Code built with the system's g++ needs its C++ runtime's symbol versions; "
                "Python in a conda environment loads the environment's own libstdc++.so.6 "
                f"first, which stops at GLIBCXX_3.4.{env_n}, so the extension fails to import "
                f"(version `GLIBCXX_3.4.{sys_n}' not found).",
            fix=entry["fix_env"].format(gcc=gcc or sys_n),
            source=entry["source"]))
    sys_cxx = snap.system_cuda_libs.get("libstdc++.so.6", "")
    el7 = _os_row(snap, entry["el7"])
    if el7 and sys_cxx and not env_n:
        out.append(Finding(
            "libstdcxx.el7-system-runtime", "warning",
            f"{el7}'s system libstdc++ (GCC 4.8, GLIBCXX_3.4.19) is the one this conda "
            "environment loads",
            observed=f"the loader's libstdc++.so.6: {sys_cxx}; {snap.host.python_prefix}/lib "
                     "holds no libstdc++ of its own",
            why="Compiled extensions built on newer systems (most wheels and conda packages) "
                "need GLIBCXX_3.4.20 or newer; with only GCC 4.8's runtime they fail to load "
                "(version `GLIBCXX_3.4.2x' not found), or load only when another package "
                "brought a newer libstdc++ in first (an import-order dependence).",
            fix=entry["fix_el7"], source=entry["source"]))
    return out


def check_tf_system_cudnn_minor(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """TensorFlow on a system cuDNN known by its major soname only, its tested minor unmet
    possibly: the minor is checked by TensorFlow only at the first cuDNN call."""
    probe = ok_probe(snap, "tensorflow")
    tf_v = tf_version(snap, kb)
    row = kb["tensorflow"]["tested_builds"].get(".".join(map(str, major_minor(tf_v)[:2])))
    if probe is None or row is None or not any(d.kind == "GPU" for d in probe.physical_devices):
        return []
    want = row[1]
    major = want.split(".")[0]
    soname = f"libcudnn.so.{major}"
    if "." not in want or any(d.startswith("nvidia-cudnn") for d in snap.distributions) \
            or not snap.system_cuda_libs.get(soname) \
            or any(n.startswith(soname + ".") for n in snap.system_cuda_libs):
        return []
    return [Finding(
        "tensorflow.system-cudnn-minor-unknown", "warning",
        f"TensorFlow {tf_v} was built with cuDNN {want}; the system's cuDNN {major} minor is "
        "not known",
        observed=f"the loader finds {soname} at {snap.system_cuda_libs[soname]} (no minor "
                 "version in its name); no nvidia-cudnn wheel is installed",
        why=f"TensorFlow loads any {soname}, then checks its minor only at the first cuDNN "
            f"call (a convolution): an older one fails there ('Loaded runtime CuDNN library: "
            f"{major}.x but source was compiled with: {want}'), after the GPU was listed.",
        fix=f"pip install 'tensorflow[and-cuda]=={'.'.join(tf_v.split('.')[:2])}.*'  # brings "
            f"the cuDNN {want} wheel; or install cuDNN {want} for the system",
        source=kb["tf_system_cudnn"]["source"])]
