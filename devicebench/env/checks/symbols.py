"""Undefined symbols and driver-version lines read as which loaded copy is too old (round 20).

* A versioned CUDA symbol (``__nvJitLinkComplete_12_4, version libnvJitLink.so.12``): the
  library that needs it was built with CUDA 12.4, and the ``libnvJitLink.so.12`` the loader
  found first is older; the copy that shadows the wheel's is named (a conda ``lib/`` record,
  an ``LD_LIBRARY_PATH`` directory).
* A symbol one CUDA library needs from its sibling (``libcublas.so.11`` wanting
  ``cublasLt_for_cublas_HSS`` from ``libcublasLt.so.11``): the pair comes from two releases.
* XLA's "kernel version A does not match DSO version B": the user-space libcuda (a container's
  or a compat package's) belongs to a newer driver than the kernel module the host runs.
"""

from __future__ import annotations

import re

from devicebench.env.checks._util import KB
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

_VERSIONED = re.compile(r"(\S*?/)?(lib[\w+]+\.so[.\d]*): undefined symbol: (_*\w+?)_(\d+)_(\d+), "
                        r"version (lib[\w]+)\.so\.(\d+)")
_SIBLING = re.compile(r"(\S*?/)?(lib[\w+]+\.so[.\d]*): undefined symbol: (\w+), "
                      r"version (lib[\w]+\.so\.\d+)")
_KERNEL_DSO = re.compile(r"kernel version (\d+)\.(\d+)\.(\d+) does not match DSO version "
                         r"(\d+)\.(\d+)\.(\d+)")
# The library a versioned symbol names -> its NVIDIA wheel (CUDA 12) and conda package.
_WHEELS = {"libnvJitLink": ("nvidia-nvjitlink-cu{major}", "nvjitlink", "libnvjitlink"),
           "libcusparse": ("nvidia-cusparse-cu{major}", "cusparse", "libcusparse"),
           "libcublasLt": ("nvidia-cublas-cu{major}", "cublas", "libcublas"),
           "libcublas": ("nvidia-cublas-cu{major}", "cublas", "libcublas")}


def _texts(snap: EnvSnapshot) -> list[tuple[str, str]]:
    return [(name, "\n".join([p.error, *p.messages, *p.load_errors]))
            for name, p in sorted(snap.frameworks.items())]


def _site_packages(snap: EnvSnapshot) -> str:
    prefix = snap.host.python_prefix.rstrip("/")
    py = ".".join(snap.host.python_version.split(".")[:2])
    return f"{prefix}/lib/python{py}/site-packages" if prefix and py else "<site-packages>"


def _shadowing_copy(snap: EnvSnapshot, lib: str, where: str) -> str:
    """Which copy of ``lib`` the loader took: the conda env's lib/ (with its record), or an
    LD_LIBRARY_PATH directory."""
    conda = _WHEELS.get(lib, ("", "", ""))[2]
    record = snap.conda_builds.get(conda, {}) if conda else {}
    ld = next((p for n, p in snap.ld_path_cuda_libs.items() if n.startswith(lib + ".so")), "")
    prefix = snap.host.python_prefix.rstrip("/")
    if ld:
        return f"{ld} (an LD_LIBRARY_PATH directory)"
    if record:
        return f"the conda environment's {lib}.so ({conda} {record.get('version', '?')})"
    if prefix and where.startswith(prefix + "/lib/") and "site-packages" not in where:
        return f"the copy in the environment's {prefix}/lib"
    return f"the first {lib}.so the loader finds"


