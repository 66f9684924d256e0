"""TensorFlow: devices, build info and memory statistics (worker side only)."""

from __future__ import annotations

import time
from typing import Any


def probe() -> dict[str, Any]:
    """Import TensorFlow and describe what it sees. Returns FrameworkProbe fields."""
    start = time.perf_counter()
    import tensorflow as tf

    out: dict[str, Any] = {
        "import_seconds": time.perf_counter() - start,
        "version": tf.__version__,
    }
    devices = []
    for dev in tf.config.list_physical_devices():
        info: dict[str, Any] = {"name": dev.name, "kind": dev.device_type}
        if dev.device_type == "GPU":
            try:
                details = tf.config.experimental.get_device_details(dev)
            except Exception:
                details = {}
            info["description"] = str(details.get("device_name", ""))
            cc = details.get("compute_capability")
            if cc:
                info["compute_capability"] = ".".join(str(x) for x in cc)
        devices.append(info)
    out["physical_devices"] = devices
    out["build"] = {
        k: (v if isinstance(v, bool | int | float) else str(v))
        for k, v in dict(tf.sysconfig.get_build_info()).items()
    }
    gpus = [d for d in devices if d["kind"] == "GPU"]
    if gpus:
        # Memory growth, or the first allocation reserves the whole card.
        for dev in tf.config.list_physical_devices("GPU"):
            try:
                tf.config.experimental.set_memory_growth(dev, True)
            except Exception:
                pass
    out["logical_devices"] = [d.name for d in tf.config.list_logical_devices()]
    target = "GPU:0" if gpus else "CPU:0"
    # Recorded verbatim; the parent interprets it (env.interpret.memory_stats_from_raw).
    call = f"tf.config.experimental.get_memory_info('{target}')"
    try:
        with tf.device(target):
            tf.linalg.matmul(tf.ones((64, 64)), tf.ones((64, 64))).numpy()
        info = tf.config.experimental.get_memory_info(target)
        out["memory_stats_raw"] = {"call": call, "result": {k: int(v) for k, v in info.items()}}
    except Exception as exc:
        out["memory_stats_raw"] = {"call": call, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return out


def configure(device: str, threads: int | None) -> None:
    """Process-global settings; must run before TensorFlow executes any op."""
    import tensorflow as tf

    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
    gpus = tf.config.list_physical_devices("GPU")
    if device == "cpu":
        # Hides CUDA and Metal (PluggableDevice) GPUs alike.
        tf.config.set_visible_devices([], "GPU")
    else:
        for gpu in gpus:
            try:
                tf.config.experimental.set_memory_growth(gpu, True)
            except (ValueError, RuntimeError):
                pass


def peak_memory_bytes(device: str) -> int | None:
    """Peak device memory, or None when TensorFlow cannot tell (CPU reports zeros)."""
    import tensorflow as tf

    if device == "cpu":
        return None
    try:
        peak = tf.config.experimental.get_memory_info("GPU:0").get("peak", 0)
    except Exception:
        return None
    return int(peak) or None


def allow_tf32() -> None:
    """Float32 matmuls and convolutions in TF32 on tensor cores (TensorFlow's default on
    Ampere and newer already; set explicitly so the trial says what it ran)."""
    import tensorflow as tf

    tf.config.experimental.enable_tensor_float_32_execution(True)


# Ops every partition has, wherever the math runs: not fallbacks.
_INFRASTRUCTURE_OPS = {"NoOp", "Const", "Identity", "IdentityN", "Placeholder"}


def start_placement_audit() -> None:
    """Record where each op of the next tf.function instantiation is placed.

    Must run before the training function's first call: partition graphs are recorded
    when the function is instantiated (a private API, tensorflow/python/eager/context.py).
    """
    from tensorflow.python.eager import context

    context.context().enable_run_metadata()


_LOOP_ENTRY = {"Enter", "RefEnter"}
_LOOP_EXIT = {"Exit", "RefExit"}


def _loop_ops(nodes: list[Any]) -> int:
    """Ops inside tf.while_loop bodies (control flow v1 frames in a partition graph):
    those fed, directly or not, by an Enter without an Exit in between. They run once
    per iteration, e.g. per timestep of an RNN."""
    inside = {n.name for n in nodes if n.op in _LOOP_ENTRY}
    grew = True
    while grew:  # to a fixed point: NextIteration -> Merge cycles end it
        grew = False
        for n in nodes:
            if n.name in inside or n.op in _LOOP_EXIT:
                continue
            if any(i.lstrip("^").split(":")[0] in inside for i in n.input):
                inside.add(n.name)
                grew = True
    return sum(1 for n in nodes if n.name in inside and not n.op.startswith("_")
               and n.op not in _INFRASTRUCTURE_OPS)


def finish_placement_audit() -> dict[str, Any]:
    """``{"ops_by_device": {"CPU:0": n, "GPU:0": m}, "cpu_op_types": {op: count},
    "loop_ops": k}`` (k of the ops are inside while-loop bodies)."""
    from tensorflow.python.eager import context

    ctx = context.context()
    try:
        md = ctx.export_run_metadata()
    finally:
        ctx.disable_run_metadata()
    by_device: dict[str, int] = {}
    cpu_types: dict[str, int] = {}
    loop_ops = 0
    for fg in getattr(md, "function_graphs", []):
        for pg in fg.partition_graphs:
            loop_ops += _loop_ops(list(pg.node))
            for node in pg.node:
                if node.op.startswith("_") or node.op in _INFRASTRUCTURE_OPS:
                    continue
                device = node.device.rsplit("device:", 1)[-1] if node.device else "unknown"
                by_device[device] = by_device.get(device, 0) + 1
                if device.startswith("CPU"):
                    cpu_types[node.op] = cpu_types.get(node.op, 0) + 1
    return {"ops_by_device": by_device, "cpu_op_types": cpu_types, "loop_ops": loop_ops}
