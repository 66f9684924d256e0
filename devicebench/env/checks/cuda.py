"""CUDA knowledge the GPU checks share: the driver a CUDA build needs, and what
TensorFlow's CUDA libraries failing to load means (names, tested builds, fixes)."""

from __future__ import annotations

import re

from devicebench.env.checks._util import (
    KB,
    as_version,
    at_least,
    fmt_mm,
    major_minor,
    matches,
    tf_version,
)
from devicebench.env.snapshot import EnvSnapshot, FrameworkProbe

Cause = tuple[str, str, tuple[str, ...]]  # (cause, fix, related finding ids)


def cuda_gap(snap: EnvSnapshot, kb: KB, build_cuda: str) -> tuple[str, str]:
    """How a CUDA build relates to the driver: ("", "") fine, else (kind, minimum driver).

    kind is ``"major"`` (newer CUDA major than the driver supports), ``"driver"`` (driver
    below the family's minimum) or ``"minor"`` (newer minor: minor-version compatibility).
    """
    smi = snap.nvidia_smi
    b = major_minor(build_cuda)
    if smi is None or not b:
        return "", ""
    d = major_minor(smi.cuda_version)
    drv = as_version(smi.driver_version)
    fam = next((f for f in kb["cuda"]["families"] if f["major"] == b[0]), None)
    min_drv = fam["min_driver_linux"] if fam else ""
    if d and b[0] > d[0]:
        return "major", min_drv
    if snap.host.os == "Linux" and drv and min_drv and not at_least(smi.driver_version, min_drv):
        return "driver", min_drv
    if d and b > d:
        return "minor", min_drv
    return "", min_drv


_MISSING_LIB = re.compile(r"Could not load dynamic library '([^']+)'")


def cudart_soname(cuda: str) -> str:
    """The libcudart soname a build for ``cuda`` loads: 10.1 -> .so.10.1, 11.x -> .so.11.0."""
    mm = major_minor(cuda)
    if not mm:
        return ""
    if mm[0] >= 12:
        return f"libcudart.so.{mm[0]}"
    if mm[0] == 11:
        return "libcudart.so.11.0"
    return f"libcudart.so.{fmt_mm(mm)}"


def tf_tested_build(kb: KB, tf_v: str) -> tuple[str, str]:
    """(CUDA, cuDNN) TensorFlow ``tf_v`` was built and tested with (("", "") if unknown)."""
    entry = kb["tensorflow"]["tested_builds"].get(fmt_mm(major_minor(tf_v)))
    return (entry[0], entry[1]) if entry else ("", "")


def tf_cuda_fix(tf_v: str, kb: KB) -> str:
    """Install the CUDA libraries this TensorFlow was built for, the way its release allows.

    ``tensorflow[and-cuda]`` exists from TF 2.14; older releases need the CUDA and cuDNN
    of their tested build (conda-forge ships both).
    """
    tfk = kb["tensorflow"]
    if not tf_v or matches(tf_v, tfk["and_cuda"]):
        pin = f"=={tf_v}" if tf_v else ""
        return f"pip install 'tensorflow[and-cuda]{pin}'"
    cuda, cudnn = tf_tested_build(kb, tf_v)
    if not cuda:
        return "pip install -U 'tensorflow[and-cuda]'  # TF >= 2.14 brings its own CUDA libraries"
    return (
        f"conda install -c conda-forge cudatoolkit={cuda} cudnn={cudnn} && export "
        f"LD_LIBRARY_PATH=$CONDA_PREFIX/lib:$LD_LIBRARY_PATH  # TF {fmt_mm(major_minor(tf_v))} "
        f"was built for CUDA {cuda} + cuDNN {cudnn} (the 'tensorflow[and-cuda]' extra exists "
        "only from TF 2.14)"
    )


def _tf_matching_system(kb: KB, system: dict[str, str]) -> str:
    """The newest TF (< 2.14) whose tested CUDA + cuDNN are both in the system's libraries."""
    for tf_mm, (cuda, cudnn) in kb["tensorflow"]["tested_builds"].items():
        if matches(tf_mm, kb["tensorflow"]["and_cuda"]):
            continue
        cudnn_so = f"libcudnn.so.{major_minor(cudnn)[0]}"
        if cudart_soname(cuda) in system and cudnn_so in system:
            return tf_mm
    return ""


