"""What the frameworks said about their libraries, read against what the probe found on
disk: a cuDNN older than the one the framework was built with, CUDA libraries the pip
wheels carry but the loader does not see, a copy on LD_LIBRARY_PATH that shadows the
wheel's, XLA without libdevice."""

from __future__ import annotations

import os
import re

from devicebench.env.checks._util import DISPLAY, KB, as_version, build_cuda_version
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

_WHEEL_DIR = re.compile(r"/nvidia/(\w+)/lib$")


def _wheel_of(path: str, major: str = "12") -> str:
    """``.../nvidia/cudnn/lib/libcudnn.so.9`` -> ``nvidia-cudnn-cu12`` (the wheel that has it)."""
    m = _WHEEL_DIR.search(os.path.dirname(path))
    return f"nvidia-{m.group(1).replace('_', '-')}-cu{major}" if m else ""


def _cuda_major(probe, snap: EnvSnapshot) -> str:
    """The CUDA major a framework build targets ("11", "12"): its build info, a jaxlib's local
    label (``+cuda11.cudnn86``), or the installed jax-cuda plugin; "12" when unknown."""
    cuda = build_cuda_version(probe, snap)
    local = (as_version(snap.version_of("jaxlib")) or as_version("0")).local or ""
    m = re.match(r"cuda(\d+)", local) if probe.name == "jax" else None
    if m:
        return m[1]
    return cuda.split(".")[0] if cuda else "12"


