"""Reasons from measured evidence: one rule per cause (dispatch, the accelerator's cost,
precision, the input pipeline, ...), each a function of the :class:`Evidence`.

Every reason cites the figures it rests on; a rule whose evidence was not measured says
nothing rather than guessing. The evidence and its pairing of step times are in
:mod:`devicebench.advisor.evidence`; the code applying a recommendation in
:mod:`devicebench.advisor.snippet`.
"""

from __future__ import annotations

from dataclasses import dataclass

from devicebench.advisor.evidence import (
    Evidence,
    Pair,
    Reason,
    find_trial,
    median_step_of,
    paired_steps,
)
from devicebench.advisor.figures import FUSING_BACKENDS, DeviceFigures
from devicebench.fmt import fmt_time
from devicebench.trials.result import TrialResult

__all__ = ["RULES", "Evidence", "Pair", "Reason", "explain"]

OVERHEAD_BOUND_FRACTION = 0.02  # below 2% of the device's measured rate


def overhead_bound(ev: Evidence) -> list[Reason]:
    b = ev.baseline
    step = median_step_of(b)
    if step is None or not b.flops_per_step or not ev.device_gflops:
        return []
    achieved = b.flops_per_step / step / 1e9
    frac = achieved / ev.device_gflops
    if frac >= OVERHEAD_BOUND_FRACTION:
        return []
    return [Reason("overhead-bound", (
        f"overhead-bound: {b.flops_per_step:,.0f} FLOPs per step in {fmt_time(step)} is "
        f"{achieved:.3g} GFLOP/s, {frac * 100:.2g}% of this {b.spec.device}'s measured "
        f"{ev.device_gflops:.0f} GFLOP/s matmul rate ({ev.device_rate_source}); the step "
        "time is spent dispatching "
        "tiny operations, not computing. A faster device cannot help; fewer, larger "
        "operations can (a compiled loop, or a larger batch, which changes the training)"))]


@dataclass(frozen=True)
class Launches:
    """What one training step launches, as the trial counted it."""

    count: int  # ops or kernels run per step (loops unrolled)
    text: str  # how it was counted, for the reason
    approx: str  # "~" (a loop's count is multiplied out) or "≥ " (a lower bound)
    per_timestep: int | None = None  # for a recurrent loop: per timestep


def launches(r: TrialResult, workload_tags: tuple[str, ...] = ()) -> Launches | None:
    """Ops or kernels one step of ``r`` runs: TensorFlow's from the partition graphs of
    its first step (a while-loop body once per timestep), JAX's from XLA's compiled
    program (loops by their proven trip count), torch's from the profiler."""
    p = r.placement or {}
    if p.get("kernels_per_step"):
        n, trips = int(p["kernels_per_step"]), int(p.get("loop_trips") or 0)
        loop, written = int(p.get("loop_kernels") or 0), int(p.get("kernels_in_program") or 0)
        if trips > 1 and loop:
            return Launches(n, (f"~{n:,} kernels run per step ({p['kernel_source']}: "
                                f"{written} in the program, {loop} of them in loops that "
                                f"run {trips} times)"), "~",
                            per_timestep=loop if "recurrent" in workload_tags else None)
        return Launches(n, f"{n:,} kernels run per step ({p['kernel_source']})", "~")
    if r.spec.backend != "tensorflow" or r.jit_resolved:
        return None
    n = sum(p.get("ops_by_device", {}).values())
    if not n:
        return None
    loop = int(p.get("loop_ops", 0))
    shape = p.get("input_shape") or []
    timesteps = int(shape[0]) if loop and "recurrent" in workload_tags and len(shape) == 2 \
        else 0
    if timesteps > 1:
        return Launches(n - loop + loop * timesteps, (
            f"~{n - loop + loop * timesteps:,} TensorFlow ops run per step ({n} in the "
            f"graph, {loop} of them in the while-loop body, which runs once for each of the "
            f"{timesteps} timesteps)"), "~", per_timestep=loop)
    return Launches(n, f"at least {n} TensorFlow ops run per step (counted in the graph" + (
        f"; {loop} are in a while-loop body that runs once per iteration)" if loop
        else ")"), "≥ ")


