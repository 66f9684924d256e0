"""Accelerators other than NVIDIA CUDA read from what the probe has (issue 24, round 25).

The probe imports none of torch_npu, IPEX, torch-directml or MLX and does not query XPU
devices, so these rules read distributions, versions, paths and the framework's own words:

* An Intel GPU (XPU) stack in a conda environment that ships its own libstdc++: the system's
  Level Zero loader and Intel GPU runtime can fail against it (no XPU device enumerated).
* ``[[xpu_cpu_nightlies]]``: PyTorch ``+xpu`` nightlies published without XPU compiled in.
* TensorFlow for ROCm saying it ignores a GPU whose gfx target its build does not list.
* A PyTorch MPS nightly older than ``PYTORCH_ENABLE_MPS_FALLBACK``: an op without an MPS
  kernel fails instead of running on the CPU.
* ``[[cann_torch_npu]]``: a torch_npu build other than the one released for the CANN toolkit
  the environment's ASCEND_* variables point at.
* A sourced oneAPI environment beside a torch ``+xpu`` (2.6 on) that brings its own SYCL
  runtime as wheels (round 26's step 0, from round24_heldout's pytorch#143713).
"""

from __future__ import annotations

import re

from devicebench.env.checks._util import KB, matches
from devicebench.env.checks.runtime_libs import _os_row, env_glibcxx
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

_XPU_DISTS = ("intel-sycl-rt", "intel-extension-for-pytorch", "intel-cmplr-lib-ur")
_SOURCE_XPU_CXX = ("https://intel.github.io/intel-extension-for-pytorch/xpu/2.5.10+xpu/"
                   "tutorials/known_issues.html (a conda environment's libstdc++.so may "
                   "conflict with the OS's; no dpcpp/XPU device) ; https://github.com/pytorch/"
                   "pytorch/issues/144143 (GLIBCXX of a conda env against libze_loader)")
_DEV_DATE = re.compile(r"\.dev(\d{8})")
_CANN_IN_PATH = re.compile(r"/(\d+\.\d+\.(?:RC\d+|\d+)(?:\.alpha\d+)?)(?:/|$)", re.IGNORECASE)


def _xpu_stack(snap: EnvSnapshot) -> str:
    torch_v = snap.version_of("torch")
    if "+xpu" in torch_v:
        return f"torch {torch_v}"
    for dist in _XPU_DISTS:
        v = snap.version_of(dist)
        if v and (dist != "intel-extension-for-pytorch" or "+xpu" in v):
            return f"{dist} {v}"
    return ""