def check_cudnn_loaded_older(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """The framework says the cuDNN it loaded is older than the one it was built with."""
    out = []
    for name, probe in snap.frameworks.items():
        loaded, built = probe.reported.get("cudnn_loaded"), probe.reported.get("cudnn_built")
        need = probe.reported.get("cudnn_min") or built
        lv, nv = as_version(loaded), as_version(need)
        if lv is None or nv is None or lv >= nv:
            continue
        major = str(nv.major)
        cuda = _cuda_major(probe, snap)
        found = [p for n, p in {**snap.wheel_cuda_libs, **snap.ld_path_cuda_libs,
                                **snap.env_cuda_libs, **snap.system_cuda_libs}.items()
                 if n.startswith("libcudnn.so")]
        if snap.host.conda_env and not snap.wheel_cuda_libs:
            fix = f"conda install -c conda-forge 'cudnn>={need}'"
        else:
            fix = f"pip install -U 'nvidia-cudnn-cu{cuda}>={need},<{int(major) + 1}'"
        fix += ("; then make sure no older libcudnn comes first on the loader's path "
                f"(found: {', '.join(found)})" if found else "")
        out.append(Finding(
            "cudnn.loaded-older-than-built", "error",
            f"{DISPLAY.get(name, name)} loaded cuDNN {loaded}, older than the {need} it needs",
            observed=f"{DISPLAY.get(name, name)} said: cuDNN loaded {loaded}, built with "
                     f"{built}" + (f", minimum {need}" if need != built else ""),
            why="cuDNN must have the build's major version and at least its minor version; "
                "older, convolution and RNN ops fail (DNN library initialization failed) or "
                "the GPU backend falls back to the CPU.",
            fix=fix, source="https://docs.nvidia.com/deeplearning/cudnn/backend/latest/"
                            "reference/support-matrix.html"))
    return out


def check_wheel_libs_not_on_path(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A library the framework could not load is in an nvidia-* wheel it did not look in."""
    from devicebench.env.checks.installs import wheel_libs_of_distributions

    out = []
    for name, probe in snap.frameworks.items():
        failed = probe.reported.get("dlopen_failed", [])
        wheel_libs = snap.wheel_cuda_libs
        present = {so: wheel_libs[so] for so in failed
                   if so in wheel_libs and not snap.loader_finds(so)}
        unnamed = ""
        if not present and probe.reported.get("dlopen_unnamed") and not probe.gpu_devices:
            # Round 14: "Cannot dlopen some GPU libraries" naming none (TensorFlow >= 2.16):
            # the candidates are the wheels' libraries the loader does not find by name.
            wheel_libs = wheel_libs or wheel_libs_of_distributions(snap, kb)
            present = {so: p for so, p in wheel_libs.items() if not snap.loader_finds(so)}
            unnamed = (f"{DISPLAY.get(name, name)} {probe.version or snap.version_of(name)} "
                       "said \"Cannot dlopen some GPU libraries\" without naming one and "
                       "registered no GPU; ")
        if not present:
            continue
        dirs = sorted({p for d in wheel_libs.values() if (p := os.path.dirname(d))})
        version = probe.version or snap.version_of(name)
        out.append(Finding(
            "cuda.wheel-libs-not-on-path", "error",
            f"{DISPLAY.get(name, name)} {version} cannot load CUDA libraries that the "
            "nvidia-* wheels installed: they are not on the loader's path",
            observed=unnamed + ("the wheels' libraries, which the loader does not find by "
                                "name: " if unnamed else "could not load ") + ", ".join(
                f"{so} (installed at {p})" for so, p in sorted(present.items())),
            why="The libraries are there, but the loader does not look where they are: this "
                "framework build does not search the wheels' directories (TensorFlow 2.16.1 is "
                "known for it), or it looks for them relative to its own directory, which "
                "misses when pip put the framework and the nvidia-* wheels in different "
                "site-packages (lib64 and lib, a --target or --user install); the import "
                "fails or the framework runs on the CPU.",
            fix="export LD_LIBRARY_PATH=" + ":".join(dirs) + "${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
                + ("  # or: pip install -U 'tensorflow[and-cuda]' (>= 2.16.2 finds them)"
                   if name == "tensorflow" else ""),
            source="https://github.com/tensorflow/tensorflow/issues/63362 ; "
                   "https://github.com/pytorch/pytorch/issues/165812"
                   + (" ; https://github.com/tensorflow/tensorflow/issues/66987 (2024: the "
                      "message names no library)" if unnamed else "")))
    return out


def check_shadowed_wheel_libs(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """An undefined symbol in a CUDA library: an older copy of the library that provides it
    won (on LD_LIBRARY_PATH, or an older nvidia-* wheel)."""
    out = []
    ld_dirs = [d for d in snap.env_vars.get("LD_LIBRARY_PATH", "").split(":") if d]
    for name, probe in snap.frameworks.items():
        sym = probe.reported.get("undefined_symbol")
        if not sym:
            continue
        provider = sym.get("version") or ""
        m = re.search(r"_(\d+)_(\d+)$", sym["symbol"])
        needs = f"{m.group(1)}.{m.group(2)}" if m else ""
        shadow = snap.ld_path_cuda_libs.get(provider)
        wheel = snap.wheel_cuda_libs.get(provider, "")
        display = DISPLAY.get(name, name)
        if shadow and shadow != wheel:
            bad_dir = os.path.dirname(shadow)
            keep = ":".join(d for d in ld_dirs if d.rstrip("/") != bad_dir.rstrip("/"))
            out.append(Finding(
                "cuda.lib-shadowed-by-ld-library-path", "error",
                f"LD_LIBRARY_PATH puts an older {provider} ahead of the one {display} needs",
                observed=f"{display} failed: {os.path.basename(sym['library'])} needs "
                         f"{sym['symbol']} from {provider}; LD_LIBRARY_PATH finds {shadow}"
                         + (f" before the wheel's {wheel}" if wheel else ""),
                why="The loader searches LD_LIBRARY_PATH before a library's own RUNPATH, so the "
                    "system CUDA's copy replaces the one the nvidia-* wheels bring; it lacks the "
                    "symbol.",
                fix=f"export LD_LIBRARY_PATH={keep}  # drop {bad_dir}" if keep
                else f"unset LD_LIBRARY_PATH  # it only held {bad_dir}",
                source="https://github.com/pytorch/pytorch/issues/111469"))
            continue
        dist = _wheel_of(wheel) if wheel else ""
        have = snap.version_of(dist) if dist else ""
        if needs and have and as_version(have) is not None and \
                as_version(have) < as_version(needs):  # type: ignore[operator]
            out.append(Finding(
                "cuda.wheel-skew", "error",
                f"{dist} {have} is older than the CUDA {needs} the other nvidia wheels need",
                observed=f"{display} failed: {sym['symbol']} (CUDA {needs}) missing from "
                         f"{provider} {have} ({dist})",
                why="The nvidia-* wheels of one CUDA stack must be of one CUDA release; an "
                    "older one lacks the newer ones' symbols.",
                fix=f"pip install -U '{dist}>={needs}'",
                source="https://github.com/pytorch/pytorch/issues/131312"))
    return out


def check_nccl_older_than_torch(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """torch failed with an undefined ``nccl*`` symbol: the libnccl.so.2 the loader took is
    older than the NCCL that torch release's wheels pin (``[torch_nccl]``). Left to the
    mixed-major rule where a cu11 NCCL wheel sits beside the cu12 one.

    Example:
        >>> from devicebench.env.interpret import snapshot_from_raw
        >>> s = snapshot_from_raw({"distributions": {"torch": "2.2.0"}, "frameworks": {
        ...     "torch": {"status": "error", "stderr": "", "result": {"name": "torch",
        ...     "status": "error", "error": "ImportError: /x/libtorch_cuda.so: "
        ...     "undefined symbol: ncclCommRegister"}}}})
        >>> kb = {"torch_nccl": {"releases": {"2.2": "2.19.3"}, "source": "https://x"}}
        >>> check_nccl_older_than_torch(s, kb)[0].title
        'torch 2.2.0 needs NCCL 2.19.3 or newer; an older libnccl.so.2 was loaded'
    """
    probe = snap.frameworks.get("torch")
    sym = probe.reported.get("undefined_symbol") if probe else None
    if not sym or not sym["symbol"].startswith("nccl") or snap.has("nvidia-nccl-cu11"):
        return []
    entry = kb["torch_nccl"]
    have = snap.version_of("torch")
    v = as_version(have)
    pin = entry["releases"].get(f"{v.major}.{v.minor}", "") if v else ""
    wheel = snap.version_of("nvidia-nccl-cu12")
    old_wheel = bool(pin and wheel and as_version(wheel) is not None
                     and as_version(wheel) < as_version(pin))  # type: ignore[operator]
    need = f"NCCL {pin} or newer" if pin else "the NCCL its wheels were built with"
    if old_wheel:
        fix = f"pip install 'nvidia-nccl-cu12=={pin}'  # the NCCL torch {have} pins"
    else:
        fix = ("find the other libnccl.so.2 (a package's own NCCL, or one on LD_LIBRARY_PATH) "
               "and remove it or take it off the path; then pip install --force-reinstall "
               + (f"'nvidia-nccl-cu12=={pin}'" if pin else "nvidia-nccl-cu12")
               + ("  # or a torch release built for the older NCCL (torch 2.1.2 for NCCL "
                  "2.18)" if pin == "2.19.3" else ""))
    back = entry.get("for_nccl", {}).get(wheel, "")
    back_v = as_version(back)
    source = entry["source"]
    if back_v is not None and not old_wheel and v is not None and v.release > back_v.release:
        source += " ; " + entry["for_nccl_source"]
        fix += (f"; or keep this environment's NCCL (nvidia-nccl-cu12 {wheel}, the CUDA 12 "
                f"stack's) and install the torch release that pins it: pip install "
                f"'torch=={back}'")
    return [Finding(
        "torch.nccl-older-than-build", "error",
        f"torch {have} needs {need}; an older libnccl.so.2 was loaded",
        observed=f"torch failed: {os.path.basename(sym['library'])} needs {sym['symbol']}, "
                 "which the loaded NCCL lacks"
                 + (f"; nvidia-nccl-cu12 {wheel} installed" if wheel else ""),
        why="Each torch release's CUDA wheels are linked against one NCCL release (its "
            "nvidia-nccl-cu12 pin) and call functions added in it; an older NCCL found first "
            "(another package's copy, an older wheel, a system NCCL) lacks them, so torch "
            "cannot load.",
        fix=fix, source=source)]


def check_libdevice_missing(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """XLA (TensorFlow's jit, JAX) said it cannot find CUDA's libdevice."""
    out = []
    for name, probe in snap.frameworks.items():
        if not probe.reported.get("libdevice_missing"):
            continue
        where = "$CONDA_PREFIX" if snap.host.conda_env else "/usr/local/cuda"
        install = ("conda install -c conda-forge cuda-nvcc" if snap.host.conda_env
                   else "pip install nvidia-cuda-nvcc-cu12")
        out.append(Finding(
            "xla.libdevice-missing", "error",
            f"{DISPLAY.get(name, name)}'s XLA cannot find CUDA's libdevice",
            observed=f"{DISPLAY.get(name, name)} said: libdevice not found "
                     "(nvvm/libdevice/libdevice.10.bc)",
            why="XLA compiles GPU kernels with libdevice (part of CUDA's nvcc); without it "
                "jit-compiled steps (Keras jit_compile, JAX) fail on the GPU.",
            fix=f"{install}; export XLA_FLAGS=--xla_gpu_cuda_data_dir={where}  "
                "# the directory holding nvvm/libdevice",
            source="https://www.tensorflow.org/install/pip#linux"))
    return out


# XLA's wording: "... older than the PTX compiler version (12.6.85)" in later releases,
# "... older than the ptxas CUDA version (12.3.107)" before (jax-ml/jax#19821).
_PTX_NEWER = re.compile(r"driver's CUDA version is (\d+\.\d+) which is older than the "
                        r"(?:PTX compiler|ptxas CUDA) version \(?(\d+)\.(\d+)")


def _driver_for(kb: KB, cuda: str) -> str:
    """The Linux driver the CUDA toolkit release ships with, as ' (the 560 series: 560.28.03+)'."""
    row = kb["cuda"]["toolkit_drivers"].get(cuda)
    if not isinstance(row, list):
        return ""
    return f" (the {row[0].split('.')[0]} series: {row[0]} or newer)"


def check_driver_older_than_ptxas(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """XLA's own warning that the driver is older than the PTX compiler (ptxas) it runs ->
    warning: update the driver; a system CUDA's ptxas first on PATH is the other culprit."""
    out: list[Finding] = []
    for name, probe in sorted(snap.frameworks.items()):
        first_use = str(probe.extra.get("first_use_error", ""))
        text = "\n".join([*probe.messages, probe.error, first_use])
        m = _PTX_NEWER.search(text)
        if not m:
            continue
        driver_cuda, ptx = m.group(1), f"{m.group(2)}.{m.group(3)}"
        nvcc = snap.version_of("nvidia-cuda-nvcc-cu12")
        failed = "ptxas" in first_use.lower()
        out.append(Finding(
            "cuda.driver-older-than-ptxas",
            "error" if failed else "warning",
            f"The NVIDIA driver (CUDA {driver_cuda}) is older than the PTX compiler (ptxas "
            f"{ptx}) {DISPLAY.get(name, name)} compiles with",
            observed=(f"{DISPLAY.get(name, name)} says: driver CUDA {driver_cuda} < PTX compiler "
                      f"{ptx}" + (f"; nvidia-cuda-nvcc-cu12 {nvcc}" if nvcc else "")
                      + ("; its first compilation failed in ptxas" if failed else "")),
            why=("XLA turns kernels into GPU code with ptxas: the nvidia-cuda-nvcc-cu12 wheel's, "
                 "or the first ptxas on PATH (a system CUDA's bin/). The driver must load what "
                 "it emits: with an older driver XLA compiles serially (slow first steps), and a "
                 "ptxas that does not match this jaxlib fails the compilation."),
            fix=(f"update the NVIDIA driver to one for CUDA >= {ptx}{_driver_for(kb, ptx)} (the "
                 "message's advice); if "
                 "`which ptxas` is a system CUDA's (e.g. /usr/local/cuda-*/bin), take that bin off "
                 "PATH so the wheel's ptxas runs"),
            source=kb["ptxas"]["source"],
        ))
    return out