def dispatch_cost(ev: Evidence) -> list[Reason]:
    """Ops or kernels per step (:func:`launches`) x the per-op cost inside a compiled
    graph that ``devicebench ops`` measured on the same device and backend."""
    b = ev.baseline
    step = median_step_of(b)
    f = ev.device_figures.get(b.spec.device) or ev.figures
    n = launches(b, ev.workload_tags)
    if step is None or f is None or n is None:
        return []
    per_op = f.per_op_seconds.get(b.spec.backend)
    if not per_op:
        return []
    cost = n.count * per_op
    share = cost / step
    if share > 1:
        verdict = ("more than the step itself (the executor can overlap independent ops, "
                   "so this overestimates): the step is dispatch; fewer, larger ops (XLA, "
                   "or the JAX backend) are where the time is")
    elif share >= 0.5:
        verdict = ("most of the step is dispatch: fewer, larger ops (XLA, or the JAX "
                   "backend) are where the time is")
    else:
        verdict = "dispatch is a part of the step, not all of it"
    return [Reason("dispatch-cost", (
        f"dispatch: {n.text}; at {fmt_time(per_op)} per op inside a graph on "
        f"{b.spec.backend}/{f.device} ({f.source}, in-graph mode: "
        + ("a matmul chain, each its own kernel (XLA fuses element-wise chains)"
           if b.spec.backend in FUSING_BACKENDS else "the cheapest op measured")
        + f", {f.per_op_labels.get(b.spec.backend, '?')}) that is "
        f"{n.approx}{fmt_time(cost)} of the {fmt_time(step)} step ({share:.0%}): {verdict}"))]


def recurrent_loop(ev: Evidence) -> list[Reason]:
    if "recurrent" not in ev.workload_tags:
        return []
    # A TF trial screened out on its set-up steps is compared on set-up steps.
    tf = [r for s, r in ev.results.items() if s.backend == "tensorflow" and r.status == "ok"]
    jx = [r for s, r in ev.results.items() if s.backend == "jax" and s.jit != "off"
          and s.precision == "float32" and median_step_of(r)]
    if not tf or not jx:
        return []
    best_jax = min(jx, key=median_step_of)
    pairs = [(p, r) for r in tf if (p := paired_steps(r, best_jax))]
    if not pairs:
        return []
    pair, best_tf = min(pairs, key=lambda pr: pr[0].a / pr[0].b)
    s_tf, s_jax = pair.a, pair.b
    ratio = s_tf / s_jax
    if ratio < 1.5:
        return []
    return [Reason("recurrent-loop", (
        f"recurrent loop: on the TensorFlow backend Keras runs the RNN as a tf.while_loop "
        f"that launches a few tiny ops per timestep; the JAX backend compiles the whole loop "
        f"(lax.scan) into one XLA program: best TF {fmt_time(s_tf)}/step "
        f"({best_tf.spec.label}) vs JAX {fmt_time(s_jax)}/step, {ratio:.1f}x{pair.source}"))]


def sparse_embedding(ev: Evidence) -> list[Reason]:
    """Why a candidate on another backend trains an Embedding model differently from a
    TensorFlow baseline. TF hands an Embedding's gradient to the optimizer as
    ``tf.IndexedSlices`` (a row per token occurrence) and Keras 3's TF optimizer applies
    them with ``scatter_add`` (keras/src/backend/tensorflow/optimizer.py): a moment
    optimizer's estimates move only at the rows looked up, once per occurrence; JAX and
    torch update from the dense, summed gradient. Plain SGD is the same math on all."""
    if "embedding" not in ev.workload_tags or ev.baseline.spec.backend != "tensorflow":
        return []
    differ = sorted(s.label for s, r in ev.results.items()
                    if s.backend != "tensorflow" and r.loss_verdict == "differs")
    if not differ:
        return []
    return [Reason("sparse-embedding", (
        f"embedding: from the same initial weights {', '.join(differ)} reached a different loss; "
        "the likely cause is that the backends update an Embedding differently, neither run "
        "being wrong: on "
        "TensorFlow its gradient reaches the optimizer as tf.IndexedSlices, one row per "
        "token occurrence, and Keras applies them sparsely (Adam's or RMSprop's moments "
        "change only at the rows looked up, once per occurrence); JAX and torch apply the "
        "dense, summed gradient. A backend switch would change your training; with plain "
        "SGD the backends agree"))]


