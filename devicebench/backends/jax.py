"""JAX: devices, build info and memory statistics (worker side only)."""

from __future__ import annotations

import time
from typing import Any

# Keras' JAX trainer copies every variable in and out of each train_on_batch call (fit
# keeps them inside JAX between steps): seed-rnn's set-up steps took 1.6 ms each, its fit
# steps 0.25 ms. The worker measures a fast step as fit runs it instead.
TRAIN_ON_BATCH_OVERHEAD = True


def probe() -> dict[str, Any]:
    """Import JAX and describe what it sees. Returns FrameworkProbe fields."""
    start = time.perf_counter()
    import jax

    out: dict[str, Any] = {
        "import_seconds": time.perf_counter() - start,
        "version": jax.__version__,
    }
    devices = []
    seen = set()
    for dev in list(jax.devices()) + list(jax.devices("cpu")):
        if dev.id in seen and dev.platform == "cpu":
            continue
        seen.add(dev.id)
        platform = dev.platform.upper()
        kind = "CPU" if platform == "CPU" else ("TPU" if platform == "TPU" else "GPU")
        devices.append(
            {
                "name": f"{dev.platform}:{dev.id}",
                "kind": kind,
                "description": str(getattr(dev, "device_kind", "")),
                "compute_capability": str(getattr(dev, "compute_capability", "") or ""),
            }
        )
    out["physical_devices"] = devices
    out["logical_devices"] = [f"{d.platform}:{d.id}" for d in jax.devices()]
    build: dict[str, Any] = {"default_backend": jax.default_backend()}
    try:
        import jaxlib

        build["jaxlib_version"] = getattr(jaxlib, "__version__", "")
    except Exception:
        pass
    out["build"] = build
    # Recorded verbatim; the parent interprets it (env.interpret.memory_stats_from_raw).
    call = "jax.devices()[0].memory_stats()"
    try:
        dev = jax.devices()[0]
        jax.device_put(1.0, dev).block_until_ready()
        stats = dev.memory_stats()
        result = None if stats is None else {
            k: int(v) for k, v in stats.items() if isinstance(v, int | float)}
        out["memory_stats_raw"] = {"call": call, "result": result}
    except Exception as exc:
        out["memory_stats_raw"] = {"call": call, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return out


def configure(device: str, threads: int | None) -> None:
    """JAX's platform and preallocation are set through the environment by the parent."""


def peak_memory_bytes(device: str) -> int | None:
    """Peak device memory from ``Device.memory_stats()``; None on CPU (unknown, not 0)."""
    import jax

    try:
        stats = jax.devices()[0].memory_stats()
    except Exception:
        return None
    if not stats:
        return None
    return int(stats.get("peak_bytes_in_use", 0)) or None


def kernel_audit(model: Any, x: Any, y: Any) -> dict[str, Any]:
    """Kernels per training step, counted in the program XLA compiled for Keras' train
    step (after its first call: the lowering and compilation are cached, ~1 ms).

    Returns ``{"kernels_per_step", "kernels_in_program", "loop_kernels", "loop_trips",
    "kernel_source"}``, or ``{}`` where Keras' trainer does not expose a compiled step
    (``jit_compile=False``, a Keras version that wraps it differently).
    """
    from devicebench.backends.hlo import kernel_placement

    fn = getattr(model, "train_function", None)
    jitted = [c.cell_contents for c in (getattr(fn, "__closure__", None) or ())
              if hasattr(c.cell_contents, "lower")]
    if len(jitted) != 1 or getattr(model, "steps_per_execution", 1) != 1:
        return {}
    try:
        state = model._get_jax_state(trainable_variables=True, non_trainable_variables=True,
                                     optimizer_variables=True, metrics_variables=True,
                                     purge_model_variables=False)
        text = jitted[0].lower(state, (x, y, None)).compile().as_text()
    except Exception:  # a private path of Keras' trainer moved: no count, no failure
        return {}
    return kernel_placement(text, "XLA's compiled train step")


def allow_tf32() -> None:
    """Float32 matmuls and convolutions in TF32 (JAX's default on NVIDIA GPUs from
    Ampere on already; set explicitly so the trial says what it ran)."""
    import jax

    jax.config.update("jax_default_matmul_precision", "tensorfloat32")
