"""AMD GPUs under ROCm, read from rocminfo whatever uses them (PyTorch, tensorflow-rocm, a
HIP program): a target the ROCm build has no kernels for and the supported sibling to pose
as, an override that masks every GPU, a runtime that cannot open /dev/kfd, a PyTorch that
is not a ROCm build, PyTorch's ROCm wheels under WSL, and WSL 1 (no GPU at all)."""

from __future__ import annotations

import re

from devicebench.env.checks._util import KB, as_version, has_nvidia_gpu, matches
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot, FrameworkProbe

_FAILED_TEXT = ("HSA_STATUS_ERROR_INVALID_ISA", "invalid device function", "SIGSEGV",
                "Segmentation fault")
# The HIP runtime's own word that it found no GPU it has code for (round 7, from Fooocus#1079's
# "No HIP GPUs are available"): on a machine whose rocminfo lists an AMD GPU, the GPU is there
# and the build cannot use it. Evidence whatever the worker's status (it may have run on CPU).
_NO_USABLE_GPU_TEXT = ("No HIP GPUs are available",)


def amd_agents(snap: EnvSnapshot) -> list[tuple[str, str]]:
    """(gfx target, marketing name) of each GPU agent, in rocminfo's (HIP's) order."""
    if snap.host.amd_agents:
        return [(a.split(" ", 1)[0], a.split(" ", 1)[1] if " " in a else "")
                for a in snap.host.amd_agents]
    return [(g, "") for g in snap.host.amd_gpus]


def _integrated(gfx: str, name: str, kb: KB) -> bool:
    return gfx in kb["rocm"]["integrated"] or name.strip() == "AMD Radeon Graphics"


def _rocm_torch(snap: EnvSnapshot) -> FrameworkProbe | None:
    probe = snap.frameworks.get("torch")
    if probe is not None and (probe.build.get("is_rocm_build")
                              or "+rocm" in snap.version_of("torch")):
        return probe
    return None


def _failed(probe: FrameworkProbe | None) -> bool:
    if probe is None:
        return False
    text = f"{probe.error}\n" + "\n".join(probe.messages)
    return (probe.status in ("crashed", "error") and any(t in text for t in _FAILED_TEXT)) \
        or any(t in text for t in _NO_USABLE_GPU_TEXT) \
        or bool(probe.reported.get("no_kernel_image"))


_ROCM_TAG = re.compile(r"\+rocm(\d+\.\d+)")


def _own_target(override: str) -> str:
    """The gfx target an HSA_OVERRIDE_GFX_VERSION value poses as ("11.0.0" -> "gfx1100")."""
    parts = override.split(".")
    return "gfx" + parts[0] + "".join(parts[1:]) if len(parts) == 3 else ""


def _newer_wheels(gfx: str, probe: FrameworkProbe, kb: KB) -> dict | None:
    """The ``[[rocm_wheels_since]]`` row whose PyTorch ROCm wheels first carry ``gfx``, when
    the installed build's ROCm (its HIP version, else its ``+rocmX.Y`` tag) is older."""
    tag = _ROCM_TAG.search(probe.version or "")
    hip = as_version(str(probe.build.get("hip_version") or (tag[1] if tag else "")))
    for row in kb.get("rocm_wheels_since", []):
        if gfx in row["targets"] and hip is not None and hip < as_version(row["rocm"]):
            return row
    return None