def xla_cost(ev: Evidence) -> list[Reason]:
    out = []
    for spec, r in ev.results.items():
        if spec.jit != "on" or spec.precision != "float32" or spec.backend == "jax":
            continue
        ref = find_trial(ev, spec, jit="auto") or find_trial(ev, spec, jit="off")
        pair = paired_steps(r, ref)
        if pair is None or ref is None:
            if r.status not in ("ok", "skipped") and r.error:
                out.append(Reason("xla-failed", f"jit_compile=True on {spec.backend}: "
                                  f"{r.status}: {r.error.splitlines()[0]}"))
            continue
        s_on, s_off = pair.a, pair.b
        extra = (r.first_step_seconds or 0) - (ref.first_step_seconds or 0)
        if s_on >= s_off:
            out.append(Reason("xla-slower", (
                f"jit_compile=True on {spec.backend}/{spec.device} is {s_on / s_off:.1f}x "
                f"slower per step here ({fmt_time(s_on)} vs {fmt_time(s_off)}{pair.source}) "
                f"and costs {max(extra, 0):.1f} s more to compile: it never pays back on this "
                "machine")))
        else:
            saving = s_off - s_on
            steps = max(extra, 0) / saving if saving > 0 else float("inf")
            epochs = steps / max(r.steps_per_epoch, 1)
            within = ("within" if epochs <= ev.epochs else "only after")
            out.append(Reason("xla-payback", (
                f"jit_compile=True on {spec.backend}/{spec.device}: {s_off / s_on:.1f}x faster "
                f"per step ({fmt_time(s_on)} vs {fmt_time(s_off)}{pair.source}); its extra "
                f"{max(extra, 0):.1f} s of compilation is paid back after {steps:,.0f} "
                f"steps ({epochs:.2g} epoch{'' if epochs <= 1 else 's'}), {within} the "
                f"{ev.epochs} epochs planned")))
    return out


def mixed_precision(ev: Evidence) -> list[Reason]:
    out = []
    flags = set(ev.cpu_flags)
    for spec, r in ev.results.items():
        if spec.precision == "float32":
            continue
        pair = paired_steps(r, find_trial(ev, spec, precision="float32"))
        if pair is None:
            continue
        s_mp, s_32 = pair.a, pair.b
        if spec.device == "cpu":
            if spec.precision == "mixed_float16":
                hw = ("this CPU has AVX512-FP16, but most float16 kernels still convert to "
                      "float32 and back" if "avx512_fp16" in flags else
                      "this CPU has no native float16 arithmetic (no AVX512-FP16/AMX-FP16): "
                      "float16 is converted to float32 and back around every op")
            else:
                hw = ("this CPU has bfloat16 instructions (" +
                      ", ".join(sorted(flags & {"avx512_bf16", "amx_bf16"})) + ")"
                      if flags & {"avx512_bf16", "amx_bf16"} else
                      "this CPU has no bfloat16 instructions")
        elif spec.precision == "tf32":
            hw = ("TF32 keeps float32's range with a 10-bit mantissa; tensor cores run it "
                  "on this GPU (compute capability >= 8.0)")
        else:
            hw = "speed depends on the GPU's tensor cores (compute capability >= 7.0)"
        if s_mp >= s_32:
            out.append(Reason("mixed-precision-slower", (
                f"{spec.precision} on {spec.backend}/{spec.device} is {s_mp / s_32:.1f}x "
                f"slower per step ({fmt_time(s_mp)} vs {fmt_time(s_32)} in float32{pair.source}): "
                f"{hw}")))
        else:
            out.append(Reason("mixed-precision-faster", (
                f"{spec.precision} on {spec.backend}/{spec.device} is {s_32 / s_mp:.1f}x "
                f"faster per step ({fmt_time(s_mp)} vs {fmt_time(s_32)}{pair.source}): {hw}; "
                f"it changes the math — loss verdict: {r.loss_verdict} ({r.loss_detail})")))
    return out


INPUT_BOUND_SHARE = 0.5


def input_time(ev: Evidence) -> list[Reason]:
    """The baseline's input pipeline timed alone vs its step time."""
    b = ev.baseline
    step, per_batch = median_step_of(b), b.input_seconds_per_batch
    if step is None or not per_batch:
        return []
    share = per_batch / step
    how = ("its tf.data pipeline" if b.spec.pipeline == "tf.data" else
           "Keras' pipeline for NumPy arrays (shuffle, slice, batch)")
    measured = (f"{how} alone delivers a batch in {fmt_time(per_batch)}, {share:.0%} of the "
                f"{fmt_time(step)} step")
    if share >= INPUT_BOUND_SHARE:
        return [Reason("input-bound", (
            f"input-bound: {measured}; training waits for data unless the pipeline "
            "overlaps the step — build a tf.data pipeline with .cache() and "
            ".prefetch(tf.data.AUTOTUNE), do the preprocessing once ahead of training, or "
            "use a larger batch (changes the training)"))]
    return [Reason("input-time", (
        f"not input-bound: {measured}; the step is training, not waiting for data"))]


