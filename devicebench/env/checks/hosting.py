"""Where the Python runs, when that decides the GPU: a container started without GPU
access, a macOS virtual machine (a hosted CI runner) whose paravirtual GPU has no MPS, a
sandbox (an agent's command sandbox) that denies the processes it runs the GPU."""

from __future__ import annotations

import re

from devicebench.env.checks._util import DISPLAY, KB, at_least
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


def check_docker_desktop_vm(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """Linux on Docker Desktop's VM (a ``linuxkit`` kernel: Docker Desktop on macOS, or its
    Hyper-V backend on Windows) where a framework sees no GPU -> warning: no GPU reaches
    containers there (no Metal/MPS on a Mac; NVIDIA GPUs only through the WSL2 backend)."""
    if snap.host.os != "Linux" or "linuxkit" not in snap.host.os_version.lower():
        return []
    blind = [f"{DISPLAY.get(n, n)} {p.version}" for n, p in sorted(snap.frameworks.items())
             if p.status == "ok" and not p.gpu_devices]
    if not blind or snap.nvidia_smi is not None:
        return []
    arm = snap.host.machine in ("aarch64", "arm64")
    where = ("an Apple Silicon Mac (aarch64)" if arm
             else "a Mac or a Windows Hyper-V backend (x86_64)")
    return [Finding(
        "container.docker-desktop-vm", "warning",
        "Docker Desktop's Linux VM (linuxkit kernel): no GPU, no Apple MPS/Metal in containers",
        observed=f"Linux kernel {snap.host.os_version}: Docker Desktop's VM on {where}; "
                 f"{', '.join(blind)} list no GPU",
        why="Docker Desktop runs containers in a LinuxKit virtual machine. On macOS that VM "
            "gets no Metal device, so PyTorch's MPS, tensorflow-metal and jax-metal cannot "
            "exist inside a Linux container; Docker Desktop passes NVIDIA GPUs only on "
            "Windows with the WSL2 backend.",
        fix=("run the framework natively on macOS, outside the container (an arm64 macOS "
             "Python: torch device 'mps', or TensorFlow's Metal plugin); inside the "
             "container use the CPU"
             if arm else
             "on a Mac run natively outside the container; on Windows switch Docker Desktop "
             "to the WSL2 backend and start with docker run --gpus all"),
        source=kb["hosting"]["docker_desktop_source"])]


def check_platform_without_wheels(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A platform a framework publishes no wheels for (or only from a recent release: torch
    on Windows ARM64 from 2.7), and none of the frameworks that the knowledge lists for it
    installed -> warning per framework: 'No matching distribution' is the platform."""
    entries = [e for e in kb.get("platform_wheels_missing", [])
               if snap.host.os == e["os"] and snap.host.machine == e["machine"]]
    if not entries or any(snap.has(e["framework"]) for e in entries):
        return []
    out = []
    for e in entries:
        name = DISPLAY.get(e["framework"], e["framework"])
        since = (f"only from {e['first']} on (none before)" if e["first"]
                 else "none for any release")
        out.append(Finding(
            "platform.no-wheels", "warning",
            f"{name} publishes no wheels for {e['what']} before {e['first']}" if e["first"]
            else f"{name} publishes no wheels for {e['what']}",
            observed=f"{snap.host.os} {snap.host.machine}, Python "
                     f"{snap.host.python_version or '?'}; {e['framework']} not installed",
            why=f"{name}'s wheels for {snap.host.machine} {snap.host.os}: {since}. pip then "
                "answers 'No matching distribution found' (or resolves an old sdist that "
                "fails to build): the platform, not the index or the network.",
            fix=e["fix"], source=e["source"]))
    return out


def check_wsl_container_driver_libs(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A container under WSL2 whose CUDA initialisation fails with error 500 ("named symbol
    not found") beside a Windows driver from 555 on: the driver added a library
    (libnvdxgdmal.so.1) that NVIDIA Container Toolkits before 1.14.4 / 1.15.0 do not mount.

    Silent outside WSL2 containers, without the error, and with an older driver.
    """
    info = kb["wsl_container_driver_libs"]
    smi = snap.nvidia_smi
    if not (snap.host.wsl and snap.host.in_container) or smi is None or not smi.driver_version:
        return []
    if not at_least(smi.driver_version, info["driver_from"]):
        return []
    pattern = re.compile(info["pattern"])
    said = [(DISPLAY.get(n, n), m[0]) for n, p in sorted(snap.frameworks.items())
            if (m := pattern.search(p.said or "\n".join([p.error, *p.messages])))]
    if not said:
        return []
    who = ", ".join(sorted({w for w, _ in said}))
    return [Finding(
        "wsl.container-driver-lib-missing", "error",
        f"WSL2 container: Windows driver {smi.driver_version} needs a newer NVIDIA Container "
        f"Toolkit ({info['library']} is not mounted)",
        observed=f"in a container under WSL2 ({snap.host.os_version}); Windows driver "
                 f"{smi.driver_version}; {who} said \"{said[0][1]}\"",
        why=f"From Windows driver {info['driver_from']} on, CUDA in WSL2 needs the driver "
            f"library {info['library']} as well; NVIDIA Container Toolkits before "
            f"{info['toolkit_fixed']} (Docker Desktop before {info['docker_desktop_fixed']}) do "
            "not map it into containers, so cuInit fails with error 500 (CUDA_ERROR_NOT_FOUND, "
            "'named symbol not found') and the framework runs on the CPU.",
        fix=f"update the NVIDIA Container Toolkit in WSL2 to {info['toolkit_fixed']} or newer "
            f"(sudo apt-get install --only-upgrade nvidia-container-toolkit) or Docker Desktop "
            f"to {info['docker_desktop_fixed']} or newer, then restart the container; or go back "
            f"to a Windows driver before {info['driver_from']} ({info['last_driver_before']})",
        source=info["source"])]


# pip's "No matching distribution found for torch==2.5.1+cu121", uv's and pixi's "there is no
# version of torch==2.5.1+cu121": a local-version build (+cuNNN/+cpu/+rocmX.Y/+xpu) asked where
# only PyPI is searched (round 26, from prefix-dev/pixi#2398).
_LOCAL_PIN = re.compile(r"(?:no matching distribution found for|there is no version of)\s+"
                        r"(torch|torchvision|torchaudio)\s*==\s*([0-9][\w.]*)\+(cu\d+|cpu|"
                        r"rocm[\d.]+|xpu)", re.I)
_LOCAL_PIN_SOURCE = ("https://github.com/prefix-dev/pixi/issues/2398 (the pixi maintainer: "
                     "[pypi-options] extra-index-urls with PyTorch's cu121 index) ; "
                     "https://pytorch.org/get-started/locally/ (the +cuNNN wheels live on "
                     "download.pytorch.org/whl/cuNNN)")


def check_local_version_not_on_index(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """The installer said it found no torch==X+cuNNN: those builds are not on PyPI, only on
    PyTorch's own index, which the project did not declare."""
    for probe in snap.frameworks.values():
        m = _LOCAL_PIN.search(f"{probe.error}\n{probe.said}")
        if not m:
            continue
        dist, version, tag = m.group(1), m.group(2), m.group(3).lower()
        index = f"https://download.pytorch.org/whl/{tag}"
        return [Finding(
            "install.local-version-not-on-index", "error",
            f"{dist}=={version}+{tag} is not on PyPI: the +{tag} builds are only on PyTorch's "
            "index",
            observed=m.group(0),
            why=f"PyPI holds no local-version ({dist}=={version}+{tag}) wheels; they are "
                f"published on {index}, so a resolver that searches PyPI alone finds no such "
                f"version and installs no {dist}.",
            fix=f"add {index} as an index: pip install '{dist}=={version}' --index-url {index}; "
                f"pixi: [pypi-options] extra-index-urls = [\"{index}\"]; uv: a [[tool.uv.index]] "
                f"with url = \"{index}\" for {dist}",
            source=_LOCAL_PIN_SOURCE)]
    return []
