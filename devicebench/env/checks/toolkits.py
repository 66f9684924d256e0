"""A build's kernels against the GPU, and a toolkit's release against the driver (round 20b).

* TensorFlow's own "not built with CUDA kernel binaries compatible with compute capability
  X.Y" line: its kernels are JIT-compiled from an older architecture's PTX (slow, and on a
  new architecture graph execution can fail); the fix names a build for that capability (a
  newer NGC image for an NVIDIA ``+nvYY.MM`` build).
* A CUDA toolkit newer than the driver's CUDA (same major) beside packages that compile PTX
  at run time with it (Numba, cuDF, CuPy): minor-version compatibility does not cover PTX JIT.
"""

from __future__ import annotations

import re

from devicebench.env.checks._util import KB, fmt_mm, major_minor, tf_version
from devicebench.env.checks.unimported import TOOLKIT_IN_PATH
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

_TF_NOT_BUILT = re.compile(r"TensorFlow was not built with CUDA kernel binaries compatible with "
                           r"compute capability (\d+\.\d+)")
_CUDART_FULL = re.compile(r"libcudart\.so\.(\d+)\.(\d+)\.\d+")


def check_tf_capability_not_built(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """TensorFlow saying its build has no kernels for the GPU's compute capability."""
    probe = snap.frameworks.get("tensorflow")
    if probe is None:
        return []
    m = _TF_NOT_BUILT.search(probe.said or "\n".join(probe.messages))
    if not m:
        return []
    cap = m[1]
    version = snap.version_of("tensorflow") or tf_version(snap, kb) or probe.version
    ngc = "+nv" in version
    fix = ("use a newer NVIDIA NGC TensorFlow image built for compute capability "
           f"{cap} (nvcr.io/nvidia/tensorflow:<YY.MM>-tf2-py3, a release after this "
           f"{version.split('+')[1]}), or a newer TensorFlow release that lists {cap}"
           if ngc else
           f"install a newer TensorFlow built for compute capability {cap}: pip install -U "
           "'tensorflow[and-cuda]'; or an NVIDIA NGC image (nvcr.io/nvidia/tensorflow) that "
           "supports the GPU")
    return [Finding(
        "tensorflow.no-kernels-for-capability", "warning",
        f"TensorFlow {version} has no CUDA kernels for this GPU's compute capability {cap}",
        observed=f"TensorFlow said: {m[0]}",
        why="Its kernels are JIT-compiled from the PTX of an older architecture at first use "
            "(minutes, up to half an hour), and on a new architecture some graphs fail "
            "(CUDA_ERROR_INVALID_HANDLE) while simple ops run.",
        fix=fix,
        source="https://github.com/tensorflow/tensorflow/issues/112272 (2.17.0+nv25.2 on "
               "compute capability 12.0; the maintainer: a build with native Blackwell "
               "support, newer NGC images)")]


def _toolkit_release(snap: EnvSnapshot) -> str:
    """The CUDA toolkit's release: CUDA_HOME/CUDA_PATH's path, else the newest full
    libcudart.so.M.m.p the loader's directories hold."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if m := TOOLKIT_IN_PATH.search(snap.env_vars.get(var, "")):
            return f"{m[1]}.{m[2]}"
    found = [(int(m[1]), int(m[2])) for libs in (snap.ld_path_cuda_libs, snap.system_cuda_libs)
             for so in libs if (m := _CUDART_FULL.match(so))]
    return fmt_mm(max(found)) if found else ""


def check_toolkit_newer_than_driver_jit(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A toolkit newer than the driver's CUDA, with packages that JIT-compile PTX with it."""
    entry = kb.get("toolkit_jit", {})
    smi = snap.nvidia_smi
    jit = [d for d in entry.get("dists", []) if snap.has(d)]
    toolkit = _toolkit_release(snap)
    if smi is None or not jit or not toolkit or not major_minor(smi.cuda_version):
        return []
    tk, drv = major_minor(toolkit), major_minor(smi.cuda_version)
    if tk[0] != drv[0] or tk <= drv:
        return []
    driver = kb["cuda"]["toolkit_drivers"].get(fmt_mm(tk), [""])[0]
    series = driver.split(".")[0]
    names = ", ".join(f"{d} {snap.version_of(d)}" for d in jit)
    return [Finding(
        "cuda.toolkit-newer-than-driver-jit", "warning",
        f"The CUDA toolkit here ({fmt_mm(tk)}) is newer than the driver's CUDA "
        f"({fmt_mm(drv)}): {jit[0]}'s run-time compiled kernels need a newer driver",
        observed=f"{names}; CUDA toolkit {fmt_mm(tk)} (CUDA_HOME or the loader's "
                 f"libcudart); NVIDIA driver {smi.driver_version} (CUDA up to {fmt_mm(drv)})",
        why="CUDA's minor-version compatibility lets prebuilt binaries of a newer 12.x run on "
            "an older driver of the same major, but not PTX compiled at run time: Numba, cuDF "
            "and CuPy compile with the toolkit's NVRTC/NVVM, and the driver cannot load PTX "
            "newer than itself (cuDF: minor version compatibility is not supported).",
        fix=f"use a CUDA toolkit no newer than the driver's CUDA {fmt_mm(drv)} (export "
            f"CUDA_HOME=/usr/local/cuda-{fmt_mm(drv)}, its lib64 first on LD_LIBRARY_PATH), or "
            + (f"update the NVIDIA driver to the {series} series or newer (CUDA {fmt_mm(tk)})"
               if series else "update the NVIDIA driver"),
        source=entry["source"])]
