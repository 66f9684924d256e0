"""Packages the probe does not import, read from what it has (issue 24, round 19).

Triton (torch.compile's compiler) against the GPU's compute capability, CUDA-extension builders
(DeepSpeed, apex, flash-attn ...) against the toolkit under ``CUDA_HOME``, and bitsandbytes
on a ROCm torch: each from the installed distributions and their versions, the probed torch's
build and devices, and the environment variables, never by importing the package.
"""

from __future__ import annotations

import re

from devicebench.env.checks._util import KB, as_version, major_minor, ok_probe
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

_CUDA_IN_PATH = re.compile(r"cuda-(\d+)\.(\d+)")


def _gpu_capabilities(snap: EnvSnapshot) -> list[str]:
    """The compute capabilities of the NVIDIA GPUs (nvidia-smi, else torch's devices)."""
    caps = [g.compute_capability for g in snap.nvidia_smi.gpus] if snap.nvidia_smi else []
    probe = snap.frameworks.get("torch")
    if probe is not None:
        caps += [d.compute_capability for d in probe.physical_devices]
    return sorted({c for c in caps if c})


def check_triton_target(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """An installed Triton older than the first release read to compile for this GPU."""
    entry = kb.get("triton_targets", {})
    dist = next((d for d in entry.get("dists", []) if snap.has(d)), "")
    have = as_version(snap.version_of(dist)) if dist else None
    if have is None:
        return []
    out = []
    for cap in _gpu_capabilities(snap):
        first = entry["first"].get(cap)
        first_v = as_version(first)
        if first_v is None or as_version(have.base_version) >= first_v:
            continue
        sm = "sm_" + cap.replace(".", "")
        out.append(Finding(
            "triton.gpu-newer-than-triton", "warning",
            f"Triton {snap.version_of(dist)} ({dist}) cannot compile for this GPU's {sm}",
            observed=f"{dist} {snap.version_of(dist)}; a GPU of compute capability {cap} "
                     f"({sm}); Triton {first} is the first release read to know it",
            why="torch.compile and every Triton kernel are compiled by Triton's own LLVM and "
                "the ptxas its wheel bundles; an older Triton does not know this target "
                f"('{sm}' is not a recognized processor, or ptxas: '{sm}a' is not defined), "
                "so they fail while torch's own CUDA kernels still run.",
            fix=f"install a torch whose Triton is {first} or newer (its pytorch-triton comes "
                "with it: pip install --pre torch --index-url "
                "https://download.pytorch.org/whl/nightly/cu128, or the release that pins "
                f"triton>={first}); or point Triton at a CUDA toolkit's ptxas that knows {sm}: "
                "export TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas",
            source=entry["source"]))
    return out


def _toolkit_cuda(snap: EnvSnapshot) -> str:
    """The CUDA release of the toolkit under CUDA_HOME/CUDA_PATH, read from its path."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        m = _CUDA_IN_PATH.search(snap.env_vars.get(var, ""))
        if m:
            return f"{m.group(1)}.{m.group(2)}"
    return ""


def check_extension_cuda_home(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A CUDA-extension builder beside a torch built for another CUDA major than CUDA_HOME's."""
    entry = kb.get("cuda_home_builders", {})
    builders = [d for d in entry.get("dists", []) if snap.has(d)]
    probe = ok_probe(snap, "torch")
    toolkit = _toolkit_cuda(snap)
    built = str(probe.build.get("cuda_version") or "") if probe is not None else ""
    if not builders or not toolkit or not built or toolkit == built:
        return []
    if major_minor(toolkit)[:1] == major_minor(built)[:1]:
        return _minor_mismatch(snap, builders, toolkit, built, entry)
    index = entry["torch_index"].get(str(major_minor(toolkit)[0]), "")
    names = ", ".join(f"{d} {snap.version_of(d)}" for d in builders)
    return [Finding(
        "cuda.extension-toolkit-major", "error",
        f"CUDA_HOME's toolkit (CUDA {toolkit}) is not torch's CUDA ({built}): {builders[0]} "
        "cannot build its CUDA ops",
        observed=f"{names}; CUDA_HOME/CUDA_PATH names CUDA {toolkit}; torch "
                 f"{snap.version_of('torch') or probe.version} was built with CUDA {built}",
        why="These packages compile CUDA extensions against the installed torch with the "
            "toolkit under CUDA_HOME (at install or at first use); torch's extension builder "
            f"refuses a toolkit of another CUDA major (the detected CUDA version ({toolkit}) "
            f"mismatches the version that was used to compile PyTorch ({built})).",
        fix=(f"install a torch built for CUDA {major_minor(toolkit)[0]}.x: pip install torch "
             f"--index-url https://download.pytorch.org/whl/{index}  # " if index else
             "install a torch built for the toolkit's CUDA; ")
            + f"or point CUDA_HOME at a CUDA {built} toolkit (export "
              f"CUDA_HOME=/usr/local/cuda-{built}), then reinstall {builders[0]}",
        source=entry["source"])]


def _minor_mismatch(snap: EnvSnapshot, builders: list[str], toolkit: str, built: str,
                    entry: dict) -> list[Finding]:
    """The same CUDA major, another minor: torch's builder only warns, but an extension
    compiled here (or a prebuilt wheel chosen for CUDA_HOME's release) then fails to load."""
    index = "cu" + toolkit.replace(".", "")
    names = ", ".join(f"{d} {snap.version_of(d)}" for d in builders)
    # a warning only for builders seen to fail at a minor mismatch; the others (DeepSpeed's
    # JIT ops, ...) commonly work there, and a warning on each such machine would be noise
    seen = [d for d in builders if d in entry.get("minor_dists", [])]
    builders = seen + [d for d in builders if d not in seen]
    return [Finding(
        "cuda.extension-toolkit-minor", "warning" if seen else "info",
        f"CUDA_HOME's toolkit (CUDA {toolkit}) is not torch's CUDA ({built}): {builders[0]}'s "
        "CUDA extension may not build or load",
        observed=f"{names}; CUDA_HOME/CUDA_PATH names CUDA {toolkit}; torch "
                 f"{snap.version_of('torch')} was built with CUDA {built}",
        why="These packages compile CUDA extensions against the installed torch with the "
            "toolkit under CUDA_HOME; at a minor mismatch torch's builder only warns, and the "
            "extension (or a wheel chosen for the toolkit's CUDA) then fails to build or to "
            "load ('CUDA extension not installed').",
        fix=f"install the torch built for CUDA {toolkit}: pip install --force-reinstall torch "
            f"--index-url https://download.pytorch.org/whl/{index}, then reinstall "
            f"{builders[0]}; or point CUDA_HOME at a CUDA {built} toolkit",
        source=entry.get("minor_source", entry["source"]))]


def check_bnb_no_rocm(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A bitsandbytes release whose PyPI wheels hold no ROCm library, on a ROCm torch."""
    entry = kb.get("bnb_rocm", {})
    have = snap.version_of(entry.get("dist", "bitsandbytes"))
    probe = snap.frameworks.get("torch")
    rocm = probe is not None and (probe.build.get("is_rocm_build")
                                  or "+rocm" in snap.version_of("torch"))
    if not have or not rocm or not major_minor(have) or \
            major_minor(have) > major_minor(entry["last_without"]):
        return []
    target = (snap.host.amd_gpus or ["<gfx target>"])[0]
    return [Finding(
        "rocm.bitsandbytes-no-rocm-library", "warning",
        f"bitsandbytes {have} from PyPI has no ROCm library for the AMD GPU ({target})",
        observed=f"bitsandbytes {have} beside torch {snap.version_of('torch')} (a ROCm "
                 "build)",
        why="bitsandbytes' PyPI wheels of this release carry CUDA and CPU native libraries "
            "only; on a ROCm torch it finds no GPU library, so its 8-bit/4-bit layers and "
            "optimizers fail or fall back to the CPU.",
        fix=entry["fix"].format(target=target if target.startswith("gfx") else "gfxNNNN"),
        source=entry["source"])]


def check_jax_plugin_driver(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A JAX CUDA plugin release read to need a newer driver branch than the one installed."""
    smi = snap.nvidia_smi
    if smi is None or not major_minor(smi.driver_version):
        return []
    out = []
    for row in kb.get("jax_plugin_drivers", []):
        have = as_version(snap.version_of(row["dist"]))
        if have is None or as_version(have.base_version) < as_version(row["since"]) or \
                major_minor(smi.driver_version) >= major_minor(row["driver"]):
            continue
        out.append(Finding(
            "jax.plugin-needs-newer-driver", "warning",
            f"{row['dist']} {snap.version_of(row['dist'])} needs a newer NVIDIA driver than "
            f"{smi.driver_version} (the {row['driver']} series or newer)",
            observed=f"{row['dist']} {snap.version_of(row['dist'])}; NVIDIA driver "
                     f"{smi.driver_version} (CUDA up to {smi.cuda_version or '?'})",
            why=f"{row['dist']} releases from {row['since']} on were seen to fail on drivers "
                f"older than the {row['driver']} series at the first GPU computation "
                "(cudaErrorSymbolNotFound while creating the cuDNN handle: DNN library "
                "initialization failed), although the driver meets CUDA's family minimum.",
            fix=f"update the NVIDIA driver to the {row['driver']} series or newer (Ubuntu: "
                "sudo ubuntu-drivers install); or pin the last release before: pip install "
                f"'jax[cuda12]=={row['last_before']}'",
            source=row["source"]))
    return out
