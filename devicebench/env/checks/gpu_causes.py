"""Why a framework that imported fine does not see the GPU in the hardware: the
candidate causes on NVIDIA and on Apple machines, each with its fix."""

from __future__ import annotations

import re

from devicebench.env.checks._util import (
    KB,
    as_version,
    at_least,
    build_cuda_version,
    fmt_mm,
    macos_version,
    major_minor,
    matches,
    metal_release,
    tf_version,
)
from devicebench.env.checks.apple import metal_choice, metal_install_fix
from devicebench.env.checks.cuda import Cause, cuda_gap, tf_cuda_fix, tf_library_causes
from devicebench.env.checks.installs import torch_cuda_index
from devicebench.env.snapshot import EnvSnapshot, FrameworkProbe


def nvidia_causes(name: str, probe: FrameworkProbe, snap: EnvSnapshot, kb: KB) -> list[Cause]:
    """Why framework ``name`` lists no NVIDIA GPU: (cause, fix, related ids), likeliest first."""
    env = snap.env_vars
    causes: list[Cause] = []
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
                f"update the NVIDIA driver to >= {min_drv or 'one supporting CUDA ' + build} "
                "(see cuda.driver-too-old)",
                ("cuda.driver-too-old",),
            )
        )
    if name == "tensorflow":
        cpu_dist = snap.has("tensorflow-cpu")
        if probe.build.get("is_cuda_build") is False or cpu_dist:
            what = "tensorflow-cpu is installed" if cpu_dist else "is_cuda_build=False"
            # Provenance: PyPI's x86_64 Linux `tensorflow` wheel is always a CUDA build, so a
            # CPU build without tensorflow-cpu came from elsewhere -- in a conda env, conda.
            conda = (not cpu_dist and snap.host.os == "Linux" and snap.host.conda_env
                     and snap.host.machine in ("x86_64", "AMD64"))
            if conda:
                what += ("; PyPI's Linux tensorflow wheels are CUDA builds, so this one was "
                         "installed by conda (a CPU variant, or a conda-forge build whose CUDA "
                         "support is missing)")
            causes.append(
                (
                    f"a CPU-only TensorFlow build ({what})",
                    ("conda remove -y tensorflow tensorflow-base && " if conda else "")
                    + "pip uninstall -y tensorflow-cpu tensorflow && "
                    + (
                        f"pip install 'tensorflow[and-cuda]=={tf_v}'"
                        if matches(tf_v, kb["tensorflow"]["and_cuda"])
                        else f"pip install 'tensorflow=={tf_v}' && " + tf_cuda_fix(tf_v, kb)
                    ),
                    (),
                )
            )
        library_causes = tf_library_causes(probe, snap, kb)
        driver = next((i for i, c in enumerate(causes) if "cuda.driver-too-old" in c[2]), None)
        if driver is not None and library_causes:
            # Both block the GPU: a new driver alone still leaves TF without its libraries.
            cause, fix, related = causes[driver]
            causes[driver] = (cause, f"{fix}; and: {library_causes[0][1]}", related)
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
            index = torch_cuda_index(snap, kb, probe.version)
            base = _base_version(probe.version)
            fix = (f"pip install --force-reinstall 'torch=={base}' --index-url "
                   f"https://download.pytorch.org/whl/{index}  # the newest CUDA build of this "
                   "release the driver runs; other versions: https://pytorch.org/get-started/locally/"
                   if index else
                   "pip install --force-reinstall torch --index-url https://download.pytorch.org/"
                   "whl/cu126  # pick the CUDA version your driver supports: "
                   "https://pytorch.org/get-started/locally/")
            causes.append(
                (
                    f"a CPU-only PyTorch build (torch {probe.version}, no CUDA version)"
                    + (" -- PyPI's Windows wheels are CPU-only" if snap.host.os == "Windows"
                       else ""),
                    fix,
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
    elif name == "jax" and snap.host.os == "Windows":
        causes.append(
            (
                "JAX has no CUDA support on native Windows (see gpu.windows-native-unsupported)",
                "run JAX in WSL2: pip install -U 'jax[cuda12]' inside WSL2",
                ("gpu.windows-native-unsupported",),
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
            fix = f"pip install -U 'jax[{cuda}]'"
            if jaxlib and not at_least(jaxlib, "0.4"):  # no cuda12 extra then (as remembered)
                fix = (f"pip install 'jax[cuda11_cudnn82]=={probe.version}' -f "
                       "https://storage.googleapis.com/jax-releases/jax_cuda_releases.html  "
                       f"# jaxlib {jaxlib} predates jax[cuda12]; or pip install -U 'jax[{cuda}]'")
            causes.append(
                ("a CPU-only jaxlib (no jax-cuda12-plugin / jax-cuda13-plugin)", fix, ())
            )
        causes.append(
            ("JAX found no CUDA backend", "python -c 'import jax; jax.devices(\"gpu\")'", ())
        )
    return causes


def _base_version(version: str) -> str:
    v = as_version(version)
    return v.base_version if v is not None else version


def apple_causes(name: str, probe: FrameworkProbe, snap: EnvSnapshot, kb: KB) -> list[Cause]:
    """Why framework ``name`` lists no Apple GPU: (cause, fix, related ids)."""
    causes: list[Cause] = []
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
        mps, first = torch_mps_macos(kb, probe.version or snap.version_of("torch"))
        mac = macos_version(snap)
        if mac is not None and not matches(str(mac), mps):
            keep = f", or pip install 'torch<{first}' (the last releases for macOS " \
                   f"{snap.host.macos_version})" if first != "2.0" else ""
            causes.append(
                (
                    f"PyTorch {probe.version}'s MPS backend needs macOS {mps.lstrip('>=')}+ "
                    f"(this is macOS {snap.host.macos_version})",
                    f"upgrade to macOS {mps.lstrip('>=')} or newer (System Settings > General > "
                    f"Software Update){keep}",
                    (),
                )
            )
        if probe.build.get("mps_built") is not True:
            causes.append(
                ("this torch build has no MPS support", "pip install --force-reinstall torch", ())
            )
        elif not causes:
            causes.append(
                ("MPS is built in but torch.backends.mps.is_available() is False",
                 "python -c 'import torch; print(torch.backends.mps.is_available())'", ())
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


def torch_mps_macos(kb: KB, torch_version: str) -> tuple[str, str]:
    """The macOS specifier PyTorch ``torch_version``'s MPS backend needs, and the first
    release (major.minor) that needs it; a nightly counts as its release.

    Example:
        >>> from devicebench.env.checks import load_knowledge
        >>> torch_mps_macos(load_knowledge(), "2.10.0.dev20251008")
        ('>=14.0', '2.10')
    """
    table = kb["torch_mps"].get("releases") or {"2.0": kb["torch_mps"]["macos"]}
    keys = sorted(table, key=lambda k: major_minor(k))
    mm = major_minor(torch_version)
    picked = keys[0]
    for k in keys:
        if mm and mm >= major_minor(k):
            picked = k
    return table[picked], picked


def _pairs(kb: KB) -> str:
    rel = metal_release(kb, kb["metal"]["recommended"]) or {}
    return (
        f"tensorflow-metal {kb['metal']['recommended']} with TF {rel.get('tensorflow')} on "
        f"Python {rel.get('python')}, macOS {rel.get('macos')}"
    )
