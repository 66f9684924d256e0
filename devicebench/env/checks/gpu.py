"""Checks on accelerators: GPUs the frameworks do not see, CUDA builds vs the driver."""

from __future__ import annotations

from devicebench.env.checks._util import (
    DISPLAY,
    KB,
    build_cuda_version,
    fmt_mm,
    hardware_gpus,
    has_nvidia_gpu,
    in_range,
    major_minor,
    metal_release,
    ok_probe,
    parse_version,
    tf_version,
)
from devicebench.env.checks.apple import metal_install_fix
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot, FrameworkProbe

_FRAMEWORKS = ("tensorflow", "torch", "jax")
_Cause = tuple[str, str, tuple[str, ...]]  # (cause, fix, related finding ids)


def cuda_gap(snap: EnvSnapshot, kb: KB, build_cuda: str) -> tuple[str, str]:
    """How a CUDA build relates to the driver: ("", "") fine, else (kind, minimum driver).

    kind is ``"major"`` (newer CUDA major than the driver supports), ``"driver"`` (driver
    below the family's minimum) or ``"minor"`` (newer minor: minor-version compatibility).
    """
    smi = snap.nvidia_smi
    b = major_minor(build_cuda)
    if smi is None or not b:
        return "", ""
    d = major_minor(smi.cuda_version)
    drv = parse_version(smi.driver_version)
    fam = next((f for f in kb["cuda"]["families"] if f["major"] == b[0]), None)
    min_drv = fam["min_driver_linux"] if fam else ""
    if d and b[0] > d[0]:
        return "major", min_drv
    if snap.host.os == "Linux" and drv and min_drv and not in_range(smi.driver_version, min_drv):
        return "driver", min_drv
    if d and b > d:
        return "minor", min_drv
    return "", min_drv