def check_rocm_arch(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """An AMD GPU whose target the ROCm build has no kernels for: the sibling to pose as."""
    agents = amd_agents(snap)
    if not agents or snap.env_vars.get("HSA_OVERRIDE_GFX_VERSION"):
        return []
    probe = _rocm_torch(snap)
    if snap.has("torch") and probe is None:
        return []  # not a ROCm build at all: check_torch_not_rocm
    if probe is None and not snap.has("tensorflow-rocm") and snap.frameworks:
        return []  # the installed frameworks do not use ROCm
    arch = (probe.build.get("arch_list") or []) if probe is not None else []
    failed = _failed(probe)
    discrete = [(i, g, n) for i, (g, n) in enumerate(agents) if not _integrated(g, n, kb)]
    pick = discrete or [(i, g, n) for i, (g, n) in enumerate(agents)]
    gcn = str(probe.extra.get("gcn_arch") or "") if probe is not None else ""
    # the probe's own report for its device wins over rocminfo's names
    index, gfx, name = next(((i, g, n) for i, g, n in pick if g == gcn),
                            (0, gcn, "") if gcn else pick[0])
    if probe is not None and arch and not failed and gfx in arch:
        return []
    if probe is not None and not arch and not failed and probe.status == "ok" and not gcn:
        return []  # the build's targets are unknown and nothing failed: no evidence
    if gfx in (arch or kb["rocm"]["wheel_targets"]):
        return []
    who = (f"PyTorch {probe.version or snap.version_of('torch')}" if probe is not None
           else "tensorflow-rocm" if snap.has("tensorflow-rocm") else "the ROCm libraries")
    carries = " ".join(arch) if arch else "the usual release targets " + " ".join(
        kb["rocm"]["wheel_targets"])
    gpu = f"{name} ({gfx})" if name else gfx
    observed = (f"GPU {index}: {gpu}; {who} carries {carries}"
                + ("; the first GPU op failed" if failed else ""))
    others = [f"{n or g}" for i, g, n in ((i, g, n) for i, (g, n) in enumerate(agents))
              if i != index]
    hide = (f" HIP_VISIBLE_DEVICES={index}" if others else "")
    rule = next((r for r in kb["rocm_overrides"] if gfx.startswith(r["family"])), None)
    severity = "error" if (failed or arch) else "warning"
    newer = _newer_wheels(gfx, probe, kb) if probe is not None else None
    # an override to the GPU's own target poses as nothing: the build itself lacks it
    own = rule is not None and _own_target(rule["override"]) == gfx
    if newer is not None and (rule is None or rule.get("unreliable") or own):
        return [Finding(
            "rocm.gfx-not-in-build", severity, f"{who} has no kernels for this AMD GPU ({gfx})",
            observed=observed,
            why=(f"{gfx} kernels are in PyTorch's ROCm {newer['rocm']} wheels and later, not in "
                 f"this ROCm {str(probe.build.get('hip_version') or '?')[:3]} build; posing as "
                 "another target (HSA_OVERRIDE_GFX_VERSION) does not fit this GPU."),
            fix=(f"pip install -U {newer['torch']} --index-url "
                 f"https://download.pytorch.org/whl/rocm{newer['rocm']}"),
            source=newer["source"])]
    if rule is None or rule.get("unreliable"):
        src = kb["rocm_from_source"]
        extra = (f"; HSA_OVERRIDE_GFX_VERSION={rule['override']} only for a quick try"
                 if rule else "")
        why = (f"No release build carries {gfx}, and posing as {rule['override']} is not "
               f"reliable: {rule['unreliable']}." if rule else
               f"No {gfx[:6]}x target is in the ROCm builds, so there is no sibling to pose "
               "as; GPU ops fail with 'invalid device function'.")
        return [Finding("rocm.gfx-not-in-build", severity,
                        f"{who} has no kernels for this AMD GPU ({gfx})",
                        observed=observed, why=why, fix=src["fix"].format(gfx=gfx) + extra,
                        source=(rule or src)["source"])]
    why = (f"ROCm builds carry kernels for a few targets per family; {gfx} runs the "
           f"{rule['family']}x family's supported target's kernels when told to pose as it "
           "with HSA_OVERRIDE_GFX_VERSION, which is not set in this program's environment "
           "(a shell variable that is not exported does not count)"
           + (f"; the other GPU ({', '.join(others)}) is hidden so the override fits one "
              "GPU" if others else "") + ".")
    return [Finding("rocm.gfx-not-in-build", severity,
                    f"{who} has no kernels for this AMD GPU ({gfx})",
                    observed=observed, why=why,
                    fix=f"export HSA_OVERRIDE_GFX_VERSION={rule['override']}{hide}  "
                        "# before the program starts",
                    source=rule["source"])]


def check_override_masks_all(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """HSA_OVERRIDE_GFX_VERSION set on a machine with several AMD GPUs: it applies to each."""
    value = snap.env_vars.get("HSA_OVERRIDE_GFX_VERSION")
    agents = amd_agents(snap)
    if not value or len(agents) < 2:
        return []
    names = ", ".join(f"{n or '?'} ({g})" for g, n in agents)
    return [Finding(
        "rocm.override-all-gpus", "warning",
        f"HSA_OVERRIDE_GFX_VERSION={value} makes every AMD GPU report one target",
        observed=f"{len(agents)} AMD GPUs under the override: {names}",
        why="The override applies to all GPU agents of the process, so a GPU of another "
            "family runs kernels built for the wrong target (wrong names in rocminfo, "
            "crashes or a silent CPU fallback); it was meant for one unsupported card.",
        fix="unset HSA_OVERRIDE_GFX_VERSION  # and remove it from ~/.bashrc; for one GPU "
            "only: HSA_OVERRIDE_GFX_VERSION_<n>=<x.y.z> (ROCm 6.2+), or hide the other with "
            "HIP_VISIBLE_DEVICES",
        source=kb["rocm"]["override_source"])]


def check_kfd_permission(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """The ROCm runtime cannot open /dev/kfd: the user is not in the render/video groups."""
    err = snap.host.rocm_error
    if "/dev/kfd" not in err:
        return []
    return [Finding(
        "rocm.kfd-permission", "error",
        "The ROCm runtime cannot open /dev/kfd: no AMD GPU is usable",
        observed=f"rocminfo: {err}",
        why="ROCm talks to the GPU through /dev/kfd and /dev/dri, which belong to the render "
            "and video groups; a user (or a container) outside them sees no GPU at all.",
        fix="sudo usermod -aG render,video $USER, then log in again  # in a container: "
            "--device=/dev/kfd --device=/dev/dri --group-add with this host's GIDs "
            "(getent group render video)",
        source=kb["rocm"]["kfd_source"])]


def check_torch_not_rocm(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """An AMD GPU, no NVIDIA one, and a PyTorch that is a CUDA or CPU build."""
    probe = snap.frameworks.get("torch")
    if not amd_agents(snap) or has_nvidia_gpu(snap) or probe is None or _rocm_torch(snap):
        return []
    if _missing_rocm_lib(probe, kb):
        return []  # a ROCm build whose ROCm libraries are not found: rocm.libs-not-on-path
    kind = "a CUDA build" if probe.build.get("is_cuda_build") else "a CPU build"
    py = ".".join(snap.host.python_version.split(".")[:2])
    need = kb["rocm"]["torch_min_python"]
    first = (f"use a Python >= {need} (ROCm wheels are built for it), then: "
             if py and not matches(py, f">={need}") else "")
    gfx = ", ".join(g for g, _ in amd_agents(snap))
    only_igpu = all(_integrated(g, n, kb) for g, n in amd_agents(snap))
    return [Finding(
        "rocm.torch-not-rocm", "warning" if only_igpu else "error",
        f"PyTorch {probe.version or snap.version_of('torch')} is {kind}, not a ROCm build: "
        "it cannot use the AMD GPU",
        observed=f"AMD GPU ({gfx}) in rocminfo; torch {probe.version} built for "
                 + (f"CUDA {probe.build.get('cuda_version')}" if kind == "a CUDA build"
                    else "the CPU"),
        why="PyPI's torch wheels are CUDA (Linux) or CPU builds; AMD GPUs need the ROCm "
            "build from PyTorch's ROCm index (pip falls back to PyPI silently when that index "
            "has no wheel for the Python in use).",
        fix=first + "pip install --force-reinstall torch --index-url "
            f"https://download.pytorch.org/whl/{kb['rocm']['torch_index']}",
        source=kb["rocm"]["source"])]


def check_jax_not_rocm(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A discrete AMD GPU in rocminfo, no NVIDIA one, and a JAX that lists no GPU with no ROCm
    plugin (jax-rocm*-plugin) and no ROCm-built jaxlib (``+rocm``): JAX runs on the CPU.

    Silent when a ROCm plugin or ROCm jaxlib is installed (its failures are other checks'),
    when JAX lists a GPU, or when the AMD GPU is an integrated one only.
    """
    info = kb["rocm_jax"]
    probe = snap.frameworks.get("jax")
    agents = amd_agents(snap)
    if not snap.has("jax") or not agents or has_nvidia_gpu(snap):
        return []
    if all(_integrated(g, n, kb) for g, n in agents):
        return []
    if any(d.startswith(info["plugin_prefix"]) for d in snap.distributions) \
            or "+rocm" in snap.version_of("jaxlib"):
        return []
    if probe is not None and any(d.kind == "GPU" for d in probe.physical_devices):
        return []
    gpus = ", ".join(f"{n or g} ({g})" for g, n in agents if not _integrated(g, n, kb))
    devices = (", ".join(d.name for d in probe.physical_devices) or "none") if probe else "?"
    return [Finding(
        "rocm.jax-no-plugin", "error",
        f"JAX {snap.version_of('jax')} has no ROCm plugin: it cannot use the AMD GPU",
        observed=f"AMD GPU {gpus} in rocminfo; jax {snap.version_of('jax')}, jaxlib "
                 f"{snap.version_of('jaxlib') or '?'}, no jax-rocm*-plugin installed; "
                 f"JAX devices: {devices}",
        why="PyPI's jaxlib is a CPU build; JAX reaches AMD GPUs through the separate ROCm "
            "PJRT plugin (jax-rocm60-plugin / jax-rocm7-plugin with its -pjrt half, matching "
            "the jax release), which 'pip install jax' does not bring (the rocm extra exists "
            "only in some releases, and pip merely warns when it is missing).",
        fix=info["fix"].format(jax=snap.version_of("jax")),
        source=info["source"])]


def check_wsl_rocm(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """PyTorch's ROCm wheels under WSL without a GPU: WSL needs AMD's WSL builds."""
    out = _wsl_rocm_distro(snap, kb)
    probe = _rocm_torch(snap)
    if not snap.host.wsl or probe is None or any(
            d.kind == "GPU" for d in probe.physical_devices):
        return out
    return out + [Finding(
        "rocm.wsl-wheels", "error",
        "PyTorch's ROCm wheels do not reach the GPU under WSL",
        observed=f"WSL; torch {probe.version} (a ROCm build) lists no GPU",
        why="Under WSL the GPU is reached through AMD's WSL runtime, not the Linux kernel "
            "driver; the ROCm wheels from download.pytorch.org bundle a libhsa-runtime64 that "
            "cannot find it (hipErrorNoDevice).",
        fix=kb["rocm"]["wsl_fix"], source=kb["rocm"]["wsl_source"])]


def _wsl_rocm_distro(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """ROCm (rocminfo ran, or failed) under WSL 2 in a distribution AMD's WSL build lacks."""
    distros = kb["rocm"].get("wsl_distros", [])
    if not snap.host.wsl or not (snap.host.amd_agents or snap.host.rocm_error) or not distros:
        return []
    name = snap.host.os_version
    if any(name.startswith(d) for d in distros):
        return []
    return [Finding(
        "rocm.wsl-distro-unsupported", "error" if snap.host.rocm_error else "warning",
        f"ROCm under WSL runs on {' and '.join(distros)} only, not {name.split(' (')[0] or '?'}",
        observed=f"WSL 2, {name or 'unknown distribution'}"
                 + (f"; rocminfo: {snap.host.rocm_error}" if snap.host.rocm_error else ""),
        why="AMD ships ROCm's WSL runtime (the one that reaches the GPU through Windows' "
            "driver) for these distributions only; in another one rocminfo and the frameworks "
            "fail to find or use the GPU.",
        fix=f"install ROCm in an {distros[0]} WSL distribution (wsl --install -d "
            f"Ubuntu-{distros[0].split()[-1]}) following AMD's ROCm-on-WSL guide",
        source=kb["rocm"]["wsl_distros_source"])]


def check_wsl1(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """WSL 1: no GPU access at all; CUDA and ROCm need WSL 2."""
    if snap.host.wsl_version != 1:
        return []
    gpu_build = any(p.build.get("is_cuda_build") or p.build.get("is_rocm_build")
                    for p in snap.frameworks.values())
    return [Finding(
        "host.wsl1", "error" if gpu_build else "warning",
        "This is WSL 1, which has no GPU access",
        observed=f"Linux kernel {snap.host.os_version or '?'}: a WSL 1 distribution",
        why="Only WSL 2 (a real Linux kernel with the GPU paravirtualised) exposes the GPU; "
            "under WSL 1 every framework runs on the CPU.",
        fix="convert the distribution to WSL 2 from Windows: wsl --set-version <distro> 2 "
            "(wsl -l -v lists them), then install the GPU framework inside it",
        source=kb["wsl1"]["source"])]


def _missing_rocm_lib(probe: FrameworkProbe | None, kb: KB) -> str:
    """The ROCm library a framework's import could not open ("" when none)."""
    if probe is None:
        return ""
    text = "\n".join([probe.error, *probe.messages, probe.said])
    names = "|".join(re.escape(s) for s in kb["rocm_sdk_wheels"]["sonames"])
    m = re.search(rf"((?:{names})[\w.+-]*\.so[.\d]*): cannot open shared object file", text)
    return m[1] if m else ""


def check_rocm_libs_not_on_path(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """PyTorch's import fails because a ROCm library it links (libamdhip64, libMIOpen,
    rocBLAS ...) is not found: the build is a ROCm build whose ROCm is not on the loader's
    path. With TheRock's rocm-sdk wheels installed, the libraries are in their site-packages
    directories, which the loader does not search.

    Silent when the import works or the missing library is not a ROCm one.
    """
    info = kb["rocm_sdk_wheels"]
    probe = snap.frameworks.get("torch")
    lib = _missing_rocm_lib(probe, kb)
    if not lib:
        return []
    py = ".".join(snap.host.python_version.split(".")[:2])
    site = f"{snap.host.python_prefix or '<prefix>'}/lib/python{py}/site-packages"
    targets = sorted(d[len(info["libraries_prefix"]):] for d in snap.distributions
                     if d.startswith(info["libraries_prefix"]))
    if snap.has(info["core_dist"]) or targets:
        dirs = [f"{site}/{info['libraries_dir'].format(target=t)}" for t in targets]
        dirs.append(f"{site}/{info['core_dir']}")
        where = ("TheRock's rocm-sdk wheels ("
                 + ", ".join(f"{d} {snap.version_of(d)}" for d in sorted(snap.distributions)
                             if d.startswith("rocm-sdk")) + ") put the ROCm libraries in "
                 + " and ".join(dirs) + ", which the dynamic loader does not search")
        fix = ("export LD_LIBRARY_PATH=" + ":".join(dirs) + "${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
               "  # e.g. in the environment's bin/activate; or a torch wheel that preloads "
               "them (the rocm-sdk-built torch from the same index)")
    else:
        where = ("this torch build links against a system ROCm that is not on the loader's "
                 "path (or not installed)")
        fix = (f"export LD_LIBRARY_PATH={info['system_dir']}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"
               "  # the ROCm release the build was made for; or install PyTorch's own ROCm "
               "wheel, which bundles its ROCm libraries")
    return [Finding(
        "rocm.libs-not-on-path", "error",
        f"PyTorch is a ROCm build whose ROCm library {lib} the loader cannot find",
        observed=f"import torch {snap.version_of('torch')} failed: {lib}: cannot open shared "
                 "object file",
        why=f"The torch build links against ROCm's libraries ({lib} among them); {where}, so "
            "the import fails before torch can use the GPU.",
        fix=fix, source=info["source"])]
