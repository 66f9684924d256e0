"""Round 21 step 0 (issue 24): ptxas's own words that it does not know the GPU, and a Linux
driver's libcuda inside WSL2 beside a package that opens libcuda by its own name.

ptxas's "does not support CC 12.0" / "Value 'sm_120' is not defined for option 'gpu-name'"
in any framework's recorded output is read as the ptxas that framework compiles with (JAX:
the nvidia-cuda-nvcc-cu12 wheel's; Triton: its wheel's; TensorFlow: the toolkit's on PATH)
being older than the GPU. Inside WSL2, ldconfig's cache listing a libcuda outside
/usr/lib/wsl/lib beside Numba (which dlopens ``libcuda.so`` itself) is read as the Linux
driver's copy Numba may load, even when torch reaches the GPU through libcuda.so.1.
"""

from __future__ import annotations

import os
import re

from devicebench.env.checks._util import DISPLAY, KB
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

_PTXAS_CC = re.compile(r"ptxas does not support CC (\d+)\.(\d+)|ptxas too old|"
                       r"Value '(sm_(\d+?)(\d)a?)' is not defined for option 'gpu-name'")


def _cc(m: re.Match[str], snap: EnvSnapshot) -> str:
    """The compute capability the line names, else the GPU's (nvidia-smi)."""
    if m.group(1):
        return f"{m.group(1)}.{m.group(2)}"
    if m.group(4):
        return f"{m.group(4)}.{m.group(5)}"
    gpus = snap.nvidia_smi.gpus if snap.nvidia_smi else []
    return next((g.compute_capability for g in gpus if g.compute_capability), "")


def _fix(name: str, cc: str, need: str, snap: EnvSnapshot) -> str:
    sm = "sm_" + cc.replace(".", "") if cc else "this GPU's target"
    at_least = f">={need}" if need else ""
    if name == "jax":
        return (f"pip install -U 'nvidia-cuda-nvcc-cu12{at_least}' 'jax[cuda12]'  # jaxlib "
                f"uses the nvcc wheel's ptxas (PATH cannot replace it); a ptxas that knows "
                f"{sm}" + (f" (CUDA {need} or newer)" if need else ""))
    if name == "torch":
        return ("install a torch whose bundled Triton knows " + sm + " (a newer release or "
                "nightly for a newer CUDA), or point Triton at a CUDA toolkit's ptxas that "
                "does: export TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas"
                + (f"  # CUDA {need} or newer" if need else ""))
    return (f"put a CUDA toolkit's bin{f' (CUDA {need} or newer)' if need else ''} whose ptxas "
            f"knows {sm} first on PATH, or pip install -U 'tensorflow[and-cuda]'")


def check_ptxas_older_than_gpu(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """ptxas's own line that it does not know the GPU's compute capability."""
    out = []
    for name, probe in sorted(snap.frameworks.items()):
        first_use = str(probe.extra.get("first_use_error", ""))
        text = "\n".join([*probe.messages, probe.said, probe.error, first_use])
        m = _PTXAS_CC.search(text)
        if not m:
            continue
        cc = _cc(m, snap)
        need = str(kb.get("cuda_for_arch", {}).get(cc, ""))
        nvcc = snap.version_of("nvidia-cuda-nvcc-cu12")
        line = next((t for t in text.splitlines() if _PTXAS_CC.search(t)), m[0])
        who = DISPLAY.get(name, name)
        failed = bool(_PTXAS_CC.search(first_use) or _PTXAS_CC.search(probe.error))
        out.append(Finding(
            "ptxas.older-than-gpu", "error" if failed else "warning",
            f"The ptxas {who} compiles with is older than this GPU"
            + (f" (compute capability {cc})" if cc else ""),
            observed=f"{who} says: \"{line.strip()[:200]}\""
                     + (f"; nvidia-cuda-nvcc-cu12 {nvcc}" if nvcc and name == "jax" else "")
                     + (f"; CUDA {need} is the first release read to know it" if need else ""),
            why="Kernels are turned into GPU code by ptxas; a ptxas from a CUDA release older "
                "than the GPU's architecture has no target for it, so compilation fails (or, "
                "in TensorFlow, falls back to the driver's slower JIT). JAX and Triton run the "
                "ptxas their own wheels bundle, not a system toolkit's.",
            fix=_fix(name, cc, need, snap),
            source=kb["ptxas_target"]["source"]))
    return out


def check_wsl_linux_libcuda_beside_loader(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """WSL2: ldconfig lists a Linux driver's libcuda beside WSL's, and a package that opens
    libcuda by its own name (Numba) is installed."""
    entry = kb.get("wsl_driver_loaders", {})
    wsl_dir = kb["wsl"]["libcuda_dir"].rstrip("/") + "/"
    if not snap.host.wsl or snap.host.in_container:
        return []  # containers: what the toolkit mounts there is not read
    dists = [d for d in entry.get("dists", []) if snap.has(d)]
    linux = [p for p in snap.libcuda_copies
             if not p.startswith(wsl_dir) and "/stubs/" not in p]
    if not dists or not linux:
        return []
    first = snap.loader_finds("libcuda.so.1")
    if first and not first.startswith(wsl_dir) and not any(
            p.gpu_devices for p in snap.frameworks.values()):
        return []  # wsl.linux-driver-libcuda says it
    seen = [DISPLAY.get(n, n) for n, p in sorted(snap.frameworks.items()) if p.gpu_devices]
    dirs = sorted({os.path.dirname(p) for p in linux})
    have = ", ".join(f"{d} {snap.version_of(d)}" for d in dists)
    return [Finding(
        "wsl.linux-libcuda-beside-loader", "warning",
        f"WSL2: a Linux driver's libcuda ({', '.join(linux)}) is in the loader's cache; "
        f"{dists[0]} may load it instead of WSL's",
        observed=f"kernel {snap.host.os_version}; ldconfig lists libcuda at "
                 f"{', '.join(snap.libcuda_copies)}; {have}"
                 + (f"; {', '.join(seen)} see the GPU" if seen else ""),
        why=f"Under WSL2 the only working libcuda is the Windows driver's in {wsl_dir[:-1]}; "
            f"{dists[0]} opens libcuda.so (then libcuda.so.1) through the system loader itself, "
            f"so a copy a Linux NVIDIA driver package put in {', '.join(dirs)} can be the one "
            "it gets (cuInit then fails), while a framework that loads libcuda.so.1 from WSL's "
            "directory works.",
        fix=f"remove the Linux driver packages inside WSL2 (dpkg -S {linux[0]} names them, "
            "e.g. sudo apt-get remove libnvidia-compute-<series>; dpkg --get-selections | grep "
            f"nvidia), then sudo ldconfig so only {wsl_dir[:-1]} holds libcuda; or for "
            f"{dists[0]} alone: export NUMBA_CUDA_DRIVER={wsl_dir}libcuda.so.1",
        source=entry["source"])]