def check_cuda_driver(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A framework built for a newer CUDA than the NVIDIA driver supports."""
    smi = snap.nvidia_smi
    if smi is None or not (smi.driver_version or smi.cuda_version):
        return []
    out: list[Finding] = []
    for name in _FRAMEWORKS:
        probe = snap.frameworks.get(name)
        build = build_cuda_version(probe) if probe is not None else ""
        kind, min_drv = cuda_gap(snap, kb, build)
        if not kind:
            continue
        display = DISPLAY[name]
        version = probe.version if probe is not None else ""
        observed = (
            f"{display} {version} is built for CUDA {build}; NVIDIA driver "
            f"{smi.driver_version or '?'} supports CUDA up to {smi.cuda_version or '?'}"
        )
        if min_drv:
            observed += f" (CUDA {major_minor(build)[0]}.x needs driver >= {min_drv} on Linux)"
        upgrade = (
            f"install an NVIDIA driver >= {min_drv or 'one supporting CUDA ' + build} "
            "(Ubuntu: sudo ubuntu-drivers install; else https://www.nvidia.com/Download/index.aspx)"
            f", then check that nvidia-smi shows 'CUDA Version' >= {fmt_mm(major_minor(build))}"
        )
        if name == "torch" and major_minor(smi.cuda_version)[:1] == (11,):
            upgrade += (
                "; or keep the driver: pip install --force-reinstall torch "
                "--index-url https://download.pytorch.org/whl/cu118"
            )
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
                source=kb["cuda"]["source"],
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


def _nvidia_causes(name: str, probe: FrameworkProbe, snap: EnvSnapshot, kb: KB) -> list[_Cause]:
    env = snap.env_vars
    causes: list[_Cause] = []
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None and cvd.strip() in ("", "-1"):
        causes.append(
            (f"CUDA_VISIBLE_DEVICES='{cvd}' hides every GPU", "unset CUDA_VISIBLE_DEVICES", ())
        )
    if name == "jax" and env.get("JAX_PLATFORMS", "").strip().lower() == "cpu":
        causes.append(("JAX_PLATFORMS=cpu restricts JAX to the CPU", "unset JAX_PLATFORMS", ()))
    tf_v = probe.version or tf_version(snap, kb)
    win_max = kb["tensorflow"]["windows_native_gpu_max"]
    if (
        name == "tensorflow"
        and snap.host.os == "Windows"
        and major_minor(tf_v) > major_minor(win_max)
    ):
        causes.append(
            (
                f"TensorFlow {tf_v} has no GPU support on native Windows (last: {win_max})",
                "run TensorFlow in WSL2: pip install 'tensorflow[and-cuda]' inside WSL2",
                (),
            )
        )
    build = build_cuda_version(probe)
    kind, min_drv = cuda_gap(snap, kb, build)
    if kind in ("major", "driver"):
        causes.append(
            (
                f"its CUDA {build} build needs a newer NVIDIA driver",
                f"install an NVIDIA driver >= {min_drv or 'one supporting CUDA ' + build} "
                "(see cuda.driver-too-old)",
                ("cuda.driver-too-old",),
            )
        )
    if name == "tensorflow":
        cpu_dist = snap.has("tensorflow-cpu")
        if probe.build.get("is_cuda_build") is False or cpu_dist:
            what = "tensorflow-cpu is installed" if cpu_dist else "is_cuda_build=False"
            causes.append(
                (
                    f"a CPU-only TensorFlow build ({what})",
                    f"pip uninstall -y tensorflow-cpu tensorflow && "
                    f"pip install 'tensorflow[and-cuda]=={tf_v}'",
                    (),
                )
            )
        causes.append(
            (
                "CUDA/cuDNN libraries not found (TF logs 'Cannot dlopen some GPU libraries')",
                kb["tensorflow"]["cuda_install"],
                (),
            )
        )
    elif name == "torch":
        if not build or "+cpu" in probe.version:
            causes.append(
                (
                    f"a CPU-only PyTorch build (torch {probe.version}, no CUDA version)",
                    "pip install --force-reinstall torch  # PyPI's Linux x86_64 wheel is a CUDA "
                    "build; other CUDA versions: https://pytorch.org/get-started/locally/",
                    (),
                )
            )
        causes.append(
            (
                "torch.cuda.is_available() is False",
                "python -c 'import torch; torch.cuda.init()'  # prints the reason",
                (),
            )
        )
    elif name == "jax":
        if not (snap.has("jax-cuda12-plugin") or snap.has("jax-cuda13-plugin")):
            cuda = "cuda13" if major_minor(snap.nvidia_smi.cuda_version)[:1] >= (13,) else "cuda12"
            causes.append(
                (
                    "a CPU-only jaxlib (no jax-cuda12-plugin / jax-cuda13-plugin)",
                    f"pip install -U 'jax[{cuda}]'",
                    (),
                )
            )
        causes.append(
            ("JAX found no CUDA backend", "python -c 'import jax; jax.devices(\"gpu\")'", ())
        )
    return causes


def _apple_causes(name: str, probe: FrameworkProbe, snap: EnvSnapshot, kb: KB) -> list[_Cause]:
    causes: list[_Cause] = []
    if snap.host.rosetta:
        causes.append(
            ("Python runs as x86_64 under Rosetta 2", "install an arm64 Python", ("env.rosetta",))
        )
    if name == "tensorflow":
        if not snap.has("tensorflow-metal"):
            fix = metal_install_fix(snap, kb)
            tf_v = probe.version or tf_version(snap, kb)
            py = snap.host.python_version
            for rel in reversed(kb["metal"]["releases"]):
                if (
                    "python_max" in rel
                    and in_range(tf_v, rel["tensorflow_min"], rel["tensorflow_max"])
                    and in_range(py, rel.get("python_min", ""), rel["python_max"])
                    and not any(
                        b["metal"] == rel["version"]
                        and in_range(tf_v, b["tensorflow_min"], b["tensorflow_max"])
                        for b in kb["metal"]["known_bad"]
                    )
                ):
                    fix = f"pip install tensorflow-metal=={rel['version']}"
                    break
            causes.append(("the tensorflow-metal plugin is not installed", fix, ()))
        else:
            metal_v = snap.version_of("tensorflow-metal")
            causes.append(
                (
                    f"tensorflow-metal {metal_v} did not register a GPU: a version mismatch "
                    f"(known pairs: {_pairs(kb)})",
                    metal_install_fix(snap, kb),
                    ("metal.tf-too-new", "metal.version-mismatch", "metal.python-unsupported"),
                )
            )
    elif name == "torch":
        mps_min = kb["torch_mps"]["macos_min"]
        if snap.host.os_version and parse_version(snap.host.os_version) < parse_version(mps_min):
            causes.append(
                (
                    f"MPS needs macOS {mps_min}+ (this is {snap.host.os_version})",
                    "upgrade macOS",
                    (),
                )
            )
        causes.append(
            ("this torch build has no MPS support", "pip install --force-reinstall torch", ())
        )
    elif name == "jax":
        if snap.has("jax-metal"):
            causes.append(
                (
                    f"jax-metal {snap.version_of('jax-metal')} did not load with jax "
                    f"{probe.version} (it pins specific jax versions)",
                    "pip install -U jax-metal",
                    (),
                )
            )
        else:
            causes.append(
                (
                    "JAX uses the CPU on Macs unless jax-metal (experimental) is installed; the "
                    "CPU is often the faster choice for small models",
                    f"pip install jax-metal  # experimental; see {kb['jax_metal']['source']}",
                    (),
                )
            )
    return causes


def _pairs(kb: KB) -> str:
    rel = metal_release(kb, kb["metal"]["recommended"]) or {}
    return (
        f"tensorflow-metal {kb['metal']['recommended']} with TF {rel.get('tensorflow_min')}-"
        f"{rel.get('tensorflow_max')} on Python {rel.get('python_min')}-{rel.get('python_max')}"
    )


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
        causes = (_nvidia_causes if nvidia else _apple_causes)(name, probe, snap, kb)
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