def _unlogged_cudart(probe: FrameworkProbe, snap: EnvSnapshot) -> list[str]:
    """The CUDA runtime a TF build loads, when TF's log names no library and nothing has it.

    From TF 2.13 TensorFlow no longer logs which library failed ("Could not find cuda
    drivers on your machine" is all it says); the soname follows from the build's CUDA
    version (libcudart.so.11.0 for 11.x, .so.12 for 12.x), so doctor names it itself. Only
    on a machine whose nvidia-smi lists a GPU, and only if no copy is found anywhere it
    looks (the loader's path, this environment, the nvidia-* wheels).
    """
    cuda = str(probe.build.get("cuda_version") or "")
    smi = snap.nvidia_smi
    if not cuda or not probe.build.get("is_cuda_build") or smi is None or not smi.gpus:
        return []
    need = cudart_soname(cuda)
    if not need or snap.loader_finds(need) or need in snap.env_cuda_libs \
            or need in snap.wheel_cuda_libs:
        return []
    return [need]


def tf_library_causes(probe: FrameworkProbe, snap: EnvSnapshot, kb: KB) -> list[Cause]:
    """Causes read from the libraries TF logged it could not load, against what exists."""
    missing = []
    for line in probe.load_errors:
        m = _MISSING_LIB.search(line)
        if m and m.group(1) not in missing:
            missing.append(m.group(1))
    if not missing:
        missing = _unlogged_cudart(probe, snap)
    if not missing:
        return []
    tf_v = probe.version or tf_version(snap, kb)
    causes: list[Cause] = []
    prefix = snap.host.python_prefix
    ld = snap.env_vars.get("LD_LIBRARY_PATH", "")
    in_env = [m for m in missing if m in snap.env_cuda_libs]
    if in_env and f"{prefix}/lib" not in ld.split(":"):
        causes.append(
            (
                f"{', '.join(in_env)} is in this conda environment ({prefix}/lib) but not on "
                f"the loader's path (LD_LIBRARY_PATH={ld or 'unset'}): `conda activate` adds "
                "it, a Jupyter kernel or IDE started outside the activated environment does not",
                f"export LD_LIBRARY_PATH={prefix}/lib:$LD_LIBRARY_PATH  # before starting "
                "python or jupyter; for a Jupyter kernel add \"env\": {\"LD_LIBRARY_PATH\": "
                f"\"{prefix}/lib\"}} to its kernel.json (find it: jupyter kernelspec list)",
                (),
            )
        )
    in_wheels = [m for m in missing if m in snap.wheel_cuda_libs and m not in in_env]
    if in_wheels:
        dirs = sorted({snap.wheel_cuda_libs[m].rsplit("/", 1)[0] for m in in_wheels})
        causes.append(
            (
                f"{', '.join(in_wheels)} is installed by the nvidia-* wheels "
                f"({', '.join(dirs)}) but not on the loader's path "
                "(see cuda.wheel-libs-not-on-path)",
                f"export LD_LIBRARY_PATH={':'.join(dirs)}:$LD_LIBRARY_PATH",
                ("cuda.wheel-libs-not-on-path",),
            )
        )
        in_env = in_env + in_wheels
    cuda, cudnn = tf_tested_build(kb, tf_v)
    build_cuda = str(probe.build.get("cuda_version") or cuda)
    build_cudnn = str(probe.build.get("cudnn_version") or cudnn)
    system = snap.system_cuda_libs
    for soname in missing:
        if soname in in_env:
            continue
        base = soname.split(".so")[0]
        others = sorted(s for s in system if s.startswith(base + ".so.") and s != soname)
        if not others:
            continue
        fix = tf_cuda_fix(tf_v, kb)
        alt = _tf_matching_system(kb, system) if not matches(tf_v, kb["tensorflow"]["and_cuda"]) \
            else ""
        if alt:
            fix += (
                f"; or use the system's libraries with TF {alt}: "
                f"pip install 'tensorflow=={alt}.*'"
            )
        causes.append(
            (
                f"TensorFlow {tf_v} was built for CUDA {build_cuda} / cuDNN {build_cudnn} and "
                f"loads {soname}, but the system has {', '.join(others)} (another version, "
                "which it cannot use)",
                fix,
                (),
            )
        )
        break
    absent = [m for m in missing if m not in in_env and not any(
        s.startswith(m.split(".so")[0] + ".so.") for s in system)]
    if absent and not causes:
        causes.append(
            (
                f"{', '.join(absent)} (the CUDA {build_cuda} / cuDNN {build_cudnn} libraries "
                f"TensorFlow {tf_v} was built with) not found (not in ldconfig's cache, this "
                f"environment or LD_LIBRARY_PATH={ld or 'unset'})",
                tf_cuda_fix(tf_v, kb) + "  # or, if they are installed outside the loader's "
                "path (a CUDA/cuDNN under /usr/local/cuda): export LD_LIBRARY_PATH="
                "/usr/local/cuda/lib64:$LD_LIBRARY_PATH",
                (),
            )
        )
    return causes
