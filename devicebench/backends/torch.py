"""PyTorch: devices, build info and memory statistics (worker side only)."""

from __future__ import annotations

import time
from typing import Any


def probe() -> dict[str, Any]:
    """Import torch and describe what it sees. Returns FrameworkProbe fields."""
    start = time.perf_counter()
    import torch

    out: dict[str, Any] = {
        "import_seconds": time.perf_counter() - start,
        "version": torch.__version__,
    }
    devices: list[dict[str, Any]] = [{"name": "cpu", "kind": "CPU", "description": "cpu"}]
    build: dict[str, Any] = {
        "is_cuda_build": torch.version.cuda is not None,
        "cuda_version": torch.version.cuda or "",
        "is_rocm_build": getattr(torch.version, "hip", None) is not None,
    }
    extra: dict[str, Any] = {}
    try:
        build["cudnn_version"] = str(torch.backends.cudnn.version() or "")
    except Exception as exc:  # torch's own cuDNN check: "cuDNN version incompatibility: ..."
        build["cudnn_version"] = ""
        extra["cudnn_error"] = f"{type(exc).__name__}: {exc}"[:600]
    try:  # the GPU architectures this build has kernels for ("sm_90", "compute_90")
        build["arch_list"] = list(torch.cuda.get_arch_list()) if build["is_cuda_build"] \
            or build["is_rocm_build"] else []
    except Exception:
        build["arch_list"] = []
    if build["is_rocm_build"]:
        build["hip_version"] = str(torch.version.hip)
    memory, memory_detail = "unknown", "torch keeps memory statistics for CUDA devices only"
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            devices.append(
                {
                    "name": f"cuda:{i}",
                    "kind": "GPU",
                    "description": props.name,
                    "compute_capability": f"{props.major}.{props.minor}",
                    "memory_bytes": int(props.total_memory),
                }
            )
            if build["is_rocm_build"]:
                extra["gcn_arch"] = str(getattr(props, "gcnArchName", "")).split(":")[0]
        try:  # first device use: a build without kernels for this GPU fails here
            (torch.ones(4, device="cuda") * 2).sum().item()
        except Exception as exc:
            extra["first_use_error"] = f"{type(exc).__name__}: {exc}"[:600]
        memory, memory_detail = "works", ""
    mps = getattr(torch.backends, "mps", None)
    build["mps_built"] = bool(mps and mps.is_built())
    if mps is not None and mps.is_available():
        devices.append({"name": "mps", "kind": "MPS", "description": "Apple GPU (MPS)"})
        if memory != "works":
            memory, memory_detail = "current only (MPS has no peak API)", ""
    out["physical_devices"] = devices
    out["logical_devices"] = [d["name"] for d in devices]
    out["build"] = build
    out["extra"] = extra
    out["memory_stats"], out["memory_stats_detail"] = memory, memory_detail
    return out


def configure(device: str, threads: int | None) -> None:
    import torch

    if threads:
        torch.set_num_threads(threads)


def peak_memory_bytes(device: str) -> int | None:
    """CUDA peak allocated bytes; MPS has no peak API and CPU none: None (unknown)."""
    import torch

    if device.startswith("gpu") and torch.cuda.is_available():
        return int(torch.cuda.max_memory_allocated()) or None
    return None


def profile_step(step: Any, device: str) -> tuple[Any, dict[str, Any]]:
    """Run ``step()`` once under ``torch.profiler`` and count what it launched: on CUDA
    the GPU kernels, elsewhere the top-level ATen ops (each one dispatch from Python).

    Returns ``(step's result, {"kernels_per_step", "kernel_source"})``; the dict is empty
    if the profiler fails (the step then runs again, unprofiled).
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = device.startswith("gpu") and torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    result: list[Any] = []
    try:
        with profile(activities=activities) as prof:
            result.append(step())
            if cuda:
                torch.cuda.synchronize()
        events = list(prof.events())
    except Exception:
        return (result[0] if result else step()), {}
    if cuda:
        kernels = sum(1 for e in events
                      if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA)
        source = "GPU kernels in torch.profiler's trace of one step"
    else:
        kernels = sum(1 for e in events if e.name.startswith("aten::")
                      and not (e.cpu_parent and e.cpu_parent.name.startswith("aten::")))
        source = "top-level ATen ops in torch.profiler's trace of one step"
    return result[0], ({"kernels_per_step": kernels, "kernel_source": source} if kernels
                       else {})


def allow_tf32() -> None:
    """Matmuls and convolutions in TF32 on tensor cores (torch keeps matmuls in full
    float32 by default; ``torch.set_float32_matmul_precision("high")`` is the same)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
