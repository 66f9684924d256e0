"""Checks on accelerators: GPUs the frameworks do not see, CUDA builds vs the driver."""

from __future__ import annotations

import re

from devicebench.env.checks._util import (
    DISPLAY,
    KB,
    as_version,
    at_least,
    build_cuda_version,
    fmt_mm,
    hardware_gpus,
    has_nvidia_gpu,
    macos_version,
    major_minor,
    matches,
    metal_release,
    ok_probe,
    tf_version,
)
from devicebench.env.checks.apple import metal_choice, metal_install_fix
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
    drv = as_version(smi.driver_version)
    fam = next((f for f in kb["cuda"]["families"] if f["major"] == b[0]), None)
    min_drv = fam["min_driver_linux"] if fam else ""
    if d and b[0] > d[0]:
        return "major", min_drv
    if snap.host.os == "Linux" and drv and min_drv and not at_least(smi.driver_version, min_drv):
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
        build = build_cuda_version(probe, snap) if probe is not None else ""
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
        and as_version(tf_v) is not None
        and not at_least(win_max, fmt_mm(major_minor(tf_v)))
    ):
        causes.append(
            (
                f"TensorFlow {tf_v} has no GPU support on native Windows (last: {win_max})",
                "run TensorFlow in WSL2: pip install 'tensorflow[and-cuda]' inside WSL2",
                (),
            )
        )
    build = build_cuda_version(probe, snap)
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
                    "pip uninstall -y tensorflow-cpu tensorflow && "
                    + (
                        f"pip install 'tensorflow[and-cuda]=={tf_v}'"
                        if matches(tf_v, kb["tensorflow"]["and_cuda"])
                        else f"pip install 'tensorflow=={tf_v}' && " + tf_cuda_fix(tf_v, kb)
                    ),
                    (),
                )
            )
        library_causes = tf_library_causes(probe, snap, kb)
        causes += library_causes
        if not library_causes:
            causes.append(
                (
                    "CUDA/cuDNN libraries not found or not loadable (TF logs 'Cannot dlopen some "
                    "GPU libraries' at import)",
                    tf_cuda_fix(tf_v, kb),
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
        plugins = [d for d in snap.distributions if re.fullmatch(r"jax-cuda\d+-plugin", d)]
        jaxlib = snap.version_of("jaxlib")
        for plugin in plugins:
            pv = snap.version_of(plugin)
            if jaxlib and as_version(pv) != as_version(jaxlib):
                causes.append(
                    (
                        f"{plugin} {pv} does not match jaxlib {jaxlib}: JAX skips a plugin "
                        "of another version and runs on the CPU",
                        f"pip install -U 'jax[{plugin.split('-')[1]}]'  # jax, jaxlib and "
                        "the plugin at one version",
                        (),
                    )
                )
        if not plugins:
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
        tf_v = probe.version or tf_version(snap, kb)
        py = snap.host.python_version
        if not snap.has("tensorflow-metal"):
            choice = metal_choice(kb, python=py, macos=snap.host.macos_version, tensorflow=tf_v)
            if choice.release is not None:
                causes.append(
                    (
                        "the tensorflow-metal plugin is not installed",
                        f"pip install tensorflow-metal=={choice.release['version']}",
                        (),
                    )
                )
            elif choice.blocker == "python":
                causes.append(
                    (
                        f"the tensorflow-metal plugin is not installed, and {choice.reason}",
                        metal_install_fix(snap, kb),
                        (),
                    )
                )
            else:
                causes.append(
                    (
                        f"the tensorflow-metal plugin is not installed ({choice.reason})",
                        metal_install_fix(snap, kb),
                        (),
                    )
                )
        else:
            metal_v = snap.version_of("tensorflow-metal")
            causes.append(
                (
                    f"tensorflow-metal {metal_v} did not register a GPU: a version mismatch "
                    f"(known pairs: {_pairs(kb)})",
                    metal_install_fix(snap, kb),
                    ("metal.tf-too-new", "metal.version-mismatch", "metal.python-unsupported",
                     "metal.macos-too-old"),
                )
            )
    elif name == "torch":
        mps = kb["torch_mps"]["macos"]
        mac = macos_version(snap)
        if mac is not None and not matches(str(mac), mps):
            causes.append(
                (
                    f"MPS needs macOS {mps.lstrip('>=')}+ "
                    f"(this is macOS {snap.host.macos_version})",
                    f"upgrade macOS to {mps.lstrip('>=')} or newer (System Settings > General > "
                    "Software Update)",
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
        f"tensorflow-metal {kb['metal']['recommended']} with TF {rel.get('tensorflow')} on "
        f"Python {rel.get('python')}, macOS {rel.get('macos')}"
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


_MISSING_LIB = re.compile(r"Could not load dynamic library '([^']+)'")


def cudart_soname(cuda: str) -> str:
    """The libcudart soname a build for ``cuda`` loads: 10.1 -> .so.10.1, 11.x -> .so.11.0."""
    mm = major_minor(cuda)
    if not mm:
        return ""
    if mm[0] >= 12:
        return f"libcudart.so.{mm[0]}"
    if mm[0] == 11:
        return "libcudart.so.11.0"
    return f"libcudart.so.{fmt_mm(mm)}"


def tf_tested_build(kb: KB, tf_v: str) -> tuple[str, str]:
    """(CUDA, cuDNN) TensorFlow ``tf_v`` was built and tested with (("", "") if unknown)."""
    entry = kb["tensorflow"]["tested_builds"].get(fmt_mm(major_minor(tf_v)))
    return (entry[0], entry[1]) if entry else ("", "")


def tf_cuda_fix(tf_v: str, kb: KB) -> str:
    """Install the CUDA libraries this TensorFlow was built for, the way its release allows.

    ``tensorflow[and-cuda]`` exists from TF 2.14; older releases need the CUDA and cuDNN
    of their tested build (conda-forge ships both).
    """
    tfk = kb["tensorflow"]
    if not tf_v or matches(tf_v, tfk["and_cuda"]):
        pin = f"=={tf_v}" if tf_v else ""
        return f"pip install 'tensorflow[and-cuda]{pin}'"
    cuda, cudnn = tf_tested_build(kb, tf_v)
    if not cuda:
        return "pip install -U 'tensorflow[and-cuda]'  # TF >= 2.14 brings its own CUDA libraries"
    return (
        f"conda install -c conda-forge cudatoolkit={cuda} cudnn={cudnn} && export "
        f"LD_LIBRARY_PATH=$CONDA_PREFIX/lib:$LD_LIBRARY_PATH  # TF {fmt_mm(major_minor(tf_v))} "
        f"was built for CUDA {cuda} + cuDNN {cudnn} (the 'tensorflow[and-cuda]' extra exists "
        "only from TF 2.14)"
    )


def _tf_matching_system(kb: KB, system: dict[str, str]) -> str:
    """The newest TF (< 2.14) whose tested CUDA + cuDNN are both in the system's libraries."""
    for tf_mm, (cuda, cudnn) in kb["tensorflow"]["tested_builds"].items():
        if matches(tf_mm, kb["tensorflow"]["and_cuda"]):
            continue
        cudnn_so = f"libcudnn.so.{major_minor(cudnn)[0]}"
        if cudart_soname(cuda) in system and cudnn_so in system:
            return tf_mm
    return ""


def tf_library_causes(probe: FrameworkProbe, snap: EnvSnapshot, kb: KB) -> list[_Cause]:
    """Causes read from the libraries TF logged it could not load, against what exists."""
    missing = []
    for line in probe.load_errors:
        m = _MISSING_LIB.search(line)
        if m and m.group(1) not in missing:
            missing.append(m.group(1))
    if not missing:
        return []
    tf_v = probe.version or tf_version(snap, kb)
    causes: list[_Cause] = []
    prefix = snap.host.python_prefix
    ld = snap.env_vars.get("LD_LIBRARY_PATH", "")
    in_env = [m for m in missing if m in snap.env_cuda_libs]
    if in_env and f"{prefix}/lib" not in ld.split(":"):
        causes.append(
            (
                f"{', '.join(in_env)} is in this conda environment ({prefix}/lib) but not on "
                f"the loader's path (LD_LIBRARY_PATH={ld or 'unset'}): `conda activate` adds "
                "it, a Jupyter kernel or IDE started outside the activated environment does not",
                f"export LD_LIBRARY_PATH={prefix}/lib:$LD_LIBRARY_PATH  # before starting "
                "python or jupyter; for a Jupyter kernel add \"env\": {\"LD_LIBRARY_PATH\": "
                f"\"{prefix}/lib\"}} to its kernel.json (find it: jupyter kernelspec list)",
                (),
            )
        )
    cuda, cudnn = tf_tested_build(kb, tf_v)
    build_cuda = str(probe.build.get("cuda_version") or cuda)
    build_cudnn = str(probe.build.get("cudnn_version") or cudnn)
    system = snap.system_cuda_libs
    for soname in missing:
        if soname in in_env:
            continue
        base = soname.split(".so")[0]
        others = sorted(s for s in system if s.startswith(base + ".so.") and s != soname)
        if not others:
            continue
        fix = tf_cuda_fix(tf_v, kb)
        alt = _tf_matching_system(kb, system) if not matches(tf_v, kb["tensorflow"]["and_cuda"]) \
            else ""
        if alt:
            fix += (
                f"; or use the system's libraries with TF {alt}: "
                f"pip install 'tensorflow=={alt}.*'"
            )
        causes.append(
            (
                f"TensorFlow {tf_v} was built for CUDA {build_cuda} / cuDNN {build_cudnn} and "
                f"loads {soname}, but the system has {', '.join(others)} (another version, "
                "which it cannot use)",
                fix,
                (),
            )
        )
        break
    absent = [m for m in missing if m not in in_env and not any(
        s.startswith(m.split(".so")[0] + ".so.") for s in system)]
    if absent and not causes:
        causes.append(
            (
                f"{', '.join(absent)} not found (not in ldconfig's cache, this environment or "
                f"LD_LIBRARY_PATH={ld or 'unset'})",
                tf_cuda_fix(tf_v, kb),
                (),
            )
        )
    return causes
