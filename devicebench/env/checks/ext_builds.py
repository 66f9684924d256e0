"""How compiled packages the probe does not import were built, read from what it has
(issue 24, round 23).

* ``cuda.cuda-home-major-mismatch``: ``CUDA_HOME`` (set by the user, Linux) names a toolkit of
  another CUDA major than the probed torch's build. Every CUDA extension built on this machine
  (``pip install`` of an sdist, ``mim install mmcv``, ``setup.py install``) is compiled with
  that toolkit, and torch's extension builder refuses a major mismatch. Said where no known
  builder is installed yet (``cuda.extension-toolkit-major`` speaks where one is).
* ``build.arch-list-excludes-gpu``: ``TORCH_CUDA_ARCH_LIST`` / ``CUDA_ARCHITECTURES`` /
  ``TCNN_CUDA_ARCHITECTURES`` lists targets without this GPU's compute capability, beside a
  package that compiles CUDA kernels for those targets.
* ``extension.local-tag-other-torch``: a wheel whose local version names the torch it was
  built for (PyG's ``+pt24cu124``) beside another torch release, or beside a torch built
  from source (NGC's ``2.4.0a0+<commit>``) whose C++ ABI the prebuilt wheels do not match.
* ``conda.channel-mix``: a pytorch record of conda-forge's or defaults' build naming
  (``<variant>_py38h<hash>_<n>``) beside a companion (torchaudio, dgl ...) of the pytorch or
  dglteam channels' naming (``py38_cpu``, ``cu121_py311_0``): their C++ symbols do not match.
* ``jax.container-cuda-newer-than-driver``: jax's CUDA wheels (``nvidia-cuda-runtime-cuNN``)
  newer than the CUDA the host driver supports, while nvidia-smi shows a GPU that jax does
  not see.
"""

from __future__ import annotations

import re

from devicebench.env.checks._util import KB, major_minor, ok_probe
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

_CUDA_HOME = re.compile(r"cuda-(\d+)\.(\d+)")
_PT_TAG = re.compile(r"\+pt(\d)(\d+)cu(\d+)")
_FORGE_BUILD = re.compile(r"(^|_)(py\d+)?h[0-9a-f]{7}(_|$)")
_ARCH_VARS = ("TORCH_CUDA_ARCH_LIST", "CUDA_ARCHITECTURES", "TCNN_CUDA_ARCHITECTURES")


def _torch_cuda(snap: EnvSnapshot) -> str:
    probe = ok_probe(snap, "torch")
    return str(probe.build.get("cuda_version") or "") if probe is not None else ""


