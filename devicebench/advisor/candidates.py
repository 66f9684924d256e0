"""The configurations the advisor tries, in priority order, and the headline's
accelerator-vs-CPU partner."""

from __future__ import annotations

from devicebench.env.snapshot import EnvSnapshot
from devicebench.trials.plan import installed_backends, machine_devices, tf32_unsupported
from devicebench.trials.spec import TrialSpec


def _has_bf16(snapshot: EnvSnapshot) -> bool:
    flags = set(snapshot.host.cpu_flags)
    return bool(flags & {"avx512_bf16", "amx_bf16"}) or snapshot.is_apple_silicon


def candidate_space(
    baseline: TrialSpec,
    snapshot: EnvSnapshot,
    *,
    allow_batch_change: bool = False,
    workload_batch_size: int | None = None,
    compute_heavy: bool = False,
) -> list[TrialSpec]:
    """Every candidate worth measuring, most promising first (the baseline excluded).

    Order: the other backends and devices at their defaults (the biggest wins for
    dispatch-bound models: seed 000's RNN is 15-25x faster on Keras' JAX backend); then
    jit flips and reduced precision — first instead when ``compute_heavy`` (many FLOPs
    per step, no recurrent loop: arithmetic, not dispatch, is what there is to save);
    then the tf.data pipeline; one thread; batch sizes (only when allowed, as they change
    the training itself). The order only decides what a small budget tries; what is
    recommended comes from the measurements.
    """
    backends = installed_backends(snapshot)
    devices = [d for d in machine_devices(snapshot) if d != "mps"]
    defaults = dict(jit="auto", precision="float32", pipeline="arrays", threads=None,
                    steps_per_execution=1)
    out: list[TrialSpec] = []

    def add(spec: TrialSpec) -> None:
        if spec != baseline and spec not in out:
            out.append(spec)

    def other_backends_and_devices() -> None:
        for device in [baseline.device] + [d for d in devices if d != baseline.device]:
            for backend in [b for b in backends if b != baseline.backend] + [baseline.backend]:
                add(baseline.with_(backend=backend, device=device, **defaults))
        if "torch" in backends and "mps" in machine_devices(snapshot):
            add(baseline.with_(backend="torch", device="mps", **defaults))

    def jit_and_precision() -> None:
        # On a CPU with bfloat16 instructions bf16 comes first: XLA's CPU kernels were
        # 3-5x slower than TensorFlow's own on mnist-cnn here (DESIGN.md), bf16 1.4x faster.
        if baseline.device == "cpu" and _has_bf16(snapshot):
            add(baseline.with_(precision="mixed_bfloat16"))
        add(baseline.with_(jit="on" if baseline.jit != "on" else "off"))
        if _has_bf16(snapshot):
            add(baseline.with_(precision="mixed_bfloat16"))
        add(baseline.with_(precision="mixed_float16"))
        # torch alone keeps float32 matmuls out of TF32 by default (JAX and TensorFlow
        # use it on Ampere and newer): its switch is a candidate that changes the math.
        if (baseline.backend == "torch" and baseline.precision == "float32"
                and not tf32_unsupported(baseline.device, snapshot)):
            add(baseline.with_(precision="tf32"))

    if compute_heavy:
        jit_and_precision()
        other_backends_and_devices()
    else:
        other_backends_and_devices()
        jit_and_precision()
    base_be = baseline.backend
    if "tensorflow" in backends:
        add(baseline.with_(pipeline="tf.data"))
    for backend in backends:
        if backend != base_be:
            flip = baseline.with_(backend=backend, **defaults)
            add(flip.with_(jit="off" if backend == "jax" else "on"))
    if (snapshot.host.cpu_cores_logical or 1) > 1 and baseline.device == "cpu":
        add(baseline.with_(threads=1))
    batch = baseline.batch_size or workload_batch_size
    if allow_batch_change and batch:
        for factor in (2, 4):
            add(baseline.with_(batch_size=batch * factor))
    return out


COMPUTE_HEAVY_FLOPS_PER_STEP = 1e7


def is_compute_heavy(flops_per_step: float | None, tags: tuple[str, ...]) -> bool:
    """Many FLOPs per step and no per-timestep loop (whose cost is dispatch)."""
    return bool(flops_per_step and flops_per_step >= COMPUTE_HEAVY_FLOPS_PER_STEP
                and "recurrent" not in tags)


def accelerator_for(backend: str, snapshot: EnvSnapshot) -> str | None:
    """The accelerator ``backend`` would use on this machine: ``mps`` for torch on Apple
    Silicon, else the first GPU; None when the machine has none."""
    devices = machine_devices(snapshot)
    if backend == "torch" and "mps" in devices:
        return "mps"
    return next((d for d in devices if d.startswith("gpu:")), None)


def headline_partner(baseline: TrialSpec, snapshot: EnvSnapshot) -> TrialSpec | None:
    """The baseline on the other side of the accelerator question: the same
    configuration on the CPU when the baseline runs on an accelerator, on the
    accelerator when it runs on the CPU; None on a machine without one."""
    if baseline.device != "cpu":
        return baseline.with_(device="cpu")
    acc = accelerator_for(baseline.backend, snapshot)
    return baseline.with_(device=acc) if acc else None
