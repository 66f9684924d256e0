"""How the pieces of an install fit the machine, as knowledge data: Windows DLLs a framework
failed to load, CUDA libraries on LD_LIBRARY_PATH that shadow the nvidia-* wheels' copies,
JAX plugin releases and the jax/jaxlib and macOS they work with, the driver's libcuda on
WSL2, the oldest GPU a framework's wheels run on, and the CUDA variant of PyTorch a driver
can run."""

from __future__ import annotations

import os
import re

from devicebench.env.checks._util import (
    DISPLAY,
    KB,
    as_version,
    at_least,
    fmt_mm,
    has_nvidia_gpu,
    major_minor,
    matches,
)
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

# What TF/XLA/JAX log when libcuda.so.1 cannot be loaded (tsl/cuda/cudart_stub.cc, jax).
_NO_DRIVER = re.compile(r"Could not find cuda drivers|Unable to load CUDA|libcuda\.so")
# distributions that use the CUDA driver without a framework the probe imports (cuML, numba)
_CUDA_DIST = re.compile(r"cuda|-cu\d+$|^cu(?:ml|df|py|graph|spatial)|^numba|^rapids")


def torch_cuda_index(snap: EnvSnapshot, kb: KB, torch_version: str) -> str:
    """The newest CUDA variant of PyTorch's wheels for ``torch_version``'s release that this
    machine's driver supports (``"cu118"``), or ``""`` when unknown.

    A driver runs every CUDA minor release of a major it supports from the family's minimum
    driver on (minor-version compatibility); nvidia-smi's "CUDA Version" is the newest it runs.
    """
    smi = snap.nvidia_smi
    table = kb["torch_cuda_indexes"]
    variants = table.get(fmt_mm(major_minor(torch_version))) or table[max(
        (k for k in table if k != "source"), key=as_version)]
    if smi is None or not smi.driver_version:
        return ""
    key = "min_driver_windows" if snap.host.os == "Windows" else "min_driver_linux"
    best = ""
    for index in variants:
        cuda = f"{index[2:-1]}.{index[-1]}"
        fam = next((f for f in kb["cuda"]["families"] if f["major"] == major_minor(cuda)[0]),
                   None)
        if fam is None or not at_least(smi.driver_version, fam.get(key, fam["min_driver_linux"])):
            continue
        if smi.cuda_version and major_minor(cuda)[0] > major_minor(smi.cuda_version)[0]:
            continue
        best = index
    return best


