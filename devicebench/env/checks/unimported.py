"""Packages the probe does not import, read from what it has (issue 24, round 20b).

CuPy and CTranslate2 builds for one CUDA major against the CUDA the environment holds,
Paddle and ONNX Runtime (which load CUDA through the system loader only) beside CUDA
libraries that only pip wheels carry, mmcv releases whose prebuilt ops stop at an older
torch, TensorRT releases that ask for an executable stack on a glibc that refuses it, and
JAX's PyPI CUDA plugins on a Jetson's integrated GPU: each from the distributions and their
versions, the loader's and the wheels' CUDA libraries, environment variables and host facts.
"""

from __future__ import annotations

import os
import re

from devicebench.env.checks._util import KB, as_version, major_minor, matches
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

# A toolkit's release in a path: /usr/local/cuda-12.3, .../hpc_sdk/.../cuda/12.2, CUDA\v11.4
TOOLKIT_IN_PATH = re.compile(r"(?:cuda-|cuda[/\\]|[/\\]v)(\d+)\.(\d+)", re.IGNORECASE)
_CUDART = re.compile(r"libcudart\.so\.(\d+)")
_NV_RUNTIME = re.compile(r"nvidia-(?:cuda-runtime|cublas|cuda-nvrtc)-cu(\d+)$")


def environment_cuda_majors(snap: EnvSnapshot) -> set[str]:
    """The CUDA majors the environment provides to a package that loads CUDA itself: the
    runtime libraries the loader finds, CUDA_HOME/CUDA_PATH and PATH's toolkit directories,
    and the nvidia-*-cuNN runtime wheels.

    Example:
        >>> sorted(environment_cuda_majors(EnvSnapshot(env_vars={"CUDA_PATH": r"C:\\CUDA\\v11.4"},
        ...     system_cuda_libs={"libcudart.so.12": "/usr/lib/libcudart.so.12"})))
        ['11', '12']
    """
    majors = set()
    for libs in (snap.system_cuda_libs, snap.ld_path_cuda_libs, snap.env_cuda_libs):
        majors |= {m[1] for so in libs if (m := _CUDART.match(so))}
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if m := TOOLKIT_IN_PATH.search(snap.env_vars.get(var, "")):
            majors.add(m[1])
    for entry in re.split(r"[;:](?![\\/])", snap.env_vars.get("PATH", "")):
        if "cuda" in entry.lower() and (m := TOOLKIT_IN_PATH.search(entry)):
            majors.add(m[1])
    majors |= {m[1] for d in snap.distributions if (m := _NV_RUNTIME.match(d.lower()))}
    return majors


def _package_major(row: dict, dist: str, version: str) -> str:
    if "pattern" in row:
        m = re.match(row["pattern"], dist.lower())
        return m[1] if m else ""
    return next((major for spec, major in row["versions"] if matches(version, spec)), "")