def pipeline_and_threads(ev: Evidence) -> list[Reason]:
    out = []
    for spec, r in ev.results.items():
        if spec.pipeline == "tf.data":
            pair = paired_steps(r, find_trial(ev, spec, pipeline="arrays"))
            if pair:
                a, b = pair.a, pair.b
                word = "faster" if a < b else "no faster"
                out.append(Reason("input-pipeline", (
                    f"tf.data with prefetch is {word} than NumPy arrays on {spec.backend} "
                    f"({fmt_time(a)} vs {fmt_time(b)} per step{pair.source}): "
                    + ("the input was part of the step time" if a < 0.95 * b else
                       "training is not waiting for input here"))))
        if spec.threads == 1:
            pair = paired_steps(r, find_trial(ev, spec, threads=None))
            if pair and pair.a < 0.95 * pair.b:
                a, b = pair.a, pair.b
                out.append(Reason("threads", (
                    f"one intra-op thread is {b / a:.1f}x faster than all cores on "
                    f"{spec.backend} ({fmt_time(a)} vs {fmt_time(b)}{pair.source}): the ops are "
                    "too small to split, so handing them to a thread pool costs more than it "
                    "saves")))
    return out


def cpu_fallback(ev: Evidence) -> list[Reason]:
    """Ops of a GPU trial's training step that TensorFlow placed on the CPU."""
    out = []
    for spec, r in ev.results.items():
        if spec.device == "cpu" or not r.placement:
            continue
        by_device = r.placement.get("ops_by_device", {})
        on_cpu = sum(n for d, n in by_device.items() if d.startswith("CPU"))
        total = sum(by_device.values())
        if not on_cpu:
            continue
        top = sorted(r.placement.get("cpu_op_types", {}).items(), key=lambda kv: -kv[1])[:5]
        step = median_step_of(r)
        out.append(Reason("cpu-fallback", (
            f"CPU fallback: {on_cpu} of {total} ops of the training step ran on the CPU in "
            f"the {spec.label} trial ({', '.join(f'{op} x{n}' for op, n in top)}); each "
            "crossing copies tensors between host and device"
            + (f" and adds dispatch latency to a {fmt_time(step)} step" if step else ""))))
    return out


def _accelerator_pairs(ev: Evidence) -> list[tuple[TrialResult, TrialResult]]:
    """(accelerator trial, the same configuration on the CPU), both measured; the
    baseline's backend first."""
    out = []
    for spec, r in ev.results.items():
        if spec.device == "cpu" or r.status != "ok":
            continue
        cpu = ev.results.get(spec.with_(device="cpu"))
        if cpu is not None and cpu.status == "ok":
            out.append((r, cpu))
    out.sort(key=lambda p: (p[0].spec.backend != ev.baseline.spec.backend,
                            p[0].spec != ev.baseline.spec and p[1].spec != ev.baseline.spec))
    return out


def _launch_share(ev: Evidence, r: TrialResult, step: float,
                  f: DeviceFigures | None) -> list[str]:
    """The trial's launches per step x its device's per-op cost, against its step."""
    n = launches(r, ev.workload_tags)
    per_op = f.per_op_seconds.get(r.spec.backend) if f else None
    if n is None or not per_op:
        return []
    where = "the CPU" if r.spec.device == "cpu" else r.spec.device
    t = (f"; {n.per_timestep} of them each timestep" if n.per_timestep else "")
    return [f"on {where} {n.text}{t}: at {fmt_time(per_op)} per op that is {n.approx}"
            f"{fmt_time(n.count * per_op)} of its {fmt_time(step)} step "
            f"({n.count * per_op / step:.0%})"]


