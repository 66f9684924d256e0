"""A GPU hidden before any framework sees it (round 19): an empty ROCm override variable,
and a CUDA build of torch on a Linux system with no NVIDIA driver visible at all."""

from __future__ import annotations

from devicebench.env.checks._util import KB, ok_probe
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot


def _sees_gpu(snap: EnvSnapshot, name: str) -> bool:
    probe = snap.frameworks.get(name)
    return probe is not None and any(d.kind == "GPU" for d in probe.physical_devices)


def check_empty_rocm_override(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """HSA_OVERRIDE_GFX_VERSION set to an empty value while the ROCm build sees no GPU."""
    if "HSA_OVERRIDE_GFX_VERSION" not in snap.env_vars or \
            snap.env_vars["HSA_OVERRIDE_GFX_VERSION"].strip():
        return []
    rocm = [n for n, p in snap.frameworks.items()
            if p.build.get("is_rocm_build") or "+rocm" in snap.version_of(n)]
    if not rocm or any(_sees_gpu(snap, n) for n in rocm):
        return []
    return [Finding(
        "rocm.override-empty", "error",
        "HSA_OVERRIDE_GFX_VERSION is set but empty: the ROCm runtime finds no GPU",
        observed=f"HSA_OVERRIDE_GFX_VERSION='' in the environment; {', '.join(rocm)} (a ROCm "
                 "build) lists no GPU",
        why="The HSA runtime takes a present HSA_OVERRIDE_GFX_VERSION as an override even "
            "when it is empty (docker compose's ${HSA_OVERRIDE_GFX_VERSION:-} writes it so), "
            "and then enumerates zero GPUs: 'No CUDA GPUs are available', also on cards ROCm "
            "supports natively.",
        fix="unset HSA_OVERRIDE_GFX_VERSION  # before the framework loads; or remove the line "
            "from the compose file / environment, or give it a real value (x.y.z) only where "
            "an override is needed",
        source=kb["rocm_override_empty"]["source"])]


def check_cuda_build_no_driver(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """torch with an explicit +cuXXX tag on Linux, no GPU, and no nvidia-smi at all."""
    probe = ok_probe(snap, "torch")
    version = snap.version_of("torch") or (probe.version if probe else "")
    if probe is None or snap.host.os != "Linux" or snap.host.wsl or snap.nvidia_smi is not None \
            or "+cu" not in version or not probe.build.get("is_cuda_build") \
            or _sees_gpu(snap, "torch") or snap.host.amd_gpus:
        return []
    return [Finding(
        "cuda.build-without-driver", "warning",
        f"torch {version} is a CUDA build, but no NVIDIA driver is visible here",
        observed=f"torch {version} lists no GPU; nvidia-smi is not found"
                 + (" (inside a container)" if snap.host.in_container else ""),
        why="A CUDA wheel was chosen (its +cu tag), but this system shows no NVIDIA driver: "
            "no nvidia-smi and no GPU. Inside a container the GPU, the driver's libraries and "
            "nvidia-smi are mounted only when the container is started with a GPU request; "
            "on a host the NVIDIA driver is not installed. Training runs on the CPU.",
        fix="in a container: start it with --gpus all (docker run --gpus all ...; compose: "
            "deploy.resources.reservations.devices with driver nvidia), with the NVIDIA "
            "Container Toolkit on the host; on a host: install the NVIDIA driver (Ubuntu: "
            "sudo ubuntu-drivers install)",
        source=kb["cuda_build_no_driver"]["source"])]