def check_cuda_major_package(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A package built for one CUDA major where the environment has only another."""
    env = environment_cuda_majors(snap)
    out = []
    for row in kb.get("cuda_major_packages", []):
        dists = ([d for d in snap.distributions if re.match(row["pattern"], d.lower())]
                 if "pattern" in row else [row["dist"]] * snap.has(row["dist"]))
        for dist in dists:
            version = snap.version_of(dist)
            major = _package_major(row, dist, version)
            if not major or not env or major in env:
                continue
            other = max(env, key=int)
            out.append(Finding(
                "cuda.package-for-another-major", "warning",
                f"{dist} {version} is built for CUDA {major}; this environment has CUDA "
                f"{' and '.join(sorted(env, key=int))} only",
                observed=f"{dist} {version} (CUDA {major} libraries); the CUDA the "
                         f"environment provides: {', '.join(sorted(env, key=int))} (the "
                         "loader's runtime libraries, CUDA_HOME/CUDA_PATH, PATH, nvidia-* "
                         "wheels)",
                why=f"{dist} loads CUDA {major}'s libraries (libnvrtc/libcublas/cuDNN of that "
                    "major) by name; no copy of them is here, so it fails to load them (or "
                    "runs on the CPU) while frameworks that bring their own CUDA work.",
                fix=row["fix"].format(dist=dist, env=other),
                source=row["source"]))
    return out


def check_loader_path_package(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A package that loads CUDA through the system loader only, beside CUDA libraries that
    only pip wheels' directories hold."""
    if snap.host.os != "Linux":
        return []
    out = []
    for row in kb.get("loader_path_packages", []):
        if not snap.has(row["dist"]):
            continue
        system = set(snap.system_cuda_libs) | set(snap.ld_path_cuda_libs)
        missing = {}
        for fam in row["libs"]:
            pat = re.compile(rf"lib{fam}\.so\.\d+(\.\d+)?$")
            if any(pat.match(so) for so in system):
                continue
            missing.update({so: p for so, p in snap.wheel_cuda_libs.items()
                            if pat.match(so) and not snap.loader_finds(so)})
        if not missing:
            continue
        dirs = sorted({os.path.dirname(p) for p in missing.values()})
        links = "; ".join(f"ln -s {p} {os.path.dirname(p)}/{so.split('.so')[0]}.so"
                          for so, p in sorted(missing.items()))
        dist = row["dist"]
        out.append(Finding(
            "cuda.wheel-libs-invisible-to-package", "warning",
            f"{dist} {snap.version_of(dist)} cannot find {', '.join(sorted(missing))}: only "
            "pip wheels' directories hold them, and it does not search those",
            observed=f"{dist} {snap.version_of(dist)}; " + ", ".join(
                f"{so} at {p}" for so, p in sorted(missing.items()))
                + "; neither LD_LIBRARY_PATH nor ldconfig's cache holds them",
            why=f"{dist} opens its CUDA libraries through the system loader only (no RUNPATH "
                "into site-packages/nvidia/*/lib, unlike torch, which loads them itself when "
                "imported); so it fails to load cuDNN/cuBLAS or falls back to the CPU although "
                "the libraries are installed.",
            fix=row["fix"].format(dirs=":".join(dirs), links=links),
            source=row["source"]))
    return out


def check_prebuilt_torch_max(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A compiled-op package release whose prebuilt wheels stop before the installed torch."""
    torch = snap.version_of("torch")
    if not major_minor(torch):
        return []
    out = []
    for row in kb.get("prebuilt_torch_max", []):
        have = snap.version_of(row["dist"])
        if not matches(have, row["version"]) or major_minor(torch) <= major_minor(row["torch"]):
            continue
        probe = snap.frameworks.get("torch")
        cuda = str(probe.build.get("cuda_version") or "") if probe is not None else ""
        cu = "cu" + cuda.replace(".", "") if cuda else "cpu"
        mm = ".".join(map(str, major_minor(torch)))
        out.append(Finding(
            "extension.prebuilt-for-older-torch", "warning",
            f"{row['dist']} {have}'s compiled ops were not built for torch {torch}",
            observed=f"{row['dist']} {have} (prebuilt wheels up to torch {row['torch']}) "
                     f"beside torch {torch}" + (f" (CUDA {cuda})" if cuda else ""),
            why=f"{row['dist']}'s C++/CUDA ops are compiled against one torch and CUDA; this "
                f"release has no build for torch {mm}, so the installed ops come from another "
                "torch/CUDA (they fail to import: undefined symbols, or a libcudart of another "
                "CUDA) or were never built.",
            fix=f"pip install '{row['dist']}>={row['good']}' -f https://download.openmmlab.com/"
                f"mmcv/dist/{cu}/torch{mm}/index.html  # the build for this torch and CUDA; "
                f"or: mim install '{row['dist']}>={row['good']}'",
            source=row["source"]))
    return out


def check_tensorrt_execstack(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A TensorRT release that asks for an executable stack, on an OS whose glibc refuses it."""
    entry = kb.get("tensorrt_execstack", {})
    name = snap.host.os_version
    if snap.host.os != "Linux" or not any(name.startswith(n) for n in entry.get("os_names", [])):
        return []
    old = [d for d in entry["dists"] if (v := as_version(snap.version_of(d))) is not None
           and v < as_version(entry["fixed"])]
    if not old:
        return []
    have = ", ".join(f"{d} {snap.version_of(d)}" for d in old)
    return [Finding(
        "tensorrt.executable-stack-refused", "warning",
        f"TensorRT {snap.version_of(old[0])}'s libraries cannot load on this glibc "
        "(cannot enable executable stack)",
        observed=f"{have} on {name.split(' (')[0]} (a release read to ship glibc 2.41 or "
                 "newer; the probe does not read the glibc version)",
        why="TensorRT releases before 10.8 mark libnvinfer_builder_resource.so as needing an "
            "executable stack; glibc 2.41's dlopen refuses to make the stack executable, so "
            "TensorRT's builder fails to load while torch's CUDA still works.",
        fix=f"pip install -U 'tensorrt>={entry['fixed']}'  # or the application's build that "
            f"ships TensorRT {entry['fixed']}; a stopgap: patchelf --clear-execstack on the "
            "library",
        source=entry["source"])]


def check_jetson_pypi_wheels(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """PyPI's aarch64 CUDA wheels of JAX on a Jetson's integrated GPU."""
    entry = kb.get("jetson_pypi", {})
    smi = snap.nvidia_smi
    if snap.host.machine != "aarch64" or smi is None or "tegra" not in snap.host.os_version:
        return []
    caps = [g.compute_capability for g in smi.gpus if g.compute_capability in entry["caps"]]
    dists = [d for d in entry["dists"] if snap.has(d)]
    if not caps or not dists:
        return []
    sm = "sm_" + caps[0].replace(".", "")
    return [Finding(
        "jetson.pypi-cuda-wheel", "warning",
        f"{dists[0]} from PyPI has no kernels for this Jetson's integrated GPU ({sm})",
        observed=f"{', '.join(f'{d} {snap.version_of(d)}' for d in dists)}; a Tegra kernel "
                 f"({snap.host.os_version}); GPU compute capability {caps[0]} ({sm})",
        why="PyPI's aarch64 CUDA wheels are built for server Arm (SBSA) GPUs; a Jetson's "
            f"integrated GPU ({sm}) is not among their targets, so kernel launches fail "
            "(cudaErrorNoKernelImageForDevice) and JAX falls back to the CPU.",
        fix=f"build jaxlib and the CUDA plugin from source for {sm}: python build/build.py "
            f"build --wheels=jaxlib,jax-cuda-plugin,jax-cuda-pjrt --cuda_compute_capabilities="
            f"{sm} (JAX's build docs), or use wheels/containers built for Jetson (JetPack)",
        source=entry["source"])]