def check_xpu_conda_libstdcxx(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """An Intel GPU (XPU) stack in a conda environment whose lib/ ships its own libstdc++,
    not newer than the system's: the system's Level Zero loader may fail against it.

    Example:
        >>> from devicebench.env.snapshot import HostInfo
        >>> snap = EnvSnapshot(host=HostInfo(os="Linux", conda_env=True),
        ...                    distributions={"torch": "2.6.0+xpu"},
        ...                    env_cuda_libs={"libstdc++.so.6.0.29": "/e/lib/libstdc++.so.6.0.29"})
        >>> [f.id for f in check_xpu_conda_libstdcxx(snap, {})]
        ['xpu.conda-libstdcxx']
        >>> snap.distributions["torch"] = "2.6.0+cpu"
        >>> check_xpu_conda_libstdcxx(snap, {})
        []
    """
    stack, env_n = _xpu_stack(snap), env_glibcxx(snap)
    if not snap.host.conda_env or not stack or not env_n or snap.host.os != "Linux":
        return []
    rows = kb.get("cxx_runtime", {}).get("system_glibcxx", {})
    row = _os_row(snap, rows) if rows else ""
    if row and env_n > rows[row]:
        return []  # the environment's C++ runtime is the newer one: the loader gets what it needs
    system = f"{row}'s GLIBCXX_3.4.{rows[row]}" if row else "the system's"
    return [Finding(
        "xpu.conda-libstdcxx", "warning",
        f"{stack} in a conda environment whose own libstdc++ (GLIBCXX_3.4.{env_n}) is loaded "
        "before the system's: the Intel GPU runtime may find no XPU device",
        observed=f"{snap.host.python_prefix}/lib holds libstdc++.so.6.0.{env_n} ({system} on "
                 "the system); the probe does not query XPU devices",
        why="The Level Zero loader (libze_loader) and Intel's GPU compute runtime come from the "
            "system's packages and are built against the system's C++ runtime; Python in a "
            "conda environment loads the environment's older libstdc++.so.6 first, so the "
            "Level Zero adapter fails to load (GLIBCXX_3.4.N not found, shown with "
            "SYCL_UR_TRACE=1) and torch.xpu.is_available() is False ('Failed to initialize XPU "
            "devices', 'Device does not exist', 'Number of dpcpp devices should be greater "
            "than zero').",
        fix="update the environment's C++ runtime (conda install -c conda-forge libstdcxx-ng) "
            "or remove $CONDA_PREFIX/lib/libstdc++.so* so the system's libstdc++ is used; or "
            "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libstdc++.so.6 python ...",
        source=_SOURCE_XPU_CXX)]


def check_xpu_cpu_nightly(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A PyTorch ``+xpu`` nightly from a window when XPU nightlies were CPU builds."""
    torch_v = snap.version_of("torch")
    m = _DEV_DATE.search(torch_v)
    if "+xpu" not in torch_v or not m:
        return []
    for row in kb.get("xpu_cpu_nightlies", []):
        if row["first"] <= m[1] <= row["last"]:
            return [Finding(
                "xpu.cpu-nightly", "warning",
                f"PyTorch {torch_v}: the +xpu nightlies of {row['first']}-{row['last']} were "
                "published without XPU compiled in",
                observed=f"torch {torch_v}; the probe does not query XPU devices",
                why=row["why"] + "; torch.xpu.is_available() is False on a working Intel GPU.",
                fix=f"python -c 'import torch; print(torch.xpu._is_compiled())' shows it; "
                    f"pip install --pre 'torch=={row['good']}' --index-url https://download."
                    "pytorch.org/whl/nightly/xpu (the last good nightly), or the stable +xpu "
                    "release from https://download.pytorch.org/whl/xpu",
                source=row["source"])]
    return []


def check_tf_rocm_arch_ignored(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """TensorFlow for ROCm saying it ignores a GPU whose gfx target its build does not list
    (a target listed only glued to another is rocm.tf-supported-list-broken's).

    Example:
        >>> from devicebench.env.snapshot import FrameworkProbe
        >>> said = {"gpu": "Radeon RX 7900 XT", "gfx": "gfx1100", "supported": "gfx1030, gfx900"}
        >>> probe = FrameworkProbe(reported={"rocm_gpu_ignored": said})
        >>> snap = EnvSnapshot(frameworks={"tensorflow": probe})
        >>> [f.id for f in check_tf_rocm_arch_ignored(snap, {})]
        ['tensorflow.rocm-arch-not-built']
        >>> said["supported"] = "gfx1030gfx1100, gfx900"
        >>> check_tf_rocm_arch_ignored(snap, {})
        []
    """
    probe = snap.frameworks.get("tensorflow")
    said = probe.reported.get("rocm_gpu_ignored") if probe else None
    if not said or said["gfx"] in said["supported"]:
        return []
    m = ("", said["gpu"], said["gfx"], said["supported"])
    version = snap.version_of("tensorflow-rocm") or snap.version_of("tensorflow") or probe.version
    return [Finding(
        "tensorflow.rocm-arch-not-built", "error",
        f"TensorFlow {version} was not built for this AMD GPU's target {m[2]}: it runs on "
        "the CPU",
        observed=f"TensorFlow said it ignores {m[1].strip()} ({m[2]}); its build lists "
                 f"{m[3].strip().rstrip('.')}",
        why="A ROCm build of TensorFlow carries kernels for the gfx targets it was compiled "
            f"for only; a GPU outside that list ({m[2]}) is dropped at start-up, so every op "
            "runs on the CPU.",
        fix=f"install a tensorflow-rocm release (or ROCm's TensorFlow container image) whose "
            f"build lists {m[2]}, or build TensorFlow from source from ROCm's "
            "tensorflow-upstream repository with TF_ROCM_AMDGPU_TARGETS including "
            f"{m[2]}",
        source="https://github.com/evshiron/rocm_lab/pull/16 (the .570 wheels without gfx1100; "
               "built from ROCm/tensorflow-upstream with it) ; https://github.com/ROCm/"
               "tensorflow-upstream (TF_ROCM_AMDGPU_TARGETS, as remembered)")]


def check_mps_no_fallback(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A PyTorch MPS nightly older than its CPU fallback for ops without an MPS kernel."""
    entry = kb.get("mps_fallback", {})
    probe = snap.frameworks.get("torch")
    torch_v = snap.version_of("torch") or (probe.version if probe else "")
    m = _DEV_DATE.search(torch_v)
    if not entry or not probe or not probe.build.get("mps_built") or not m \
            or not matches(torch_v, entry["nightly_of"]) or m[1] >= entry["first_nightly"]:
        return []
    return [Finding(
        "mps.no-cpu-fallback", "warning",
        f"PyTorch {torch_v} predates the MPS CPU fallback: an op without an MPS kernel fails",
        observed=f"torch {torch_v}, a nightly from before {entry['first_nightly']}, with MPS "
                 "built",
        why="The first MPS builds have kernels for part of the operators only; before "
            "PYTORCH_ENABLE_MPS_FALLBACK existed, a model using any other op stops with "
            "\"... is only available for these backends\" instead of running that op on the "
            "CPU.",
        fix=f"install a nightly from {entry['first_nightly']} on or torch>={entry['release']} "
            "(pip install -U torch), then run with PYTORCH_ENABLE_MPS_FALLBACK=1",
        source=entry["source"])]


def _cann_release(snap: EnvSnapshot) -> str:
    for var in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH"):
        if m := _CANN_IN_PATH.search(snap.env_vars.get(var, "")):
            return m[1].upper()
    return ""


def check_cann_torch_npu(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A torch_npu build other than the one released for the CANN toolkit in use.

    Example:
        >>> kb = {"cann_torch_npu": [{"cann": "8.0.RC1", "torch": "==2.1.0",
        ...       "torch_npu": ["2.1.0.post5"], "release": "r", "source": "s"}]}
        >>> env = {"ASCEND_HOME_PATH": "/usr/local/Ascend/ascend-toolkit/8.0.RC1"}
        >>> snap = EnvSnapshot(env_vars=env, distributions={"torch": "2.1.0",
        ...                                                  "torch-npu": "2.1.0.post4"})
        >>> [f.id for f in check_cann_torch_npu(snap, kb)]
        ['ascend.torch-npu-not-for-cann']
        >>> snap.distributions["torch-npu"] = "2.1.0.post5"
        >>> check_cann_torch_npu(snap, kb)
        []
    """
    npu_v = snap.version_of("torch-npu") or snap.version_of("torch_npu")
    cann, torch_v = _cann_release(snap), snap.version_of("torch")
    if not npu_v or not cann or not torch_v:
        return []
    for row in kb.get("cann_torch_npu", []):
        if row["cann"].upper() != cann or not matches(torch_v, row["torch"]) \
                or npu_v.split("+")[0] in row["torch_npu"]:
            continue
        want = row["torch_npu"][-1]
        return [Finding(
            "ascend.torch-npu-not-for-cann", "warning",
            f"torch_npu {npu_v} is not the build released for CANN {cann} with torch {torch_v}",
            observed=f"CANN {cann} (from the ASCEND_* variables' path), torch {torch_v}, "
                     f"torch_npu {npu_v}",
            why="Each torch_npu build is released for one CANN toolkit (and one torch); "
                "another build can fail at import (AttributeError from its bundled torchair or "
                "a missing op) or at the first NPU op.",
            fix=f"pip install 'torch_npu=={want}'  # the build of release {row['release']} for "
                f"CANN {cann}, keeping torch {torch_v}",
            source=row["source"])]
    return []


def check_oneapi_sourced_beside_xpu_wheels(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A oneAPI environment sourced (setvars.sh / oneapi-vars.sh) beside a torch +xpu from 2.6
    on, which brings its own SYCL runtime (intel-sycl-rt) and needs no oneAPI install.

    Example:
        >>> env = {"ONEAPI_ROOT": "/opt/intel/oneapi",
        ...        "LD_LIBRARY_PATH": "/opt/intel/oneapi/compiler/2025.0/lib"}
        >>> snap = EnvSnapshot(env_vars=env, distributions={"torch": "2.6.0+xpu"})
        >>> [f.id for f in check_oneapi_sourced_beside_xpu_wheels(snap, {})]
        ['xpu.oneapi-sourced-beside-wheels']
        >>> snap.distributions["torch"] = "2.5.1+xpu"
        >>> check_oneapi_sourced_beside_xpu_wheels(snap, {})
        []
    """
    torch_v = snap.version_of("torch")
    env = snap.env_vars
    on_path = [d for d in env.get("LD_LIBRARY_PATH", "").split(":") if "/oneapi/" in d]
    if "+xpu" not in torch_v or not matches(torch_v.split("+")[0], ">=2.6.0.dev0") \
            or not on_path or not (env.get("ONEAPI_ROOT") or env.get("CMPLR_ROOT")
                                   or env.get("SETVARS_COMPLETED")):
        return []
    return [Finding(
        "xpu.oneapi-sourced-beside-wheels", "warning",
        f"A oneAPI environment is sourced beside torch {torch_v}, which brings its own SYCL "
        "runtime",
        observed=f"ONEAPI_ROOT={env.get('ONEAPI_ROOT') or '?'}; LD_LIBRARY_PATH starts oneAPI's "
                 f"{on_path[0]}; intel-sycl-rt {snap.version_of('intel-sycl-rt') or '?'}",
        why="From 2.6 PyTorch's XPU wheels carry the SYCL/oneAPI runtime as wheels "
            "(intel-sycl-rt, intel-cmplr-lib-ur) and need no oneAPI install; a sourced oneAPI "
            "(setvars.sh / oneapi-vars.sh, which 2.5 required) puts its own libsycl and "
            "compiler runtime first on LD_LIBRARY_PATH, another release than torch loads, so "
            "import torch fails (undefined symbol in libsycl.so.8).",
        fix="open a shell without sourcing setvars.sh / oneapi-vars.sh (remove it from "
            "~/.bashrc), or unset LD_LIBRARY_PATH's /opt/intel/oneapi entries before python",
        source="https://github.com/pytorch/pytorch/issues/143713 (the maintainers: a local "
               "compiler environment is incompatible with PT 2.6; try without activating it)")]
