"""Build variants of one stack's parts, read from where each wheel came from.

A PyTorch wheel's variant (CPU, CUDA, ROCm) is in its local version tag (``2.2.1+cpu``,
``0.17.1+cu121``); an untagged wheel is PyPI's, whose Linux x86_64 builds are the CUDA
variant and whose Windows and macOS builds are CPU-only. torch, torchvision and torchaudio
must be the same variant: a CUDA torchvision's compiled ops do not load against a CPU torch
(and the reverse). Inside a conda environment an untagged version may be conda's build of
either variant, so it is not read there.

Also here: Windows import-order hazards of a torch release (``[[windows_import_order]]``),
one CUDA library's wheels for two CUDA majors side by side, packages whose GPU build is another
distribution (``[[gpu_build_elsewhere]]``) and bitsandbytes' library override (round 17).
"""

from __future__ import annotations

import re

from devicebench.env.checks._util import KB, has_nvidia_gpu, matches
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

_COMPANIONS = ("torchvision", "torchaudio")


def _variant(version: str, snap: EnvSnapshot) -> str:
    """'cpu', 'cuda', 'rocm' or '' (unknown) for a torch-family wheel's version."""
    tag = version.partition("+")[2].lower()
    if tag:
        return ("cpu" if tag == "cpu" else "cuda" if tag.startswith("cu")
                else "rocm" if tag.startswith("rocm") else "")
    if snap.host.conda_env:
        return ""  # conda's builds carry no tag: the variant is not in the version
    if snap.host.os == "Linux":
        return "cuda" if snap.host.machine == "x86_64" else ""
    return "cpu" if snap.host.os in ("Windows", "Darwin") else ""


def _torch_variant(snap: EnvSnapshot) -> tuple[str, str]:
    """torch's variant (the worker's build info first) and the version it was read from."""
    probe = snap.frameworks.get("torch")
    version = (probe.version if probe is not None and probe.version else "") \
        or snap.version_of("torch")
    if probe is not None and probe.build:
        if probe.build.get("is_rocm_build"):
            return "rocm", version
        if "is_cuda_build" in probe.build:
            return ("cuda" if probe.build["is_cuda_build"] else "cpu"), version
    return _variant(version, snap), version


