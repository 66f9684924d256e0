"""Where the Python runs, when that decides the GPU: a container started without GPU
access, a macOS virtual machine (a hosted CI runner) whose paravirtual GPU has no MPS, a
sandbox (an agent's command sandbox) that denies the processes it runs the GPU."""

from __future__ import annotations

from devicebench.env.checks._util import DISPLAY, KB
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

_APPLE_GPU_DISTS = ("tensorflow-metal", "jax-metal", "mlx")


def _cuda_build(name: str, build: dict) -> bool:
    if name == "jax":
        return False  # jaxlib's CUDA lives in plugins: see the distributions instead
    return bool(build.get("is_cuda_build") or build.get("cuda_version"))


def check_container_no_gpu(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """Inside a container with no nvidia-smi, a CUDA build that lists no GPU -> warning: the
    container was started without GPU access (no --gpus / NVIDIA Container Toolkit)."""
    if snap.host.os != "Linux" or not snap.host.in_container or snap.nvidia_smi is not None:
        return []
    blind = [f"{DISPLAY.get(n, n)} {p.version}" for n, p in sorted(snap.frameworks.items())
             if p.status == "ok" and not p.error and not p.gpu_devices
             and _cuda_build(n, p.build)]
    blind += [f"JAX ({d})" for d in ("jax-cuda12-plugin", "jax-cuda13-plugin") if snap.has(d)
              and not (snap.frameworks.get("jax") and snap.frameworks["jax"].gpu_devices)]
    if not blind:
        return []
    info = kb["hosting"]
    # TensorFlow's and JAX's default Linux wheels are CUDA builds on every machine, GPU or
    # not (this project's CPU-only CI container has one): only NVIDIA's pip CUDA libraries
    # (tensorflow[and-cuda], a CUDA torch wheel's dependencies) show that a GPU was meant.
    meant = [d for d in sorted(snap.distributions) if d.startswith("nvidia-")]
    return [Finding(
        "container.no-gpu", "warning" if meant else "info",
        "This container has no GPU access: CUDA builds see no GPU",
        observed=f"running in a container (/.dockerenv or /run/.containerenv); no nvidia-smi; "
                 f"{', '.join(blind)} (CUDA builds) list no GPU"
                 + (f"; NVIDIA's CUDA libraries are installed ({', '.join(meant[:3])})" if meant
                    else "; no NVIDIA CUDA libraries installed (a CPU-only container?)"),
        why="A container gets the NVIDIA driver and the /dev/nvidia* devices only when it is "
            "started with GPU access, which the NVIDIA Container Toolkit on the host provides "
            "(docker run --gpus; compose: a device reservation with driver nvidia); without "
            "it every CUDA framework inside runs on the CPU. On a host with no NVIDIA GPU, "
            "ignore this.",
        fix="install the NVIDIA Container Toolkit on the host, then start the container with "
            "GPU access: docker run --gpus all ...  (compose: deploy.resources.reservations."
            "devices: [{driver: nvidia, count: all, capabilities: [gpu]}])",
        source=info["container_source"])]


def check_virtual_mac(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A macOS virtual machine (CPU brand 'Apple M1 (Virtual)', e.g. a GitHub-hosted arm64
    runner) with an Apple-GPU framework -> warning: MPS is not supported there."""
    cpu = snap.host.cpu_model
    if snap.host.os != "Darwin" or "(virtual)" not in cpu.lower():
        return []
    users = []
    torch = snap.frameworks.get("torch")
    if torch is not None and torch.build.get("mps_built"):
        state = "available" if any(d.kind in ("MPS", "GPU") for d in torch.gpu_devices) \
            else "unavailable"
        users.append(f"PyTorch {torch.version} (MPS reported {state})")
    users += [f"{d} {snap.version_of(d)}" for d in _APPLE_GPU_DISTS if snap.has(d)]
    if not users:
        return []
    mac = snap.host.macos_version
    return [Finding(
        "host.virtual-mac", "warning",
        "This Mac is a virtual machine: its GPU does not support MPS",
        observed=f"CPU '{cpu}': a macOS {mac} virtual machine (a hosted CI runner, e.g. "
                 f"GitHub's arm64 macOS runners); {', '.join(users)}",
        why="Apple's Virtualization framework gives a guest a paravirtual GPU, and GitHub "
            "documents that Metal Performance Shaders are not supported on its arm64 macOS "
            "runners: MPS may report available and then fail, or give results and timings "
            "unlike a real Mac's.",
        fix="run on the CPU in this VM (torch device 'cpu'; JAX_PLATFORMS=cpu; TensorFlow "
            "without tensorflow-metal), and measure GPU training on a bare-metal or "
            "self-hosted Mac",
        source=kb["hosting"]["virtual_mac_source"])]


def check_sandbox(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """The probe ran inside a sandbox that hides the GPU from the processes it starts (an
    ``[[sandboxes]]`` entry: its marker variable and the OS), and a GPU framework sees none."""
    blind = [f"{DISPLAY.get(n, n)} {p.version}" for n, p in snap.frameworks.items()
             if p.status == "ok" and not p.gpu_devices
             and (p.build.get("mps_built") or _cuda_build(n, p.build))]
    out = []
    for box in kb.get("sandboxes", []):
        value = snap.env_vars.get(box["env"])
        if value is None or (box.get("value") and value != box["value"]):
            continue
        if box.get("os") and snap.host.os != box["os"]:
            continue
        if not blind:
            continue
        out.append(Finding(
            "host.sandboxed", "warning",
            f"Running inside {box['name']}, which blocks {box['blocks']}",
            observed=f"{box['env']}={value}; {', '.join(blind)} see no GPU",
            why=f"{box['name']} denies the processes it runs access to {box['blocks']}, so the "
                "framework reports no GPU although the machine and the build support one.",
            fix=box["fix"], source=box["source"]))
    return out