def check_cuda_home_major(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """CUDA_HOME of another CUDA major than torch's, no known builder installed -> warning.

    Example:
        >>> from devicebench.env.snapshot import HostInfo
        >>> kb = {"cuda_home_builders": {"dists": ["apex"], "torch_index": {"12": "cu121"},
        ...       "source": "s"}}
        >>> snap = EnvSnapshot(host=HostInfo(os="Linux"),
        ...                    env_vars={"CUDA_HOME": "/usr/local/cuda-12.0"})
        >>> check_cuda_home_major(snap, kb)  # no torch probed: nothing to compare
        []
    """
    entry = kb.get("cuda_home_builders", {})
    if snap.host.os != "Linux" or any(snap.has(d) for d in entry.get("dists", [])):
        return []
    m = _CUDA_HOME.search(snap.env_vars.get("CUDA_HOME", ""))
    built = _torch_cuda(snap)
    if not m or not built or m.group(1) == built.split(".")[0]:
        return []
    toolkit = f"{m.group(1)}.{m.group(2)}"
    index = entry.get("torch_index", {}).get(m.group(1), "")
    torch = snap.version_of("torch")
    return [Finding(
        "cuda.cuda-home-major-mismatch", "warning",
        f"CUDA_HOME's toolkit (CUDA {toolkit}) is another major than torch's CUDA ({built}): "
        "CUDA extensions cannot be built here",
        observed=f"CUDA_HOME={snap.env_vars['CUDA_HOME']}; torch {torch} built with CUDA "
                 f"{built}",
        why="Packages with CUDA extensions (mmcv through mim, kaolin, flash-attn, "
            "tiny-cuda-nn, gsplat, any sdist with CUDA sources) compile against the installed "
            "torch with the toolkit under CUDA_HOME; torch's extension builder refuses a "
            f"toolkit of another major (the detected CUDA version ({toolkit}) mismatches the "
            f"version that was used to compile PyTorch ({built})).",
        fix=(f"install a torch built for CUDA {m.group(1)}.x (pip install torch --index-url "
             f"https://download.pytorch.org/whl/{index}), or " if index else "")
            + f"point CUDA_HOME at a CUDA {built} toolkit (export "
              f"CUDA_HOME=/usr/local/cuda-{built}; PATH=$CUDA_HOME/bin:$PATH) before the build",
        source=entry.get("source", ""))]


def check_arch_list_excludes_gpu(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """An arch-list variable without this GPU's compute capability, beside a CUDA-kernel
    builder -> warning."""
    entry = kb.get("arch_list_builders", {})
    builders = [d for d in entry.get("dists", []) if snap.has(d)]
    caps = sorted({g.compute_capability for g in snap.nvidia_smi.gpus
                   if g.compute_capability}) if snap.nvidia_smi else []
    if not builders or not caps:
        return []
    out = []
    for var in _ARCH_VARS:
        value = snap.env_vars.get(var, "")
        listed = {t.replace(".", "").split("+")[0].lower().removeprefix("sm_")
                  for t in re.split(r"[;, ]+", value) if t}
        if not listed or "all" in listed or "native" in listed:
            continue
        missing = [c for c in caps if c.replace(".", "") not in listed]
        if not missing:
            continue
        want = ";".join(sorted(listed | {c.replace(".", "") for c in missing}))
        out.append(Finding(
            "build.arch-list-excludes-gpu", "warning",
            f"{var}={value} leaves out this GPU's compute capability {missing[0]}: "
            f"{builders[0]}'s kernels are not built for it",
            observed=f"{', '.join(f'{d} {snap.version_of(d)}' for d in builders)}; {var}="
                     f"{value}; GPU compute capability {', '.join(caps)}",
            why=f"{builders[0]} compiles its CUDA kernels for the targets {var} lists; a GPU "
                "outside them has no kernel image (\"no kernel image is available for "
                "execution on the device\") or falls back to slow JIT, while torch's own "
                "kernels still run.",
            fix=f"export {var}=\"{want}\" and rebuild {builders[0]} "
                f"(pip install --no-cache-dir --force-reinstall {builders[0]}); "
                + entry.get("fix", ""),
            source=entry.get("source", "")))
    return out


def check_local_tag_torch(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A wheel whose +ptXYcuZZZ tag names another torch, or any torch built from source."""
    entry = kb.get("torch_tagged_wheels", {})
    torch = snap.version_of("torch")
    have = major_minor(torch)
    if not have:
        return []
    probe = ok_probe(snap, "torch")
    # "2.4.0a0+<commit>": the version a torch built from source carries (NGC containers)
    source_build = any(re.search(r"\da0(\+|$)", v)
                       for v in (torch, probe.version if probe is not None else ""))
    out = []
    for dist, version in sorted(snap.distributions.items()):
        m = _PT_TAG.search(version)
        if not m:
            continue
        tagged = (int(m.group(1)), int(m.group(2)))
        if tagged == have[:2] and not source_build:
            continue
        tag = f"{tagged[0]}.{tagged[1]}"
        why = (f"torch {torch} is built from source (a pre-release version with a commit, as "
               "in NVIDIA's NGC containers): its C++ ABI is not the official release's, so "
               "wheels built for the official torch fail with undefined symbols"
               if tagged == have[:2] else
               f"the wheel was compiled against torch {tag}; another torch's C++ API leaves "
               "undefined symbols when its library loads")
        out.append(Finding(
            "extension.local-tag-other-torch", "warning",
            f"{dist} {version} was built for the official torch {tag}, not torch {torch}",
            observed=f"{dist} {version} beside torch {torch}",
            why=f"{dist}'s local version (+pt..cu..) names the torch and CUDA it was built "
                f"for; {why}. The probe imports torch only, which works; {dist} does not.",
            fix=(f"build {dist} from source against this torch: pip install --no-binary "
                 f"{dist} --no-build-isolation {dist}, or use the official torch from "
                 "download.pytorch.org that the wheel index names" if tagged == have[:2] else
                 f"install the {dist} wheel for torch {have[0]}.{have[1]} (the index page "
                 f"torch-{have[0]}.{have[1]}.0+cuXXX), or build it from source"),
            source=entry.get("source", "")))
    return out


def check_conda_channel_mix(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """conda-forge's/defaults' pytorch beside a companion from the pytorch/dglteam channels."""
    entry = kb.get("conda_channel_mix", {})
    torch = snap.conda_builds.get("pytorch")
    if not torch or not _FORGE_BUILD.search(torch["build"]):
        return []
    out = []
    for name in entry.get("companions", []):
        rec = snap.conda_builds.get(name)
        if not rec or _FORGE_BUILD.search(rec["build"]):
            continue
        out.append(Finding(
            "conda.channel-mix", "warning",
            f"{name} from the pytorch/dglteam channel beside a pytorch from conda-forge or "
            "defaults: its C++ library does not match this torch",
            observed=f"conda-meta: pytorch {torch['version']} build {torch['build']} (the "
                     f"conda-forge/defaults build naming); {name} {rec['version']} build "
                     f"{rec['build']} (the pytorch/dglteam channel naming)",
            why=f"{name}'s binaries are built against the pytorch channel's torch; the "
                "conda-forge/defaults pytorch of the same version is a different build (other "
                "compiler flags and ABI), so loading "
                f"{name}'s library fails with an undefined symbol or a missing library.",
            fix=f"install pytorch and {name} from one channel: conda install -c pytorch "
                f"pytorch {name} (or both from conda-forge where it has {name})",
            source=entry.get("source", "")))
    return out


def check_jax_runtime_newer_than_driver(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """jax's CUDA wheels newer than the driver's CUDA, a GPU jax does not see -> warning."""
    entry = kb.get("jax_runtime_driver", {})
    probe = ok_probe(snap, "jax")
    smi = snap.nvidia_smi
    if probe is None or not smi or not smi.gpus or not smi.cuda_version:
        return []
    if any(d.kind == "GPU" for d in probe.physical_devices):
        return []
    runtime = next((snap.version_of(d) for d in entry.get("dists", []) if snap.has(d)), "")
    if not runtime or major_minor(runtime)[:2] <= major_minor(smi.cuda_version)[:2]:
        return []
    rt = ".".join(str(p) for p in major_minor(runtime)[:2])
    where = " (a container takes the host's driver)" if snap.host.in_container else ""
    return [Finding(
        "jax.cuda-newer-than-driver", "warning",
        f"jax's CUDA {rt} wheels need a newer driver than this one (CUDA {smi.cuda_version})"
        f"{where}: jax runs on the CPU",
        observed=f"nvidia-cuda-runtime {runtime}; driver {smi.driver_version} supports CUDA "
                 f"{smi.cuda_version}; jax sees no GPU",
        why=f"jax's CUDA plugin checks that the driver supports the CUDA {rt} its wheels "
            "carry; an older driver leaves it without a GPU backend (inside a container, "
            "nvidia-container-cli refuses the image's requirement cuda>=" + rt + ").",
        fix=f"upgrade the host's NVIDIA driver to one supporting CUDA {rt}, or install jax "
            f"wheels of an earlier CUDA release that this driver supports (older CUDA 12 "
            "wheels: nvidia-cuda-runtime-cu12 of the driver's minor)",
        source=entry.get("source", ""))]


def check_index_placeholder(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A PyPI release that only holds a project's name, its real wheels on its own index."""
    torch = snap.version_of("torch").split("+")[0]
    cuda = _torch_cuda(snap).replace(".", "")
    out = []
    for row in kb.get("index_placeholders", []):
        have = snap.version_of(row["dist"])
        if not have or have not in row["versions"]:
            continue
        index = row["index"].format(torch=torch or "<torch>", cuda=cuda or "<cuda>")
        out.append(Finding(
            "install.index-placeholder", "warning",
            f"{row['dist']} {have} from PyPI is a placeholder, not the library",
            observed=f"{row['dist']} {have} installed (torch {torch or 'not installed'})",
            why=f"{row['dist']} {have} on PyPI only holds the project's name: importing it "
                f"raises an ImportError that says so. {row['why']}",
            fix=f"pip uninstall -y {row['dist']}; pip install {row['dist']} -f {index}  "
                "# the page for this torch and CUDA; use the nearest listed torch release",
            source=row["source"]))
    return out
