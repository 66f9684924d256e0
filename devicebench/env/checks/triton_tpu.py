"""Round 22 step 0 (issue 24): Triton beside torch, and JAX on a TPU Node.

* The Triton a torch release was built with (``[torch_triton]``: torch's pinned ``triton`` /
  the triton-windows table): another Triton release installed beside it breaks
  torch.compile (its inductor generates code for its own Triton's API).
* Triton's own "libcuda.so cannot found" in any framework's output: Triton looks for
  ``libcuda.so.1`` in ldconfig's cache (some releases then in LD_LIBRARY_PATH); a driver
  library kept elsewhere (Colab's /usr/lib64-nvidia) is not found though torch itself works.
* jax 0.4+ with Colab's TPU Node runtime (``COLAB_TPU_ADDR``): jax 0.4 dropped the remote TPU
  driver, so it falls back to the CPU; a TPU VM, or jax 0.3.25, is needed.
"""

from __future__ import annotations

import os

from devicebench.env.checks._util import DISPLAY, KB, as_version, ok_probe
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

_TRITONS = ("triton", "triton-windows")


def _mm(version: str) -> str:
    v = as_version(version.partition("+")[0])
    return f"{v.release[0]}.{v.release[1]}" if v is not None and len(v.release) > 1 else ""


def check_torch_triton_pairing(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A CUDA torch release beside a Triton release other than the one it was built with.

    Example:
        >>> from devicebench.env.checks import load_knowledge
        >>> from devicebench.env.snapshot import FrameworkProbe, HostInfo
        >>> s = EnvSnapshot(host=HostInfo(os="Linux"), distributions={"torch": "2.6.0",
        ...     "triton": "3.1.0"}, frameworks={"torch": FrameworkProbe("torch", "ok",
        ...     version="2.6.0+cu124", build={"is_cuda_build": True})})
        >>> [f.title for f in check_torch_triton_pairing(s, load_knowledge())]
        ['Triton 3.1.0 is installed beside torch 2.6.0+cu124, which was built for Triton 3.2']
    """
    entry = kb["torch_triton"]
    probe = snap.frameworks.get("torch")
    torch_v = (probe.version if probe is not None and probe.version else "") or \
        snap.version_of("torch")
    if probe is None or not probe.build.get("is_cuda_build") or snap.host.os == "Darwin":
        return []
    if as_version(torch_v) is None or as_version(torch_v).is_devrelease:
        return []  # nightlies pair with pytorch-triton's dated builds, not read here
    need = entry["pairs"].get(_mm(torch_v), "")
    windows = snap.host.os == "Windows"
    if not need or (windows and as_version(torch_v).release < (2, 6)):
        return []  # the Windows table is read from torch 2.6 on only
    dist = next((d for d in _TRITONS if snap.has(d)), "")
    have = snap.version_of(dist)
    if not dist or not _mm(have) or _mm(have) == need:
        return []
    major, minor = need.split(".")
    below = f"{major}.{int(minor) + 1}"
    if windows:
        fix = (("pip uninstall -y triton && " if dist == "triton" else "")
               + f"pip install -U \"triton-windows<{below}\"  # Triton {need} for torch "
                 f"{_mm(torch_v)}; the bound keeps a later Triton from replacing it")
    else:
        fix = (f"pip install \"triton=={need}.*\"  # the release torch {_mm(torch_v)} pins; or "
               f"reinstall torch to restore its own pin: pip install --force-reinstall "
               f"\"torch=={torch_v.partition('+')[0]}\"")
    return [Finding(
        "torch.triton-mismatch", "warning",
        f"Triton {have} is installed beside torch {torch_v}, which was built for Triton {need}",
        observed=f"{dist} {have}; torch {torch_v} (CUDA build)",
        why=("torch.compile's inductor backend generates code against the Triton release its "
             "torch was built and tested with (torch's wheels pin it); another Triton's API "
             "differs, so compiling fails (ImportError / AttributeError inside "
             "torch._inductor, or 'TritonMissing') although the GPU itself works."),
        fix=fix, source=entry["source"])]


def _libcuda_dirs(snap: EnvSnapshot) -> list[str]:
    """The LD_LIBRARY_PATH directories that hold libcuda.so.1 (outside ldconfig's cache)."""
    path = snap.ld_path_cuda_libs.get("libcuda.so.1", "")
    return [os.path.dirname(path)] if path else []


def check_triton_libcuda_not_found(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """Triton's own "libcuda.so cannot found": the driver library is not where Triton
    looks (ldconfig's cache), though the framework may reach the GPU."""
    entry = kb["triton_libcuda"]
    said = [name for name, p in sorted(snap.frameworks.items())
            if "libcuda.so cannot found" in "\n".join(
                [p.said, p.error, *p.messages, *(str(v) for v in p.extra.values())])]
    if not said:
        return []
    in_cache = [p for p in snap.libcuda_copies if p.endswith("libcuda.so.1")]
    dirs = _libcuda_dirs(snap)
    where = dirs[0] if dirs else "<the directory holding libcuda.so.1>"
    fix = (f"sudo ldconfig {where}  # adds it to the loader's cache (Colab: !ldconfig "
           f"/usr/lib64-nvidia); or echo {where} | sudo tee /etc/ld.so.conf.d/nvidia.conf && "
           f"sudo ldconfig; or export TRITON_LIBCUDA_PATH={where} (Triton releases that read "
           "it); or upgrade torch (2.2 and later, whose Triton also looks in LD_LIBRARY_PATH)")
    return [Finding(
        "triton.libcuda-not-in-loader-cache", "warning",
        "Triton cannot find libcuda: the driver library is not in the loader's cache "
        "(torch.compile fails)",
        observed=(f"{' and '.join(DISPLAY.get(n, n) for n in said)} printed Triton's "
                  "'libcuda.so cannot found!'; ldconfig's cache lists "
                  + (", ".join(in_cache) if in_cache else "no libcuda.so.1")
                  + (f"; libcuda.so.1 is in {', '.join(dirs)} (LD_LIBRARY_PATH)" if dirs else "")),
        why=("Triton links its kernels' launcher against libcuda and finds it through "
             "ldconfig -p (later releases then also through LD_LIBRARY_PATH). A driver library "
             "kept outside the cache (Colab's /usr/lib64-nvidia, a container's mount) is found "
             "by torch's own dlopen through LD_LIBRARY_PATH, so the GPU works, but Triton's "
             "lookup fails and torch.compile stops."),
        fix=fix, source=entry["source"])]


def check_jax_tpu_node(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """jax 0.4+ on Colab's TPU Node runtime (COLAB_TPU_ADDR), on the CPU."""
    entry = kb["jax_tpu_node"]
    addr = next((snap.env_vars[k] for k in entry["env"] if snap.env_vars.get(k)), "")
    probe = ok_probe(snap, "jax")
    v = as_version(snap.version_of("jax") or (probe.version if probe else ""))
    if not addr or v is None or v.release < (0, 4):
        return []
    if probe is not None and any(d.kind.upper() == "TPU" for d in probe.physical_devices):
        return []
    return [Finding(
        "jax.tpu-node-unsupported", "warning",
        f"jax {v} cannot use this TPU Node (Colab's TPU runtime): it falls back to the CPU",
        observed=f"COLAB_TPU_ADDR/TPU_NAME set ({addr}); jax {v}"
                 + ("; JAX's devices: CPU only" if probe is not None else ""),
        why=("A TPU Node is reached over the network through the remote TPU driver, which jax "
             "0.4 removed; jax 0.4 and later run only on TPU VMs (the TPU attached to the "
             "host). Colab's TPU runtime of that time was a TPU Node."),
        fix=("pip install 'jax[tpu]==0.3.25' 'jaxlib==0.3.25' and call "
             "jax.tools.colab_tpu.setup_tpu() before using JAX; or run on a TPU VM (a Cloud "
             "TPU VM, Kaggle's TPU VM notebooks)"),
        source=entry["source"])]
