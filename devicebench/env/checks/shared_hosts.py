"""Round 21 (issue 24): shared machines and desktop platforms, read from what the probe has.

* CUDA's "busy or unavailable" (cudaErrorDevicesUnavailable) beside the compute mode the
  nvidia-smi table prints: a GPU in Exclusive_Process mode that another process (another
  rank of the same job) holds.
* torch.compile on native Windows: a CUDA torch that sees its GPU, with no Triton for its
  default (inductor) backend; the official ``triton`` has no Windows wheels.
* ``[[release_platform_bugs]]``: a framework release with a bug on one platform only (TF 2.13
  on Apple Silicon swapping in the legacy optimizers; torch 2.0's inductor needing OpenMP,
  which Apple's clang lacks), said from the installed version and the host.
"""

from __future__ import annotations

import re

from devicebench.env.checks._util import DISPLAY, KB, as_version, matches, ok_probe
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

_BUSY = re.compile(r"CUDA-capable device\(s\) is/are busy or unavailable|"
                   r"cudaErrorDevicesUnavailable|CUDA_ERROR_DEVICE_UNAVAILABLE")
_RANK_VARS = ("LOCAL_RANK", "SLURM_LOCALID", "SLURM_NTASKS", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE")


def _texts(snap: EnvSnapshot) -> dict[str, str]:
    return {name: "\n".join([*p.messages, p.said, p.error,
                             str(p.extra.get("first_use_error", ""))])
            for name, p in sorted(snap.frameworks.items())}


def check_gpu_devices_busy(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A framework said the CUDA devices are busy or unavailable: with nvidia-smi's compute
    mode "E. Process" another process holds the GPU (on a cluster: another rank that opened
    GPU 0 too), with "Prohibited" no process may use it.

    Example:
        >>> from devicebench.env.interpret import snapshot_from_raw
        >>> s = snapshot_from_raw({"frameworks": {"torch": {"status": "ok", "stderr": "",
        ...     "result": {"name": "torch", "status": "ok", "extra": {"first_use_error":
        ...     "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable"}}}}})
        >>> check_gpu_devices_busy(s, {"gpu_busy": {"source": "https://x"}})[0].id
        'gpu.devices-busy'
    """
    said = [DISPLAY.get(n, n) for n, t in _texts(snap).items() if _BUSY.search(t)]
    if not said:
        return []
    modes = snap.nvidia_smi.compute_modes if snap.nvidia_smi else []
    exclusive = [i for i, m in enumerate(modes) if m.startswith("E.")]
    prohibited = [i for i, m in enumerate(modes) if m == "Prohibited"]
    ranks = {k: snap.env_vars[k] for k in _RANK_VARS if snap.env_vars.get(k)}
    if exclusive:
        mode = (f"nvidia-smi shows GPU {', '.join(map(str, exclusive))} in Exclusive_Process "
                "compute mode")
    elif prohibited:
        mode = f"nvidia-smi shows GPU {', '.join(map(str, prohibited))} in Prohibited compute mode"
    else:
        mode = "compute mode not read" if not modes else f"compute modes: {', '.join(modes)}"
    per_rank = ("give each process its own GPU before any CUDA work: "
                "torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) (Slurm: SLURM_LOCALID), "
                "or bind one GPU per task (srun --gpus-per-task=1, or "
                "CUDA_VISIBLE_DEVICES=$SLURM_LOCALID per task)")
    fix = (f"{per_rank}; or have the admin set the Default compute mode: sudo nvidia-smi -c "
           "DEFAULT")
    if prohibited and not exclusive:
        fix = ("sudo nvidia-smi -i <gpu> -c DEFAULT  # Prohibited mode admits no process; or "
               "choose another GPU with CUDA_VISIBLE_DEVICES")
    held = ("an exclusive-process GPU held by another process" if exclusive else
            "a Prohibited-mode GPU" if prohibited else
            "held by another process (exclusive compute mode) or not usable")
    return [Finding(
        "gpu.devices-busy", "error",
        f"CUDA says the GPU is busy or unavailable: {held}"
        + (" (another rank of this job)" if ranks and exclusive else ""),
        observed=(f"{' and '.join(said)} failed: 'CUDA-capable device(s) is/are busy or "
                  f"unavailable'; {mode}"
                  + (f"; {', '.join(f'{k}={v}' for k, v in ranks.items())}" if ranks else "")),
        why=("In Exclusive_Process compute mode a GPU admits one process; CUDA answers every "
             "other with 'busy or unavailable' (cudaErrorDevicesUnavailable; Prohibited mode "
             "admits none). On a multi-GPU job each rank that leaves its current device at 0 "
             "(libraries then open GPU 0 internally) competes for the same GPU."),
        fix=fix, source=kb["gpu_busy"]["source"])]


def check_windows_compile_no_triton(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """Native Windows, a CUDA torch 2.x that sees its GPU, and no Triton installed:
    torch.compile's default backend (inductor) generates Triton kernels for CUDA, and the
    official ``triton`` publishes no Windows wheels."""
    entry = kb["windows_triton"]
    probe = ok_probe(snap, "torch")
    if snap.host.os != "Windows" or probe is None or not probe.build.get("is_cuda_build"):
        return []
    v = as_version(probe.version or snap.version_of("torch"))
    if v is None or v.release < (2,) or not probe.gpu_devices:
        return []
    if any(snap.has(d) for d in entry["dists"]):
        return []
    return [Finding(
        "torch.compile-no-triton-on-windows", "info",
        "torch.compile will fail here: no Triton on native Windows (the GPU itself works)",
        observed=f"Windows, torch {probe.version} (CUDA {probe.build.get('cuda_version', '?')}) "
                 "sees the GPU; no triton / triton-windows installed",
        why="torch.compile's default backend (inductor) generates Triton kernels for CUDA "
            "GPUs; the official triton package has no Windows wheels, so compiling stops with "
            "'Cannot find a working triton installation' and a pinned triton does not install "
            "('No matching distribution').",
        fix=entry["fix"], source=entry["source"])]


def check_release_platform_bug(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """An installed release known broken on this platform only (``[[release_platform_bugs]]``)."""
    out = []
    for row in kb.get("release_platform_bugs", []):
        if snap.host.os != row["os"] or row.get("machine", snap.host.machine) != snap.host.machine:
            continue
        dist = next((d for d in row["dists"] if matches(snap.version_of(d), row["version"])), "")
        if not dist:
            continue
        version = snap.version_of(dist)
        out.append(Finding(
            row["id"], "warning", row["title"].format(version=version),
            observed=f"{dist} {version} on {snap.host.os} {snap.host.machine}",
            why=row["why"], fix=row["fix"], source=row["source"]))
    return out
