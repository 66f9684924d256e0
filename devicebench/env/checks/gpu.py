"""Checks on accelerators: GPUs the frameworks do not see, CUDA builds vs the driver."""

from __future__ import annotations

from devicebench.env.checks._util import (
    DISPLAY,
    KB,
    build_cuda_version,
    fmt_mm,
    hardware_gpus,
    has_nvidia_gpu,
    major_minor,
    ok_probe,
)
from devicebench.env.checks.cuda import cuda_gap
from devicebench.env.checks.gpu_causes import apple_causes, nvidia_causes
from devicebench.env.checks.nvidia_builds import nvidia_tf_for_driver, tf_build_cuda
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

_FRAMEWORKS = ("tensorflow", "torch", "jax")


def check_cuda_driver(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A framework built for a newer CUDA than the NVIDIA driver supports."""
    smi = snap.nvidia_smi
    if smi is None or not (smi.driver_version or smi.cuda_version):
        return []
    out: list[Finding] = []
    for name in _FRAMEWORKS:
        probe = snap.frameworks.get(name)
        build = build_cuda_version(probe, snap) if probe is not None else ""
        if name == "tensorflow":  # nvidia-tensorflow's +nvYY.MM release names its CUDA
            build = tf_build_cuda(snap, kb)
        kind, min_drv = cuda_gap(snap, kb, build)
        if not kind:
            continue
        display = DISPLAY[name]
        version = probe.version if probe is not None else ""
        if name == "tensorflow" and not version and snap.has("nvidia-tensorflow"):
            version = f"(nvidia-tensorflow {snap.version_of('nvidia-tensorflow')})"
        observed = (
            f"{display} {version} is built for CUDA {build}; NVIDIA driver "
            f"{smi.driver_version or '?'} supports CUDA up to {smi.cuda_version or '?'}"
        )
        if min_drv:
            observed += f" (CUDA {major_minor(build)[0]}.x needs driver >= {min_drv} on Linux)"
        native = kb["cuda"]["toolkit_drivers"].get(fmt_mm(major_minor(build)))
        if kind == "minor" and native:  # the family minimum is met: name the toolkit's driver
            min_drv = native[1 if snap.host.os == "Windows" else 0]
        upgrade = (
            f"update the NVIDIA driver to >= {min_drv or 'one supporting CUDA ' + build} "
            "(Ubuntu: sudo ubuntu-drivers install; else https://www.nvidia.com/Download/index.aspx)"
            f", then check that nvidia-smi shows 'CUDA Version' >= {fmt_mm(major_minor(build))}"
        )
        if name == "torch" and major_minor(smi.cuda_version)[:1] == (11,):
            upgrade += (
                "; or keep the driver: pip install --force-reinstall torch "
                "--index-url https://download.pytorch.org/whl/cu118"
            )
        if name == "tensorflow" and nvidia_tf_for_driver(snap, kb):
            upgrade += "; or keep the driver: " + nvidia_tf_for_driver(snap, kb)
        if kind == "minor":
            out.append(
                Finding(
                    "cuda.minor-version-compat",
                    "warning",
                    f"{display}'s CUDA is newer than the driver's (same major)",
                    observed=observed,
                    why=(
                        "It runs through CUDA minor-version compatibility, with a limited "
                        "feature set: PTX built for the newer CUDA cannot be JIT-compiled by "
                        "this driver (CUDA_ERROR_UNSUPPORTED_PTX_VERSION), e.g. for GPUs newer "
                        "than the wheel's prebuilt kernels."
                    ),
                    fix=upgrade,
                    source=kb["cuda"]["source"],
                )
            )
            continue
        out.append(
            Finding(
                "cuda.driver-too-old",
                "error",
                f"{display} is built for a newer CUDA than the NVIDIA driver supports",
                observed=observed,
                why=(
                    "A newer CUDA major, or a driver below the family's minimum, never runs: "
                    "the framework finds no usable GPU (e.g. 'CUDA driver version is "
                    "insufficient for CUDA runtime version', 'The NVIDIA driver on your system "
                    "is too old') and trains on the CPU."
                ),
                fix=upgrade,
                source=kb["cuda"]["source"] + (
                    " ; " + kb["nvidia_tf_builds"]["source"]
                    if name == "tensorflow" and nvidia_tf_for_driver(snap, kb) else ""),
            )
        )
    return out


def check_nvidia_smi_failed(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """nvidia-smi exists but failed: the driver is not usable."""
    smi = snap.nvidia_smi
    if smi is None or not smi.error:
        return []
    return [
        Finding(
            "nvidia.smi-failed",
            "warning",
            "nvidia-smi is installed but failed",
            observed=f"nvidia-smi error: {smi.error.strip()[:400]}",
            why=(
                "It could not talk to the NVIDIA driver, so no framework will see the GPU either "
                "(driver not loaded, or kernel module and user-space libraries of different "
                "versions after an update)."
            ),
            fix=(
                "reboot after a driver update, or reinstall the driver; nvidia-smi must list "
                "the GPU"
            ),
            source=kb["cuda"]["source"],
        )
    ]


def check_gpu_not_seen(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A GPU in the hardware that a framework (imported fine) does not list, with the cause."""
    nvidia = has_nvidia_gpu(snap)
    apple = snap.is_apple_silicon and bool(snap.host.apple_chip)
    if not (nvidia or apple):
        return []
    hardware = ", ".join(hardware_gpus(snap))
    out: list[Finding] = []
    for name in _FRAMEWORKS:
        probe = ok_probe(snap, name)
        if probe is None or probe.gpu_devices:
            continue
        causes = (nvidia_causes if nvidia else apple_causes)(name, probe, snap, kb)
        if not causes:
            continue
        display = DISPLAY[name]
        devices = ", ".join(d.name or d.kind for d in probe.physical_devices) or "no devices"
        severity = "info" if (apple and name == "jax" and not snap.has("jax-metal")) else "warning"
        others = (
            "; other possible causes: " + "; ".join(c[0] for c in causes[1:]) if causes[1:] else ""
        )
        out.append(
            Finding(
                "gpu.not-seen",
                severity,
                f"{display} does not see the GPU",
                observed=f"hardware: {hardware}; {display} {probe.version} lists {devices}",
                why=f"Training runs on the CPU. Likely cause: {causes[0][0]}{others}.",
                fix=causes[0][1],
                source=(kb["cuda"]["source"] if nvidia else kb["metal"]["source"]),
                related=tuple(r for c in causes for r in c[2]),
            )
        )
    return out