def check_companion_variants(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """torchvision/torchaudio of another build variant than torch (CPU vs CUDA vs ROCm).

    Example:
        >>> from devicebench.env.snapshot import EnvSnapshot, HostInfo
        >>> s = EnvSnapshot(host=HostInfo(os="Linux", machine="x86_64"),
        ...                 distributions={"torch": "2.2.1+cpu", "torchvision": "0.17.1"})
        >>> [f.id for f in check_companion_variants(s, {"torch_variants_info": {"source": ""}})]
        ['stack.variant-mismatch']
    """
    if not snap.has("torch"):
        return []
    want, torch_v = _torch_variant(snap)
    if not want:
        return []
    bad = [(c, snap.version_of(c), _variant(snap.version_of(c), snap)) for c in _COMPANIONS
           if snap.has(c)]
    bad = [(c, v, k) for c, v, k in bad if k and k != want]
    if not bad:
        return []
    tag = torch_v.partition("+")[2]
    index = tag if tag else {"cpu": "cpu", "rocm": "rocm6.2"}.get(want, "")
    pins = " ".join([f"'torch=={torch_v.partition('+')[0]}'"]
                    + [f"'{c}=={v.partition('+')[0]}'" for c, v, _ in bad])
    where = f" --index-url https://download.pytorch.org/whl/{index}" if index else ""
    return [Finding(
        "stack.variant-mismatch", "error",
        ", ".join(f"{c} {v} is a {k.upper()} build" for c, v, k in bad)
        + f", but torch {torch_v} is a {want.upper()} build",
        observed="; ".join(f"{c} {v} (" + (f"tag {v.partition('+')[2]}" if "+" in v
                                           else "untagged: PyPI's") + ")"
                           for c, v, _ in bad) + f"; torch {torch_v}",
        why="torchvision and torchaudio are compiled against one variant of torch; a CUDA "
            "build's operators (nms, io) do not register against a CPU torch, and the reverse, "
            "so the import or the first such op fails. An untagged wheel is PyPI's: the CUDA "
            "build on Linux x86_64, the CPU build on Windows and macOS.",
        fix=f"pip install --force-reinstall {pins}{where}  # all three from the same index",
        source=kb["torch_variants_info"]["source"]
        + " ; https://pytorch.org/get-started/locally/ (one index for torch, torchvision, "
          "torchaudio) ; https://github.com/pytorch/pytorch/issues/122494")]


def check_windows_import_order(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """Windows: a package that loads its own copies of DLLs torch needs, installed beside a
    torch release whose import then fails if that package is imported first."""
    if snap.host.os != "Windows" or not snap.has("torch"):
        return []
    v = snap.version_of("torch").partition("+")[0]
    out = []
    for entry in kb.get("windows_import_order", []):
        first = [d for d in entry["dists"] if snap.has(d)]
        if not first or not matches(v, entry["torch"]):
            continue
        names = ", ".join(f"{d} {snap.version_of(d)}" for d in first)
        out.append(Finding(
            "windows.import-order", "warning",
            f"torch {v} fails to load c10.dll if {first[0]} is imported before it",
            observed=f"Windows; torch {snap.version_of('torch')} beside {names}",
            why=entry["why"] + ".", fix=entry["fix"].format(dist=first[0]),
            source=entry["source"]))
    return out


_NV_WHEEL = re.compile(r"^nvidia-(.+)-cu(\d+)$")


def check_mixed_cuda_major_wheels(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """One CUDA library's pip wheels for two CUDA majors (nvidia-nccl-cu11 beside -cu12)."""
    majors: dict[str, set[str]] = {}
    for dist in snap.distributions:
        m = _NV_WHEEL.match(dist.lower())
        if m:
            majors.setdefault(m.group(1), set()).add(m.group(2))
    both = sorted(lib for lib, ms in majors.items() if len(ms) > 1)
    if not both:
        return []
    extra = sorted({f"nvidia-{lib}-cu{m}" for lib in both for m in majors[lib]
                    if m != max(majors[lib], key=int)})
    entry = kb["mixed_cuda_major_wheels"]
    return [Finding(
        "stack.mixed-cuda-major-wheels", "warning",
        f"CUDA libraries installed for two CUDA majors: {', '.join(both)}",
        observed="; ".join(f"{d} {snap.version_of(d)}" for d in sorted(snap.distributions)
                           if (m := _NV_WHEEL.match(d.lower())) and m.group(1) in both),
        why=entry["why"], fix=f"pip uninstall -y {' '.join(extra)}  # the older CUDA major's "
                              "(cu11) wheels; then reinstall the framework",
        source=entry["source"])]


def check_gpu_build_elsewhere(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A package whose CUDA build is a separate distribution, installed as its CPU-only one on
    a host with an NVIDIA GPU."""
    if not has_nvidia_gpu(snap):
        return []
    out = []
    for row in kb.get("gpu_build_elsewhere", []):
        if not snap.has(row["dist"]) or any(snap.has(g) for g in row["gpu_dists"]):
            continue
        gpu = row["gpu_dists"][0]
        out.append(Finding(
            "stack.cpu-only-package-on-gpu-host", "warning",
            f"{row['dist']} is the CPU-only package: its CUDA build is {gpu}",
            observed=f"{row['dist']} {snap.version_of(row['dist'])} installed, {gpu} not; "
                     "nvidia-smi lists a GPU",
            why=row["why"], fix=f"pip uninstall -y {row['dist']} && pip install {gpu}  # "
                                "matching the CUDA/cuDNN it is built for",
            source=row["source"]))
    return out


def check_cpu_beside_gpu_package(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A package's CPU distribution installed beside its GPU one (``[[gpu_build_elsewhere]]``):
    both write the same import package, so the CPU one's files can replace the GPU one's."""
    out = []
    for row in kb.get("gpu_build_elsewhere", []):
        gpus = [g for g in row["gpu_dists"] if snap.has(g)]
        if not snap.has(row["dist"]) or not gpus:
            continue
        out.append(Finding(
            "stack.cpu-package-beside-gpu-package", "warning",
            f"{row['dist']} (CPU-only) is installed beside {gpus[0]}: both are the same module",
            observed=f"{row['dist']} {snap.version_of(row['dist'])} and {gpus[0]} "
                     f"{snap.version_of(gpus[0])} installed",
            why=f"{row['dist']} and {gpus[0]} install the same import package; whichever was "
                "installed last wrote the shared files, so the CPU package can shadow the GPU "
                "build and its GPU providers go missing (the program runs on the CPU).",
            fix=f"pip uninstall {row['dist']} {gpus[0]} -y && pip install {gpus[0]}  # keep "
                "only the GPU package (it runs on the CPU too)",
            source=kb["cpu_beside_gpu_package"]["source"]))
    return out


def check_bnb_cuda_override(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """BNB_CUDA_VERSION set: bitsandbytes loads libbitsandbytes_cudaNNN for that CUDA, not
    torch's."""
    value = snap.env_vars.get("BNB_CUDA_VERSION", "")
    if not value or not snap.has("bitsandbytes"):
        return []
    probe = snap.frameworks.get("torch")
    torch_cuda = str((probe.build or {}).get("cuda_version") or "") if probe else ""
    if torch_cuda and torch_cuda.replace(".", "") == value:
        return []
    return [Finding(
        "bitsandbytes.cuda-version-override", "warning",
        f"BNB_CUDA_VERSION={value} makes bitsandbytes load libbitsandbytes_cuda{value}",
        observed=f"BNB_CUDA_VERSION={value}; bitsandbytes {snap.version_of('bitsandbytes')}"
                 + (f"; torch built with CUDA {torch_cuda}" if torch_cuda else ""),
        why="The override picks a native library for another CUDA than torch's; where that "
            "library was not built or its CUDA runtime is not on the loader's path, bitsandbytes "
            "fails to set up CUDA.",
        fix="export BNB_CUDA_VERSION=  # unset it, then pip install -U bitsandbytes",
        source=kb["bnb_cuda_override"]["source"])]