def check_windows_dll_load(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A framework's import failed on Windows because one of its DLLs did not load."""
    out = []
    for name, probe in snap.frameworks.items():
        said = probe.reported.get("dll_load_failed")
        if not said:
            continue
        v = probe.version or snap.version_of(name)
        known = next((d for d in kb["windows_dlls"] if d["dist"] == name
                      and d["dll"].lower() in (said["dll"].lower(), "*")
                      and d.get("path_has", "").lower() in said["path"].lower()
                      and matches(v, d["when"])), None)
        general = kb["windows_dll_general"]
        index = torch_cuda_index(snap, kb, v) if name == "torch" and "+cpu" not in v else ""
        index_arg = f" --index-url https://download.pytorch.org/whl/{index}" if index else ""
        if known:
            why, fix, source = known["why"], known["fix"].format(index=index_arg), known["source"]
            title = (f"{DISPLAY.get(name, name)} {v} cannot load {said['dll']}: it needs "
                     f"{known['needs']}")
        else:
            why = general["why_init"] if said["code"] == 1114 else general["why"]
            fix, source = general["fix"], general["source"]
            title = (f"{DISPLAY.get(name, name)} cannot load {said['dll']}"
                     + (f" (WinError {said['code']})" if said["code"] else ""))
        code = f"WinError {said['code']}" if said["code"] else "a DLL error"
        out.append(Finding(
            "windows.dll-load-failed", "error", title,
            observed=f"import {name} failed: {code} loading {said['path']}",
            why=why + ".", fix=fix, source=source))
    return out


def wheel_libs_of_distributions(snap: EnvSnapshot, kb: KB) -> dict[str, str]:
    """The CUDA libraries the installed nvidia-* wheels carry, by distribution
    (``[nvidia_wheel_sonames]``), where their site-packages files were not listed."""
    table = kb.get("nvidia_wheel_sonames", {})
    py = ".".join(snap.host.python_version.split(".")[:2])
    site = f"{snap.host.python_prefix or '<prefix>'}/lib/python{py}/site-packages/nvidia"
    out = {}
    for dist, (directory, *sonames) in ((d, v) for d, v in table.items() if d != "source"):
        if not snap.has(dist):
            continue
        major = (snap.version_of(dist) or "9").split(".")[0]
        for so in sonames:
            so = so.replace("{major}", major)
            out[so] = f"{site}/{directory}/lib/{so}"
    return out


def check_ld_path_shadow_risk(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """LD_LIBRARY_PATH holds CUDA libraries that installed nvidia-* wheels also carry: the
    loader takes LD_LIBRARY_PATH's copy first, so the framework runs with libraries it was
    not built with (crashes, undefined symbols, libraries that 'cannot be found')."""
    wheel_libs = snap.wheel_cuda_libs or wheel_libs_of_distributions(snap, kb)
    if snap.host.os != "Linux" or not wheel_libs:
        return []
    if any(p.reported.get("undefined_symbol") for p in snap.frameworks.values()):
        return []  # cuda.lib-shadowed-by-ld-library-path says it with the symbol
    both = {so: path for so, path in snap.ld_path_cuda_libs.items()
            if so in wheel_libs and path != wheel_libs[so]}
    if not both:
        return []
    ld_dirs = [d for d in snap.env_vars.get("LD_LIBRARY_PATH", "").split(":") if d]
    bad = sorted({os.path.dirname(p).rstrip("/") for p in both.values()})
    keep = ":".join(d for d in ld_dirs if d.rstrip("/") not in bad)
    said = [f"{DISPLAY.get(n, n)}: {m}" for n, p in snap.frameworks.items() for m in p.messages
            if "cuSPARSE" in m or "cuDNN" in m or "cuBLAS" in m][:2]
    return [Finding(
        "cuda.ld-library-path-shadows-wheels", "warning",
        "LD_LIBRARY_PATH puts the system's CUDA libraries ahead of the nvidia-* wheels' copies",
        observed=f"LD_LIBRARY_PATH={':'.join(ld_dirs)} holds " + ", ".join(
            f"{so} ({both[so]})" for so in sorted(both)) + "; the wheels carry their own ("
        + ", ".join(sorted({os.path.dirname(wheel_libs[so]) for so in both})) + ")"
        + ("" if snap.wheel_cuda_libs else " (by the installed nvidia-* distributions)")
        + (f"; {'; '.join(said)}" if said else ""),
        why="The loader searches LD_LIBRARY_PATH before a library's own RUNPATH, so the "
            "framework loads the system CUDA's copies, of another release than the wheels it "
            "was built and tested with: segfaults, undefined symbols, or 'Unable to load' "
            "errors at the first GPU op.",
        fix=(f"export LD_LIBRARY_PATH={keep}  # drop {', '.join(bad)}" if keep
             else "unset LD_LIBRARY_PATH") + "  (before starting Python)",
        source="https://github.com/pytorch/pytorch/issues/121222 ; "
               "https://github.com/pytorch/pytorch/issues/111469")]


def jax_plugin_for(snap: EnvSnapshot, kb: KB, backend: str = "") -> dict | None:
    """The KB entry of the installed JAX plugin (by the backend name JAX printed, if any)."""
    for plugin in kb["jax_plugins"]:
        if backend and plugin["backend"].lower() != backend.lower():
            continue
        if snap.has(plugin["dist"]):
            return plugin
    return None


def plugin_release_known(snap: EnvSnapshot, plugin: dict) -> bool:
    """Whether the KB lists the jaxlib the installed release of ``plugin`` works with."""
    have = as_version(snap.version_of(plugin["dist"]))
    return any(as_version(r["version"]) == have and r.get("jaxlib")
               for r in plugin.get("releases", []))


def check_jax_plugin_release(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A JAX plugin released apart from jaxlib (jax-metal, Intel's XPU plugin) with a
    jax/jaxlib or a macOS outside what its release works with (``[[jax_plugins]]``)."""
    out = []
    for plugin in kb["jax_plugins"]:
        have = snap.version_of(plugin["dist"])
        rel = next((r for r in plugin.get("releases", [])
                    if as_version(r["version"]) == as_version(have)), None)
        if plugin.get("lockstep") or rel is None:
            continue
        dist = plugin["dist"]
        mac = snap.host.macos_version
        if rel.get("macos") and snap.host.os == "Darwin" and mac and not matches(mac, rel["macos"]):
            older = [r for r in plugin["releases"] if r.get("macos") and matches(mac, r["macos"])]
            alt = f"pip install '{dist}=={older[-1]['version']}'  # the last for this macOS; " \
                  if older else ""
            out.append(Finding(
                "plugin.macos-too-old", "error",
                f"{dist} {have} needs macOS {rel['macos'].lstrip('>=')} or newer",
                observed=f"macOS {mac}; {dist} {have} supports macOS {rel['macos']}",
                why=f"{dist} is built against the Metal frameworks of a newer macOS; on this "
                    "macOS its backend fails at the first computation.",
                fix=alt + f"or upgrade macOS to {rel['macos'].lstrip('>=')}",
                source=rel.get("source", plugin["source"])))
            continue
        bad = [(d, snap.version_of(d)) for d in ("jax", "jaxlib")
               if rel.get("jaxlib") and snap.version_of(d)
               and not matches(snap.version_of(d), rel.get(d, rel["jaxlib"]))]
        if not bad:
            continue
        out.append(Finding(
            "stack.release-skew", "error",
            f"{dist} {have} does not work with the installed "
            + " / ".join(f"{d} {v}" for d, v in bad),
            observed=f"{dist} {have} works with jaxlib {rel['jaxlib']}"
                     + (f", jax {rel['jax']}" if rel.get("jax") else "") + "; installed: "
                     + ", ".join(f"{d} {v}" for d, v in bad),
            why=f"{dist} is a PJRT plugin built for particular jaxlib releases (it is not "
                "released with jaxlib); with another jaxlib JAX cannot initialise its backend "
                "('Mismatched PJRT plugin PJRT API version') or its computations fail.",
            fix=f"pip install 'jax=={rel['pin']}' 'jaxlib=={rel['pin']}'  "
                f"# or pip uninstall {dist} and run JAX on the CPU",
            source=rel.get("source", plugin["source"])))
    return out


def check_wsl_libcuda(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """WSL2: the Windows driver's libcuda (in /usr/lib/wsl/lib) is not on the loader's path,
    so every framework reports 'could not find cuda drivers' -- or a Linux driver installed
    inside WSL2 put its own libcuda ahead of it (cuInit then finds no device)."""
    if not snap.host.wsl:
        return []
    found, d = snap.loader_finds("libcuda.so.1"), kb["wsl"]["libcuda_dir"].rstrip("/")
    if found and not found.startswith(d + "/"):
        return _wsl_linux_driver(snap, kb, found, d)
    if found:
        return []
    if snap.system_cuda_libs.get("libcuda.so.1"):
        return []
    no_gpu = [DISPLAY.get(n, n) for n, p in snap.frameworks.items()
              if p.status == "ok" and not p.gpu_devices]
    said = any(_NO_DRIVER.search(m) for p in snap.frameworks.values() for m in p.messages)
    if not no_gpu or not (has_nvidia_gpu(snap) or said):
        return []
    d = kb["wsl"]["libcuda_dir"]
    return [Finding(
        "wsl.libcuda-not-on-path", "error" if has_nvidia_gpu(snap) else "warning",
        f"WSL2: the driver's libcuda.so.1 ({d}) is not on the loader's path",
        observed=f"kernel {snap.host.os_version}; libcuda.so.1 is neither in ldconfig's cache "
                 f"nor in LD_LIBRARY_PATH={snap.env_vars.get('LD_LIBRARY_PATH', '') or 'unset'}"
                 f"; {', '.join(no_gpu)} see no GPU",
        why="On WSL2 the NVIDIA driver lives on the Windows side and is exposed to Linux as "
            f"{d}; without it on the loader's path CUDA cannot initialise (a CUDA toolkit "
            "installed inside WSL2 does not provide it).",
        fix=f"export LD_LIBRARY_PATH={d}:$LD_LIBRARY_PATH  # or: sudo ldconfig "
            "(/etc/ld.so.conf.d/ld.wsl.conf lists it)",
        source=kb["wsl"]["source"])]


def _wsl_linux_driver(snap: EnvSnapshot, kb: KB, found: str, d: str) -> list[Finding]:
    """The loader's libcuda.so.1 on WSL2 is not WSL's: a Linux NVIDIA driver was installed
    inside the distribution (NVIDIA's WSL guide: never install one there)."""
    if any(p.gpu_devices for p in snap.frameworks.values()):
        return []  # a framework reached the GPU through it: the loader's order is not at fault
    no_gpu = [DISPLAY.get(n, n) for n, p in snap.frameworks.items()
              if p.status == "ok" and not p.gpu_devices]
    failed = [DISPLAY.get(n, n) for n, p in snap.frameworks.items() if p.status != "ok"]
    cuda = sorted(n for n in snap.distributions if _CUDA_DIST.search(n))
    seen = "; ".join(filter(None, [
        f"{', '.join(no_gpu)} see no GPU" if no_gpu else "",
        f"{', '.join(failed)} failed" if failed else "",
        "no framework the probe imports is installed" + (
            f" (CUDA packages here: {', '.join(cuda)})" if cuda else "")
        if not snap.frameworks else ""]))
    return [Finding(
        "wsl.linux-driver-libcuda",
        "error" if snap.frameworks or cuda or has_nvidia_gpu(snap) else "warning",
        f"WSL2: the loader finds a Linux driver's libcuda.so.1 ({found}), not WSL's ({d})",
        observed=f"kernel {snap.host.os_version}; libcuda.so.1 resolves to {found}; {seen}",
        why="Under WSL2 the only working libcuda is the one the Windows driver exposes in "
            f"{d}; a libcuda from a Linux NVIDIA driver package installed inside WSL2 cannot "
            "reach the GPU (cuInit: no CUDA-capable device), and the loader takes it first.",
        fix="sudo apt-get purge 'nvidia-driver-*' 'libnvidia-compute-*' && sudo ldconfig  # "
            f"remove the Linux driver inside WSL2; meanwhile: export LD_LIBRARY_PATH={d}:"
            "$LD_LIBRARY_PATH",
        source=kb["wsl"]["source"])]


def check_gpu_min_compute(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """An NVIDIA GPU older than the oldest a framework's released wheels run on."""
    if not has_nvidia_gpu(snap) or snap.nvidia_smi is None:
        return []
    out = []
    for name, minimum in kb["gpu_min_compute"].items():
        if name.endswith("_source") or not (snap.has(name) or name in snap.frameworks):
            continue
        if name == "jax" and "cuda" not in snap.version_of("jaxlib") and not any(
                d.startswith("jax-cuda") for d in snap.distributions):
            continue  # a CPU-only jaxlib does not try the GPU
        old = [g for g in snap.nvidia_smi.gpus if g.compute_capability
               and as_version(g.compute_capability) < as_version(minimum)]  # type: ignore[operator]
        for g in old:
            out.append(Finding(
                "gpu.below-framework-minimum", "error",
                f"{DISPLAY.get(name, name)}'s wheels do not run on the {g.name} (compute "
                f"capability {g.compute_capability})",
                observed=f"{g.name}: compute capability {g.compute_capability}; "
                         f"{DISPLAY.get(name, name)} {snap.version_of(name)} needs {minimum} "
                         "or newer",
                why="Its CUDA wheels carry no kernels for GPUs that old; the GPU backend fails "
                    "to initialise or its first op fails.",
                fix=f"use a GPU of compute capability >= {minimum}, run on the CPU, or build "
                    f"{name}lib from source for compute capability {g.compute_capability}"
                    if name == "jax" else f"use a GPU of compute capability >= {minimum}",
                source=kb["gpu_min_compute"][f"{name}_source"]))
    for row in kb.get("gpu_min_compute_release", []):  # a package's own kernels (round 17)
        have = snap.version_of(row["dist"])
        if not have or not matches(have, row["when"]):
            continue
        for g in snap.nvidia_smi.gpus:
            if g.compute_capability and not at_least(g.compute_capability, row["min"]):
                out.append(Finding(
                    "gpu.below-package-minimum", "error",
                    f"{row['dist']} {have}'s CUDA kernels do not run on the {g.name} (compute "
                    f"capability {g.compute_capability}; it needs {row['min']} or newer)",
                    observed=f"{g.name}: compute capability {g.compute_capability}; "
                             f"{row['dist']} {have} installed",
                    why="Its prebuilt kernels are compiled only for newer GPUs, so its own ops "
                        "fail ('no kernel image is available') even where the framework runs.",
                    fix=f"use a GPU of compute capability >= {row['min']}, or {row['build']}",
                    source=row["source"]))
    return out


def _cudnn_major(version: int) -> int:
    """cuDNN's version number as frameworks report it: 8902 (8.9.2), 90100 (9.1.0)."""
    return version // 10000 if version >= 10000 else version // 1000


def check_loader_needs(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A component that loads CUDA libraries by name from the loader's path (CTranslate2, cuDNN
    8's libcudnn_cnn_infer needing the unversioned libcuda.so on WSL2) where the loader does
    not find them, though a copy may sit elsewhere in the environment."""
    if snap.host.os != "Linux":
        return []
    copies = {**snap.env_cuda_libs, **snap.wheel_cuda_libs}
    out = []
    for entry in kb.get("loader_needs", []):
        if entry.get("wsl") and not snap.host.wsl:
            continue
        if "dist" in entry:
            v = snap.version_of(entry["dist"])
            if not v or not matches(v, entry["when"]):
                continue
            who = f"{entry['dist']} {v}"
        elif "framework" in entry:
            probe = snap.frameworks.get(entry["framework"])
            cudnn = str((probe.build or {}).get("cudnn_version") or "") if probe else ""
            # the loader's cache was read (it lists the versioned libcuda.so.1) and the
            # framework reports the cuDNN major its libraries belong to
            if (not cudnn.isdigit() or _cudnn_major(int(cudnn)) != entry["cudnn_major"]
                    or not snap.loader_finds("libcuda.so.1")):
                continue
            who = (f"{DISPLAY.get(entry['framework'], entry['framework'])} "
                   f"{probe.version or snap.version_of(entry['framework'])} (its cuDNN "
                   f"{entry['cudnn_major']})")
        elif entry["lib"] in copies or snap.loader_finds(entry["lib"]):
            who = entry["lib"]
        else:
            continue
        lost = [so for so in entry["needs"] if not snap.loader_finds(so)]
        if not lost:
            continue
        found = {so: copies[so] for so in lost if so in copies}
        dirs = sorted({os.path.dirname(p) for p in found.values()}
                      | ({entry["where"]} if entry.get("where") else set()))
        missing = [so for so in lost if so not in found and not entry.get("where")]
        fix = ("export LD_LIBRARY_PATH=" + ":".join(dirs) + "${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
               "  # before starting Python" if dirs else "")
        if missing and entry.get("install"):
            fix = (fix + "; and: " if fix else "") + entry["install"] + \
                "  # then add their nvidia/*/lib directories to LD_LIBRARY_PATH"
        out.append(Finding(
            "cuda.loader-cannot-find", "warning",
            f"{who} loads {', '.join(lost)} by name, and the loader does not find "
            + ("them" if len(lost) > 1 else "it"),
            observed="; ".join(f"{so}: " + (f"a copy at {found[so]}, not on the loader's path"
                                           if so in found else
                                           (f"in {entry['where']}, not on the loader's path"
                                            if entry.get("where") else "not installed"))
                               for so in lost),
            why="It dlopens the library by its name, so only ldconfig's cache and "
                "LD_LIBRARY_PATH count, not copies inside other wheels; the first GPU op that "
                "needs it fails ('Could not load library ...' / 'cannot open shared object "
                "file').",
            fix=fix, source=entry["source"]))
    return out


def check_platform_ceiling(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A platform whose last wheels of a framework are an old release (Intel Macs: torch 2.2.2)
    and the framework absent -> warning naming it (and the first without), with a Python and
    NumPy it installs with; Rosetta on Apple Silicon is env.rosetta's."""
    out: list[Finding] = []
    for entry in kb.get("platform_ceilings", []):
        if snap.host.os != entry["os"] or snap.host.machine != entry["machine"]:
            continue
        if snap.host.rosetta or snap.has(entry["framework"]):
            continue
        if entry.get("alone") and any(snap.has(d) for d in ("torch", "tensorflow", "jax")):
            continue  # said only where no framework is installed
        name = DISPLAY.get(entry["framework"], entry["framework"])
        pins = f"'{entry['framework']}=={entry['last']}'"
        numpy = snap.version_of("numpy")
        if entry.get("numpy") and numpy and not matches(numpy, entry["numpy"]):
            pins += f" 'numpy{entry['numpy']}'"
        fix = f"pip install {pins}"
        py = snap.host.python_version
        if py and not matches(py, entry["python"]):
            fix = (f"python3.12 -m venv .venv && . .venv/bin/activate && {fix}  # {name} "
                   f"{entry['last']} has wheels for Python {entry['python']}, not {py}")
        out.append(Finding(
            "platform.last-release",
            "warning", f"{name} stopped publishing wheels for {entry['what']} after "
            f"{entry['last']}" + (f": {entry['first_without']} and later have none"
                                  if entry.get("first_without") else ""),
            observed=(f"{snap.host.os} {snap.host.machine} (not Rosetta), Python {py or '?'}; "
                      f"{entry['framework']} not installed"),
            why=(f"pip finds no {name} newer than {entry['last']} for {snap.host.machine} "
                 f"macOS: 'No matching distribution' for a newer pin is the platform, not the "
                 "index. Newer releases need an arm64 Mac, another machine, or a source build."),
            fix=fix, source=entry["source"]))
    return out


_MACOSX_TAG = re.compile(r"macosx_(\d+)_(\d+)_")


def check_wheel_newer_than_os(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A binary wheel whose platform tag names a newer macOS than this Mac runs -> error.

    pip never picks such a wheel for this OS, so it came another way (bundled with an app,
    downloaded with --platform, copied from another Mac); its binaries use the newer OS's
    frameworks (MLX's macOS 26 wheels carry a Metal-4 metallib that macOS 15 cannot load)."""
    host = major_minor(snap.host.macos_version)
    if snap.host.os != "Darwin" or not host:
        return []
    out: list[Finding] = []
    for dist, tag in sorted(snap.wheel_platform_tags.items()):
        m = _MACOSX_TAG.match(tag)
        if not m or (int(m.group(1)), int(m.group(2))) <= host[:2]:
            continue
        built = f"{m.group(1)}.{m.group(2)}" if m.group(2) != "0" else m.group(1)
        version = snap.version_of(dist)
        pin = f"'{dist}=={version}'" if version else dist
        out.append(Finding(
            "platform.wheel-newer-than-os",
            "error",
            f"{dist} is a wheel built for macOS {built}; this Mac runs macOS "
            f"{snap.host.macos_version}",
            observed=f"{dist} {version or '?'}: wheel tag {tag}; macOS {snap.host.macos_version}",
            why=(f"A wheel tagged for macOS {built} uses that OS's frameworks (MLX's macOS 26 "
                 "builds carry a Metal language 4.0 metallib: 'not supported on this OS'). pip "
                 "never selects it for an older macOS, so it was bundled with an app, copied or "
                 "downloaded with --platform."),
            fix=(f"pip install --force-reinstall --no-cache-dir {pin}  # pip picks the wheel for "
                 f"macOS {host[0]}; or upgrade to macOS {built}"),
            source=kb["platform_wheels"]["source"],
        ))
    return out
