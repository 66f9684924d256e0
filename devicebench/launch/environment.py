"""The environment a worker starts with: set before any framework import."""

from __future__ import annotations

import os

# Thread-pool variables read once by the numerical libraries under every framework.
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def thread_env(env: dict[str, str], threads: int | None) -> dict[str, str]:
    """Set every thread-pool variable in ``env`` to ``threads`` (None: leave them)."""
    if threads:
        for var in THREAD_VARS:
            env[var] = str(threads)
    return env


def worker_env(backend: str, device: str = "cpu", threads: int | None = None,
               base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment variables for a worker using ``backend`` on ``device``.

    Process-global choices (backend, device visibility, thread pools, allocator
    behaviour) are fixed here, because frameworks read them once at import.

    Args:
        backend: tensorflow | jax | torch (the Keras backend).
        device: cpu | mps | gpu:N.
        threads: intra-op threads; None = all cores.
        base: the environment to start from (default: a copy of ours).

    Example:
        >>> worker_env("jax", "cpu", 1, base={})["JAX_PLATFORMS"]
        'cpu'
    """
    env = dict(os.environ if base is None else base)
    env["KERAS_BACKEND"] = backend
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONUNBUFFERED"] = "1"
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
        env["JAX_PLATFORMS"] = "cpu"
        env["KERAS_TORCH_DEVICE"] = "cpu"
    elif device == "mps":
        env["KERAS_TORCH_DEVICE"] = "mps"
        env.setdefault("PYTORCH_ENABLE_MPS_FALLBACK", "0")
    else:  # gpu:N
        index = device.split(":", 1)[1]
        env["CUDA_VISIBLE_DEVICES"] = index
        env["KERAS_TORCH_DEVICE"] = "cuda:0"
        # Grow on demand, or "peak memory" reads as the whole card.
        env["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    if threads:
        thread_env(env, threads)
        if backend == "jax":
            multi = "false" if threads == 1 else "true"
            flags = env.get("XLA_FLAGS", "")
            env["XLA_FLAGS"] = (f"{flags} --xla_cpu_multi_thread_eigen={multi} "
                                f"intra_op_parallelism_threads={threads}").strip()
    return env
