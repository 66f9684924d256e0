"""`devicebench ops` without a framework: sizes, configs, planning, the cost-model fit,
speed-ups and crossovers on synthetic curves, analysis and verdicts, and the timed
protocol run inline on numpy."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from devicebench.env.snapshot import EnvSnapshot, HostInfo, NvidiaGpu, NvidiaSmi
from devicebench.errors import SpecError
from devicebench.measure.stats import Ratio, ratio_of_medians
from devicebench.ops.analysis import analyse
from devicebench.ops.fit import crossover_size, fit_cost_model
from devicebench.ops.result import OpsPoint, OpsWorkerResult
from devicebench.ops.runner import ops_env, plan_ops
from devicebench.ops.spec import (
    OpsConfig,
    op_bytes,
    op_flops,
    op_work,
    parse_sizes,
    side_for_work,
)
from devicebench.ops.verdict import fmt_pct, fmt_rate
from devicebench.ops.worker import predict_call, run_config

# -- sizes and configs ----------------------------------------------------------------


@pytest.mark.parametrize(("text", "sizes"), [
    ("2,8,32", (2, 8, 32)),
    ("32, 2,8,8", (2, 8, 32)),
    ("2..16", (2, 4, 8, 16)),
    ("2..4096:4", (2, 8, 32, 128, 512, 2048, 4096)),
    ("5..5", (5,)),
])
def test_parse_sizes(text, sizes):
    assert parse_sizes(text) == sizes


@pytest.mark.parametrize("text", ["", "abc", "2,x", "0,4", "-2", "2..x", "8..2", "2..8:1",
                                  "1..100000"])
def test_parse_sizes_rejects_bad_input(text):
    with pytest.raises(SpecError, match="size"):
        parse_sizes(text)


@pytest.mark.parametrize(("changes", "needle"), [
    ({"backend": "mxnet"}, "backend"),
    ({"ops": ("multiply", "fft")}, "op"),
    ({"modes": ("lazy",)}, "mode"),
    ({"device": "cuda"}, "device"),
    ({"threads": 0}, "threads"),
    ({"chain": 1}, "chain"),
    ({"blocks": 1}, "blocks"),
    ({"block_seconds": 0}, "positive"),
])
def test_config_rejects_bad_values_naming_the_field(changes, needle):
    with pytest.raises(SpecError, match=needle):
        OpsConfig(**{"backend": "numpy", **changes})


def test_config_round_trips_through_json_dicts():
    c = OpsConfig("jax", ops=("matmul",), sizes=(2, 64), threads=1)
    assert OpsConfig.from_dict(c.to_dict()) == c


def test_work_counts():
    assert op_flops("matmul", 64) == 2 * 64**3
    assert op_bytes("multiply", 64) == 3 * 64 * 64 * 4
    assert op_work("matmul", 8) == op_flops("matmul", 8)
    assert op_work("softmax", 8) == op_bytes("softmax", 8)
    assert side_for_work("matmul", op_flops("matmul", 100)) == pytest.approx(100, rel=1e-6)
    assert side_for_work("add", op_bytes("add", 300)) == pytest.approx(300, rel=1e-6)


# -- planning -------------------------------------------------------------------------


def _snapshot(gpu: bool = False, apple: bool = False) -> EnvSnapshot:
    host = HostInfo(os="Darwin" if apple else "Linux", machine="arm64" if apple else "x86_64")
    return EnvSnapshot(host=host, distributions={"tensorflow": "2.21.0", "jax": "0.10.2"},
                       nvidia_smi=NvidiaSmi(gpus=[NvidiaGpu(index=0, name="H200")])
                       if gpu else None)


def test_plan_cpu_only_says_no_accelerator_and_skips_missing_backends():
    plan = plan_ops(_snapshot(), backends=["torch", "jax", "numpy"], sizes=(2,))
    assert [(c.backend, c.device) for c in plan.configs] == [("numpy", "cpu"), ("jax", "cpu")]
    assert any("no accelerator found" in n for n in plan.notes)
    assert any("skipped backend torch" in n for n in plan.notes)
    assert plan.accelerators == []


def test_plan_with_a_gpu_runs_every_backend_on_it_but_numpy():
    plan = plan_ops(_snapshot(gpu=True))
    assert [(c.backend, c.device) for c in plan.configs] == [
        ("numpy", "cpu"), ("tensorflow", "cpu"), ("jax", "cpu"),
        ("tensorflow", "gpu:0"), ("jax", "gpu:0")]
    assert plan.accelerators == ["gpu:0"]
    assert not any("no accelerator" in n for n in plan.notes)


def test_plan_on_apple_silicon_gives_mps_to_torch_only():
    snap = _snapshot(apple=True)
    snap.distributions["torch"] = "2.5.0"
    pairs = {(c.backend, c.device) for c in plan_ops(snap).configs}
    assert ("torch", "mps") in pairs and ("torch", "gpu:0") not in pairs
    assert ("tensorflow", "gpu:0") in pairs and ("tensorflow", "mps") not in pairs


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"backends": ["tensorflw"]}, "unknown backend"),
    ({"devices": ["gpu:3"]}, "no device 'gpu:3'"),
    ({"ops": ("fft",)}, "unknown op"),
])
def test_plan_rejects_unknown_values(kwargs, needle):
    with pytest.raises(SpecError, match=needle):
        plan_ops(_snapshot(), **kwargs)


def test_worker_env_sets_threads_and_hides_gpus_on_cpu():
    env = ops_env(OpsConfig("numpy", threads=1), base={})
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "1"
    env = ops_env(OpsConfig("jax", threads=2), base={})
    assert env["JAX_PLATFORMS"] == "cpu" and env["CUDA_VISIBLE_DEVICES"] == ""
    assert "intra_op_parallelism_threads=2" in env["XLA_FLAGS"]
    env = ops_env(OpsConfig("torch", device="gpu:1"), base={})
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and "OMP_NUM_THREADS" not in env


# -- the cost model --------------------------------------------------------------------


def test_fit_recovers_a_known_overhead_and_rate_despite_noise_and_outliers():
    rng = np.random.default_rng(1)
    overhead, rate = 20e-6, 15e9  # 20 µs per call, 15 GB/s
    work = np.array([op_bytes("multiply", n) for n in (2, 4, 8, 16, 32, 64, 128, 256, 512,
                                                        1024, 2048, 4096)])
    t = (overhead + work / rate) * rng.lognormal(0, 0.03, work.size)
    t[3] *= 3.0  # a hiccup
    t[9] *= 0.4  # a cache regime
    fit = fit_cost_model(work, t)
    assert fit.overhead == pytest.approx(overhead, rel=0.1)
    assert fit.rate == pytest.approx(rate, rel=0.1)
    assert fit.rel_residual < 0.1


def test_fit_keeps_parameters_non_negative():
    work = np.array([1e3, 1e5, 1e7])
    constant = fit_cost_model(work, [5e-6, 5.1e-6, 4.9e-6])
    assert constant.overhead == pytest.approx(5e-6, rel=0.05) and math.isinf(constant.rate)
    linear = fit_cost_model(work, work / 1e9)
    assert linear.overhead == 0 and linear.rate == pytest.approx(1e9)
    with pytest.raises(ValueError):
        fit_cost_model([1.0], [1.0])


def test_ratio_of_medians_has_a_ci_around_the_value():
    r = ratio_of_medians([2.0, 2.2, 1.8, 2.1, 1.9], [1.0, 1.1, 0.9, 1.05, 0.95])
    assert r.value == pytest.approx(2.0)
    assert r.ci_low <= r.value <= r.ci_high and r.significant
    assert ratio_of_medians([], [1.0]) is None


def _curve(overhead: float, rate: float, work: float, rng: np.random.Generator) -> list[float]:
    return list((overhead + work / rate) * rng.lognormal(0, 0.02, 5))


def test_crossover_on_synthetic_cpu_and_gpu_curves():
    rng = np.random.default_rng(2)
    sizes = [2, 8, 32, 128, 512, 2048]
    cpu = (5e-6, 100e9)     # cheap calls, slow arithmetic
    gpu = (30e-6, 10e12)    # costly launches, fast arithmetic
    speedups = []
    for n in sizes:
        w = op_flops("matmul", n)
        speedups.append((n, ratio_of_medians(_curve(*cpu, w, rng), _curve(*gpu, w, rng))))
    # Break-even: 5e-6 + w/1e11 = 30e-6 + w/1e13 -> w ≈ 2.53 MFLOP -> n ≈ 108.
    assert crossover_size(speedups) == 128
    assert speedups[0][1].ci_high < 1  # the GPU loses clearly at 2x2


def test_crossover_edge_cases():
    win, lose, tie = Ratio(3, 2.5, 3.5, 5), Ratio(0.5, 0.4, 0.6, 5), Ratio(1.0, 0.9, 1.1, 5)
    assert crossover_size([(2, win), (4, win)]) == 2
    assert crossover_size([(2, lose), (4, lose)]) is None
    assert crossover_size([(2, lose), (4, win), (8, tie)]) is None  # not won at the end
    assert crossover_size([(2, win), (4, tie), (8, win)]) == 8  # must win from there on
    assert crossover_size([(2, lose), (4, None), (8, win)]) == 8
    assert crossover_size([]) is None


def test_predict_call_extrapolates_the_marginal_cost():
    assert predict_call([], 10.0) == 0.0
    assert predict_call([(1.0, 5.0)], 10.0) == 0.0
    assert predict_call([(10.0, 1.0), (20.0, 2.0)], 40.0) == pytest.approx(4.0)
    assert predict_call([(10.0, 2.0), (20.0, 1.0)], 40.0) == pytest.approx(1.0)  # noise


# -- analysis and verdicts ----------------------------------------------------------------


def _points(op: str, mode: str, overhead: float, rate: float, sizes: list[int],
            rng: np.random.Generator, chain: int = 1) -> list[OpsPoint]:
    out = []
    for n in sizes:
        per_call = chain * (overhead + op_work(op, n) / rate)
        k = max(1, int(0.005 / per_call))
        blocks = tuple(k * per_call * rng.lognormal(0, 0.01, 5))
        out.append(OpsPoint(op, mode, n, calls_per_block=k, chain=chain, block_seconds=blocks))
    return out


SIZES = [2, 8, 32, 128, 512, 2048]


def _workers(gpu: bool = False) -> list[OpsWorkerResult]:
    rng = np.random.default_rng(3)
    tf_points = (_points("multiply", "eager", 20e-6, 15e9, SIZES, rng)
                 + _points("multiply", "naive", 20e-6, 15e9, SIZES, rng)
                 + _points("multiply", "compiled", 250e-6, 15e9, SIZES, rng))
    # in-graph: a chain of 16 costs one compiled call's overhead plus 16 ops of 2 µs.
    for n in SIZES:
        per_op = 2e-6 + op_work("multiply", n) / 15e9
        t = 250e-6 + 16 * per_op
        tf_points.append(OpsPoint("multiply", "in-graph", n, calls_per_block=10, chain=16,
                                  block_seconds=tuple(10 * t * rng.lognormal(0, 0.005, 5))))
    workers = [
        OpsWorkerResult("numpy", "cpu", points=(_points("multiply", "eager", 1e-6, 20e9,
                                                        SIZES, rng)
                                                + _points("matmul", "eager", 2e-6, 150e9,
                                                          SIZES, rng))),
        OpsWorkerResult("tensorflow", "cpu", info={"compiled_with": "tf.function"},
                        points=tf_points),
    ]
    if gpu:
        workers.append(OpsWorkerResult("tensorflow", "gpu:0", points=(
            _points("multiply", "eager", 30e-6, 2e12, SIZES, rng)
            + [OpsPoint("multiply", "eager", 4096, status="skipped", reason="over")])))
    return workers


def test_analysis_fits_subtracts_the_call_in_graph_and_compares_with_numpy():
    a = analyse(_workers(), [], ["no accelerator found"])
    (mul,) = [o for o in a.ops if o.op == "multiply"]
    eager = mul.path("tensorflow", "cpu", "eager")
    assert eager.fit.overhead == pytest.approx(20e-6, rel=0.05)
    assert eager.fit.rate == pytest.approx(15e9, rel=0.1)
    assert eager.ref == "numpy/cpu eager"
    assert eager.dispatch_bound_below == pytest.approx(
        side_for_work("multiply", 20e-6 * 15e9), rel=0.15)
    graph = mul.path("tensorflow", "cpu", "in-graph")
    assert graph.at(2).median == pytest.approx(2e-6, rel=0.2)  # per op, call subtracted
    for size, ratio in eager.speedups:
        ref, me = mul.path("numpy", "cpu", "eager").at(size), eager.at(size)
        assert ratio.value == pytest.approx(ref.median / me.median)
    assert a.peaks["cpu"].label == "numpy/cpu eager" and a.peaks["cpu"].size == 2048
    first, bound, graph_line, compiled_line, *rest = mul.verdict
    assert first.startswith("2×2 multiply: ") and "per TensorFlow eager call on the CPU" in first
    assert "of which the arithmetic is ~3.2" in first  # 48 bytes at 15 GB/s
    assert bound.startswith("Below ~15") and "no accelerator can help there" in bound
    assert "inside one tf.function call the op costs 2." in graph_line
    assert "one tf.function call costs 2" in compiled_line and "µs of overhead" in compiled_line
    assert rest[-1] == "No accelerator on this machine: only CPU paths were compared."
    doc = a.to_dict()
    assert doc["ops"][0]["paths"][0]["points"][0]["median_s"] > 0


def test_analysis_finds_the_gpu_crossover_against_the_same_path_on_the_cpu():
    a = analyse(_workers(gpu=True), ["gpu:0"])
    (mul,) = [o for o in a.ops if o.op == "multiply"]
    gpu = mul.path("tensorflow", "gpu:0", "eager")
    assert gpu.ref == "tensorflow/cpu eager"
    # 20 µs + w/15e9 vs 30 µs + w/2e12: break-even w ≈ 151 kB -> n ≈ 112.
    assert gpu.crossover == 128
    assert gpu.skipped == [(4096, "over")]
    assert " on the CPU, 30." in mul.verdict[0] and "µs on gpu:0" in mul.verdict[0]
    assert any("On gpu:0" in line and "from 128×128" in line for line in mul.verdict)
    assert not any("No accelerator" in line for line in mul.verdict)


# -- the protocol, inline on numpy --------------------------------------------------------


def test_numpy_sweep_inline_times_blocks_and_skips_what_is_too_slow():
    config = OpsConfig("numpy", ops=("multiply", "matmul", "conv2d"),
                       sizes=(2, 16, 512, 1024, 2048), block_seconds=0.001, blocks=3,
                       max_call_seconds=0.0005)
    result = run_config(config)
    assert result.status == "ok" and result.info["modes"] == ["eager"]
    assert {p.op for p in result.points} == {"multiply", "matmul"}  # numpy has no conv2d
    small = [p for p in result.points if p.size == 2]
    for p in small:
        assert p.status == "ok" and p.calls_per_block > 1 and len(p.block_seconds) == 3
        assert sum(p.block_seconds) >= 0.001  # blocks last about block_seconds each
    # Once a size is predicted (or measured) over the per-call limit, larger ones are skipped.
    biggest = next(p for p in result.points if p.op == "matmul" and p.size == 2048)
    assert biggest.status == "skipped" and "limit" in biggest.reason


def test_naive_verdict_only_when_the_unsynced_loop_is_clearly_faster():
    rng = np.random.default_rng(4)
    eager = _points("softmax", "eager", 10e-6, 10e9, SIZES, rng)
    same = _points("softmax", "naive", 10e-6, 10e9, SIZES, rng)  # synchronous: equal
    asyncy = _points("softmax", "naive", 10e-6, 1e15, SIZES, rng)  # enqueue only
    quiet = analyse([OpsWorkerResult("jax", "cpu", points=eager + same)])
    assert not any("without a sync" in line for line in quiet.ops[0].verdict)
    loud = analyse([OpsWorkerResult("jax", "cpu", points=eager + asyncy)])
    (line,) = [v for v in loud.ops[0].verdict if "without a sync" in v]
    assert line.startswith("JAX on cpu: the usual benchmark loop") and "at 2048×2048" in line


# -- device syncs (the GPU paths, checked without a GPU) ----------------------------------


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str):
        def record(*args, **kwargs):
            self.calls.append(name)
            return self

        return record

    def __getitem__(self, key):
        self.calls.append("slice")
        return self


def test_torch_syncs_the_device_it_runs_on():
    from types import SimpleNamespace

    from devicebench.ops.kernels.torch import Kernels

    for kind, expected in (("cuda", ["cuda.synchronize"]), ("mps", ["mps.synchronize"]),
                           ("cpu", [])):
        calls: list[str] = []
        k = Kernels.__new__(Kernels)
        k.dev = SimpleNamespace(type=kind)
        k.torch = SimpleNamespace(
            cuda=SimpleNamespace(synchronize=lambda c=calls: c.append("cuda.synchronize")),
            mps=SimpleNamespace(synchronize=lambda c=calls: c.append("mps.synchronize")))
        k.sync(object())
        assert calls == expected


def test_jax_and_tensorflow_syncs_fetch_or_block():
    from devicebench.ops.kernels.jax import Kernels as JaxKernels
    from devicebench.ops.kernels.tensorflow import Kernels as TfKernels

    out = _Recorder()
    JaxKernels.__new__(JaxKernels).sync(out)
    assert out.calls == ["block_until_ready"]
    tf = _Recorder()
    k = TfKernels.__new__(TfKernels)
    k.tf, k.dev = tf, "/GPU:0"
    k.sync(_Recorder())
    assert tf.calls == ["reshape", "slice", "numpy"]  # one element, never the whole tensor


def test_a_stalled_block_is_cut_short_and_keeps_its_per_call_rate():
    from devicebench.ops.worker import time_block

    calls = []

    def slow() -> None:
        calls.append(1)
        time.sleep(0.001)

    seconds, _ = time_block(slow, 10_000, None, limit=0.05)
    assert len(calls) < 10_000  # stopped early, not after ~10 s
    assert seconds == pytest.approx(10_000 * 0.001, rel=0.5)  # scaled to the whole block
    fast, _ = time_block(lambda: None, 100, None, limit=10.0)
    assert fast < 0.01


RECORDED_OPS = Path(__file__).resolve().parents[1] / "fixtures" / "recorded" / "h200" / "ops.json"


def _recorded_h200_workers() -> list[OpsWorkerResult]:
    """The H200's raw sweep rebuilt from its recorded ``ops --json`` (per-call samples x
    calls per block; in-graph chains from the per-op samples and the paired compiled
    call), so the real analysis runs on what the H200 measured."""
    doc = json.loads(RECORDED_OPS.read_text())
    chain = int(doc["settings"]["chain"])
    workers = {(w["backend"], w["device"]): OpsWorkerResult(
        w["backend"], w["device"], w["status"], w["error"], dict(w["info"]))
        for w in doc["workers"]}
    for op in doc["ops"]:
        compiled = {(p["backend"], p["device"], q["size"]): q["samples_s"]
                    for p in op["paths"] if p["mode"] == "compiled" for q in p["points"]}
        for p in op["paths"]:
            w = workers[(p["backend"], p["device"])]
            for q in p["points"]:
                per_call, n = q["samples_s"], q["calls_per_block"]
                if p["mode"] == "in-graph":
                    base = compiled[(p["backend"], p["device"], q["size"])]
                    if len(base) != len(per_call):  # the analysis subtracted the median
                        base = [float(np.median(base))] * len(per_call)
                    per_call = [s * (chain - 1) + o for s, o in zip(per_call, base, strict=True)]
                w.points.append(OpsPoint(op["op"], p["mode"], q["size"], calls_per_block=n,
                                         chain=chain if p["mode"] == "in-graph" else 1,
                                         block_seconds=tuple(s * n for s in per_call),
                                         first_call_seconds=q["first_call_s"]))
            for s in p["skipped"]:
                w.points.append(OpsPoint(op["op"], p["mode"], s["size"], "skipped", s["reason"]))
    return list(workers.values())


def test_h200_fit_above_the_peak_is_flagged_and_the_peak_says_its_math():
    from devicebench.report.ops import render_ops

    doc = json.loads(RECORDED_OPS.read_text())
    a = analyse(_recorded_h200_workers(), accelerators=["gpu:0"])
    # the real analysis on the recorded samples gives the recorded figures back
    assert a.peaks["gpu:0"].flops_per_s == pytest.approx(
        doc["matmul_peak"]["gpu:0"]["flops_per_s"], rel=1e-9)
    assert a.peaks["gpu:0"].math == "TF32" and a.peaks["cpu"].math == "float32"
    matmul = next(o for o in a.ops if o.op == "matmul")
    eager = matmul.path("jax", "gpu:0", "eager")
    assert eager.pct_of_peak > 120 and eager.fit_above_peak  # the "544 TFLOP/s, 135%"
    assert 90 < eager.largest_pct_of_peak <= 100.0 + 1e-6
    assert not matmul.path("torch", "gpu:0", "eager").fit_above_peak
    assert not matmul.path("jax", "gpu:0", "naive").fit_above_peak  # flagged its own way
    assert any("torch/gpu:0: float32 matmuls run in float32 math" in n and "TF32" in n
               and "allow_tf32" in n for n in a.notes)
    assert a.to_dict()["matmul_peak"]["gpu:0"]["math"] == "TF32"
    con = Console(record=True, width=250)
    render_ops(a, console=con)
    text = con.export_text()
    row = next(line for line in text.splitlines()
               if line.strip().startswith("jax/gpu:0 eager") and "TFLOP/s" in line)
    fitted = fmt_rate(eager.fit.rate, "flops")
    assert fitted not in row and "*" in row  # never the plain fitted figure
    assert f"{fitted} ({fmt_pct(eager.pct_of_peak)})" in text  # named in the footnote
    assert "TF32 math" in text