def accelerator_cost(ev: Evidence) -> list[Reason]:
    """Why the accelerator wins or loses, from the measurements: the step on both
    devices, the arithmetic at the device's measured peak, the fixed cost of a call
    and of an op inside a compiled program on each device (``devicebench ops``), and
    for a recurrent model the time per timestep."""
    pairs = _accelerator_pairs(ev)
    if not pairs:
        return []
    acc_r, cpu_r = pairs[0]
    pair = paired_steps(acc_r, cpu_r)
    if pair is None:
        return []
    a, c = pair.a, pair.b
    dev, be = acc_r.spec.device, acc_r.spec.backend
    fa, fc = ev.device_figures.get(dev), ev.device_figures.get("cpu")
    flops = acc_r.flops_per_step
    facts = [f"on {dev} a {be} training step takes {fmt_time(a)}, on the CPU {fmt_time(c)}"
             f"{pair.source}"]
    if flops and fa is not None and fa.peak_gflops:
        work = flops / (fa.peak_gflops * 1e9)
        facts.append(f"its {flops:,.0f} FLOPs would take {fmt_time(work)} at {dev}'s measured "
                     f"peak ({fa.peak_gflops:,.0f} GFLOP/s): "
                     + ("the rest of the step is fixed cost" if work < 0.1 * a else
                        "the arithmetic is a large part of the step"))
    t = ev.timesteps if "recurrent" in ev.workload_tags and ev.timesteps else None
    if t:
        per = f"{fmt_time(a / t)} per timestep on {dev} vs {fmt_time(c / t)} on the CPU"
        facts.append(f"its {t}-timestep loop runs one timestep after another: {per}"
                     + (f", for {flops / t:,.0f} FLOPs of arithmetic each" if flops else ""))
    costs = []
    for kind, attr in (("one compiled call (a round trip to the device and back)",
                        "call_seconds"),
                       ("one op inside a compiled program", "per_op_seconds")):
        on_acc = getattr(fa, attr, {}).get(be) if fa else None
        on_cpu = getattr(fc, attr, {}).get(be) if fc else None
        if on_acc and on_cpu:
            costs.append(f"{kind} costs {fmt_time(on_acc)} on {dev} vs {fmt_time(on_cpu)} "
                         "on the CPU")
    if costs:
        facts.append("whatever the work, " + "; ".join(costs) + f" ({fa.source})")
    facts += _launch_share(ev, acc_r, a, fa) + _launch_share(ev, cpu_r, c, fc)
    if a > 1.2 * c:
        return [Reason("accelerator-launch-bound", (
            f"launch-bound: {dev} is {a / c:.1f}x slower than the CPU here — "
            + "; ".join(facts) + ". Each step (each timestep, for a loop) is many tiny "
            "kernels whose fixed launch and synchronisation cost the GPU pays whatever the "
            "work, and the CPU pays far less: keep this model on the CPU, or give each "
            "kernel more work (a larger batch or wider layers — which changes the "
            "training)"))]
    if c > 1.2 * a:
        extra = ""
        if flops and fa is not None and fa.peak_gflops and fc is not None and fc.peak_gflops:
            extra = (f"; it computes at {flops / a / 1e9:,.0f} GFLOP/s on {dev} "
                     f"({flops / a / 1e9 / fa.peak_gflops:.1%} of its peak) vs "
                     f"{flops / c / 1e9:,.0f} GFLOP/s on the CPU")
        return [Reason("accelerator-compute", (
            f"enough work per step for the accelerator: {dev} is {c / a:.1f}x faster than "
            "the CPU — " + "; ".join(facts) + extra))]
    return [Reason("accelerator-even", (
        f"{dev} and the CPU are within 1.2x of each other — " + "; ".join(facts)
        + ": the step is too small for the accelerator's arithmetic to matter"))]


def float32_precision(ev: Evidence) -> list[Reason]:
    """Float32 is not the same math on JAX and torch on NVIDIA GPUs from Ampere on."""
    cc = ev.gpu_compute_capability
    try:
        major = int(cc.split(".")[0]) if cc else 0
    except ValueError:
        major = 0
    gpus = {s.backend for s, r in ev.results.items()
            if s.device.startswith("gpu:") and s.precision == "float32" and r.status == "ok"}
    if major < 8 or "jax" not in gpus:
        return []
    peak = ""
    f = ev.device_figures.get("gpu:0")
    if f is not None and f.peak_precision:
        peak = (f" (devicebench ops measured this GPU's matmul peak, "
                f"{f.peak_gflops:,.0f} GFLOP/s, in {f.peak_precision})")
    torch_part = (" torch leaves TF32 off for matmuls (torch.backends.cuda.matmul."
                  "allow_tf32 = False; cuDNN convolutions use it by default), so jax/gpu and "
                  "torch/gpu do different math under the same name;" if "torch" in gpus
                  else "")
    return [Reason("float32-precision", (
        f"precision: on this GPU (compute capability {cc}) jax runs float32 matmuls and "
        "convolutions in TF32 by default (10-bit mantissa; "
        "jax.config.update('jax_default_matmul_precision', 'highest') restores full "
        f"float32){peak};{torch_part} the loss check still holds them to float32's "
        "tolerance"))]


RULES = (accelerator_cost, float32_precision, overhead_bound, dispatch_cost, cpu_fallback,
         recurrent_loop, sparse_embedding, xla_cost, mixed_precision, input_time,
         pipeline_and_threads)


def explain(ev: Evidence) -> list[Reason]:
    """All reasons the measured evidence supports."""
    reasons: list[Reason] = []
    for rule in RULES:
        reasons.extend(rule(ev))
    return reasons
