"""The environment a trial's worker starts with: set before any framework import."""

from __future__ import annotations

import os

from devicebench.trials.spec import TrialSpec


def worker_env(spec: TrialSpec, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment variables for a worker running ``spec``.

    Process-global choices (backend, device visibility, thread pools, allocator
    behaviour) are fixed here, because frameworks read them once at import.
    """
    env = dict(os.environ if base is None else base)
    env["KERAS_BACKEND"] = spec.backend
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONUNBUFFERED"] = "1"
    if spec.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
        env["JAX_PLATFORMS"] = "cpu"
        env["KERAS_TORCH_DEVICE"] = "cpu"
    elif spec.device == "mps":
        env["KERAS_TORCH_DEVICE"] = "mps"
        env.setdefault("PYTORCH_ENABLE_MPS_FALLBACK", "0")
    else:  # gpu:N
        index = spec.device.split(":", 1)[1]
        env["CUDA_VISIBLE_DEVICES"] = index
        env["KERAS_TORCH_DEVICE"] = "cuda:0"
        # Grow on demand, or "peak memory" reads as the whole card.
        env["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    if spec.threads:
        n = str(spec.threads)
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = n
        if spec.backend == "jax":
            multi = "false" if spec.threads == 1 else "true"
            flags = env.get("XLA_FLAGS", "")
            env["XLA_FLAGS"] = (f"{flags} --xla_cpu_multi_thread_eigen={multi} "
                                f"intra_op_parallelism_threads={n}").strip()
    return env