def check_versioned_symbol(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """``undefined symbol: <name>_12_4, version libnvJitLink.so.12`` -> error: the loaded
    libnvJitLink is older than CUDA 12.4, which the library naming it was built with."""
    out: list[Finding] = []
    for name, text in _texts(snap):
        m = _VERSIONED.search(text)
        if not m:
            continue
        where, needer, sym = (m.group(1) or ""), m.group(2), m.group(3)
        cuda, lib, major = f"{m.group(4)}.{m.group(5)}", m.group(6), m.group(7)
        wheel, wdir, conda = _WHEELS.get(lib, ("", "", ""))
        copy = _shadowing_copy(snap, lib, where)
        wheel = wheel.format(major=major)
        fix = (f"pip install -U '{wheel}>={cuda}' && export LD_LIBRARY_PATH="
               f"{_site_packages(snap)}/nvidia/{wdir}/lib:$LD_LIBRARY_PATH  # the wheel's "
               f"{lib} first" if wheel else f"put a {lib}.so.{major} of CUDA >= {cuda} first on "
               "LD_LIBRARY_PATH")
        if conda and snap.conda_builds.get(conda):
            fix += f"; or in conda: conda install -c nvidia '{conda}>={cuda}'"
        out.append(Finding(
            "cuda.loaded-library-older-than-build", "error",
            f"{needer} needs {lib}.so.{major} of CUDA {cuda}, and an older one is loaded",
            observed=f"{name}: undefined symbol {sym}_{m.group(4)}_{m.group(5)} (version "
                     f"{lib}.so.{major}) in {where}{needer}; loaded: {copy}",
            why=(f"NVIDIA versions its library symbols by the CUDA release that added them: "
                 f"{needer} was built with CUDA {cuda} and asks for {sym}_{m.group(4)}_"
                 f"{m.group(5)}, which only a {lib} of {cuda} or newer defines. The loader found "
                 f"{copy} first (it shadows the one the framework's wheels bring), so the import "
                 "fails."),
            fix=fix, source=kb["loaded_symbols"]["source"]))
    return out


def check_sibling_symbol(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """``libcublas.so.11: undefined symbol: X, version libcublasLt.so.11`` -> error: the two
    libraries of one CUDA component come from different releases (a conda cudatoolkit beside
    another copy)."""
    out: list[Finding] = []
    for name, text in _texts(snap):
        if _VERSIONED.search(text):
            continue
        m = _SIBLING.search(text)
        if not m or m.group(4).split(".so")[0] == m.group(2).split(".so")[0]:
            continue
        where, needer, sym, sibling = (m.group(1) or ""), m.group(2), m.group(3), m.group(4)
        toolkit = snap.conda_builds.get("cudatoolkit", {})
        if toolkit:
            copy = f"the conda cudatoolkit {toolkit.get('version', '?')}'s"
            fix = ("conda install cudatoolkit=<X.Y>  # one cudatoolkit release for both "
                   f"{needer} and {sibling} (the release the project's environment file was made "
                   "with; pin it there); and no other CUDA lib directory on LD_LIBRARY_PATH")
        else:
            copy = "the loaded"
            fix = (f"make {needer} and {sibling} come from one CUDA release: reinstall the "
                   "framework's CUDA wheels (pip install --force-reinstall <framework>) and take "
                   "other CUDA lib directories off LD_LIBRARY_PATH")
        out.append(Finding(
            "cuda.sibling-library-mismatch", "error",
            f"{needer} and {sibling} come from different CUDA releases",
            observed=f"{name}: {where}{needer}: undefined symbol {sym} (version {sibling})",
            why=(f"{needer} calls into {sibling}, which must be the same release; {copy} pair "
                 f"does not match (one of them comes from another copy or release), so {sym} is "
                 "missing and the framework does not import."),
            fix=fix, source=kb["loaded_symbols"]["source"]))
    return out


def check_kernel_dso_mismatch(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """XLA's "kernel version 535.183.6 does not match DSO version 560.28.3" -> error: the host's
    kernel driver is older than the libcuda (and CUDA) the environment loads."""
    rows = kb["cuda"]["toolkit_drivers"]
    out: list[Finding] = []
    for name, text in _texts(snap):
        m = _KERNEL_DSO.search(text)
        if not m or int(m.group(1)) >= int(m.group(4)):
            continue
        kernel, dso = ".".join(m.group(1, 2, 3)), ".".join(m.group(4, 5, 6))
        cuda = next((c for c, v in rows.items() if isinstance(v, list)
                     and v[0].split(".")[0] == m.group(4)), "")
        for_cuda = f" (CUDA {cuda})" if cuda else ""
        out.append(Finding(
            "cuda.kernel-driver-older-than-libcuda", "error",
            f"The host's NVIDIA kernel driver ({kernel}) is older than the libcuda loaded "
            f"({dso}" + (f", CUDA {cuda})" if cuda else ")"),
            observed=f"{name} says: kernel version {kernel} does not match DSO version {dso}",
            why=("libcuda.so (the driver's user-space half) must match the kernel module. A "
                 "container built for a newer CUDA (or a cuda-compat package) brought a libcuda of "
                 f"the {m.group(4)} series{for_cuda}, while the host runs the {m.group(1)} driver: "
                 "cuInit fails and the framework sees no GPU."),
            fix=(f"update the host's NVIDIA driver to the {m.group(4)} series or newer"
                 f"{for_cuda}; or use an image built for CUDA {_cuda_of(rows, m.group(1))} or older"
                 " (forward compatibility packages work only on data-center GPUs)"),
            source=kb["loaded_symbols"]["kernel_dso_source"]))
    return out


def _cuda_of(rows: dict, driver_major: str) -> str:
    """The newest CUDA whose toolkit driver is not newer than ``driver_major``'s series."""
    fits = [c for c, v in rows.items() if isinstance(v, list) and v[0].split(".")[0].isdigit()
            and int(v[0].split(".")[0]) <= int(driver_major)]
    return max(fits, key=lambda c: tuple(int(x) for x in c.split(".")), default="its CUDA")
