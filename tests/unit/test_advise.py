"""The advisor's logic on synthetic measurements (no framework, no processes)."""

from __future__ import annotations

import pytest

from devicebench.advisor.advice import advise_workload, parse_baseline
from devicebench.advisor.candidates import candidate_space, fit_to_budget
from devicebench.advisor.explain import Evidence, explain, snippet
from devicebench.advisor.search import successive_halving
from devicebench.env.snapshot import EnvSnapshot, HostInfo
from devicebench.errors import SpecError
from devicebench.trials.engine import RunOptions
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec

BASE = TrialSpec("seed-rnn")


def _result(spec: TrialSpec, step: float, *, rounds: int = 5, status: str = "ok",
            verdict: str = "same", first_step: float = 1.0, flops: float | None = 28_800,
            error: str = "") -> TrialResult:
    # Common drift across rounds, so paired ratios are exact.
    drift = [1.0, 1.1, 0.95, 1.05, 1.0, 0.9, 1.2][:rounds]
    return TrialResult(
        spec, status=status, error=error, steps_per_block=10, batch_size=32,
        steps_per_epoch=219, block_seconds=[10 * step * d for d in drift] if status == "ok"
        else [], block_rounds=list(range(rounds)) if status == "ok" else [],
        loss_verdict="reference" if spec == BASE else verdict, first_step_seconds=first_step,
        flops_per_step=flops, loss_detail="max relative difference 1e-07")


STEPS = {
    BASE: 0.007,
    BASE.with_(backend="jax"): 0.0004,
    BASE.with_(backend="torch"): 0.04,
    BASE.with_(jit="on"): 0.003,
    BASE.with_(precision="mixed_float16"): 0.02,
    BASE.with_(precision="mixed_bfloat16"): 0.008,
    BASE.with_(pipeline="tf.data"): 0.0072,
    BASE.with_(backend="jax", jit="off"): 0.4,
    BASE.with_(threads=1): 0.005,
}


class FakeMeasure:
    """Synthetic timings; records what each rung measured."""

    def __init__(self, nan: set[TrialSpec] = frozenset(), crash: set[TrialSpec] = frozenset()):
        self.calls: list[list[TrialSpec]] = []
        self.nan, self.crash = nan, crash

    def __call__(self, specs, options: RunOptions):
        self.calls.append(list(specs))
        out = []
        for s in specs:
            if s in self.crash:
                out.append(_result(s, 0, status="crashed", error="worker killed by SIGSEGV"))
            elif s in self.nan:
                out.append(_result(s, 0.0001, verdict="nan"))
            else:
                out.append(_result(s, STEPS[s], rounds=options.max_rounds if
                                   options.max_rounds < 10 else 5))
        return out


def test_successive_halving_keeps_the_fastest_and_always_measures_the_baseline():
    cands = [s for s in STEPS if s != BASE]
    fake = FakeMeasure()
    finalists, outcomes, last = successive_halving(
        BASE, cands, fake, rung_options=[RunOptions(max_rounds=2, min_rounds=2),
                                         RunOptions(max_rounds=3, min_rounds=3)])
    assert finalists == [BASE.with_(backend="jax"), BASE.with_(jit="on")]
    assert all(call[0] == BASE for call in fake.calls)
    assert len(fake.calls[0]) == len(cands) + 1
    assert len(fake.calls[1]) == 1 + 4  # ceil(8 / 2) survivors
    assert outcomes[BASE.with_(backend="jax", jit="off")].pruned
    assert outcomes[BASE.with_(backend="jax")].rung == 1


def test_nan_and_crashed_candidates_are_rejected_with_the_reason():
    nan = BASE.with_(backend="jax")
    crash = BASE.with_(jit="on")
    fake = FakeMeasure(nan={nan}, crash={crash})
    finalists, outcomes, _ = successive_halving(
        BASE, [nan, crash, BASE.with_(threads=1)], fake,
        rung_options=[RunOptions(max_rounds=2, min_rounds=2)])
    assert nan not in finalists and crash not in finalists
    assert "loss nan" in outcomes[nan].rejected
    assert "crashed" in outcomes[crash].rejected and "SIGSEGV" in outcomes[crash].rejected


def _snap() -> EnvSnapshot:
    return EnvSnapshot(host=HostInfo(os="Linux", machine="x86_64", cpu_cores_logical=2,
                                     cpu_flags=["avx512_bf16"]),
                       distributions={"tensorflow": "2.21.0", "jax": "0.10.2",
                                      "torch": "2.13.0"})


def test_advise_recommends_the_significantly_faster_safe_candidate():
    fake = FakeMeasure()
    clock = iter(range(0, 10_000, 5)).__next__
    advice = advise_workload("seed-rnn", _snap(), baseline=BASE, budget_s=120,
                             workload_tags=("recurrent",), measure=fake, clock=clock)
    assert advice.recommended == BASE.with_(backend="jax")
    assert advice.to_dict()["speedup_vs_baseline"]["value"] == pytest.approx(0.007 / 0.0004)
    assert "KERAS_BACKEND" in advice.code and '"jax"' in advice.code
    ids = {r.id for r in advice.reasons}
    assert {"overhead-bound", "recurrent-loop", "xla-payback"} <= ids


def test_advise_keeps_the_baseline_when_nothing_is_faster():
    slow = {s: (0.007 if s == BASE else 0.02) for s in STEPS}

    class Slow(FakeMeasure):
        def __call__(self, specs, options):
            return [_result(s, slow[s]) for s in specs]

    advice = advise_workload("seed-rnn", _snap(), baseline=BASE, budget_s=120, measure=Slow(),
                             clock=iter(range(0, 10_000, 5)).__next__)
    assert advice.recommended is None
    assert advice.verdict.startswith("keep")
    assert advice.code == ""


def test_math_changing_candidate_needs_loss_equivalence():
    bf16 = BASE.with_(precision="mixed_bfloat16")
    bigger = BASE.with_(batch_size=128)
    verdicts = {BASE: "reference", bf16: "same", bigger: "n/a"}

    def measure(specs, options):
        steps = {BASE: 0.01, bf16: 0.002, bigger: 0.002}
        return [_result(s, steps.get(s, 0.02), verdict=verdicts.get(s, "same"))
                for s in specs]

    finalists, outcomes, _ = successive_halving(
        BASE, [bf16, bigger, BASE.with_(threads=1)], measure,
        rung_options=[RunOptions(max_rounds=2, min_rounds=2)])
    assert finalists[0] == bf16  # changes the math, but its loss matched: allowed
    assert "changes the math (batch_size)" in outcomes[bigger].rejected
    advice = advise_workload("seed-rnn", _snap(), baseline=BASE, budget_s=120,
                             measure=measure,
                             clock=iter(range(0, 10_000, 1)).__next__)
    assert advice.recommended == bf16
    assert "changes the math: precision" in advice.verdict


def test_explain_rules_on_synthetic_evidence():
    res = {s: _result(s, t) for s, t in STEPS.items()}
    ev = Evidence(baseline=res[BASE], results=res, device_gflops=190.0,
                  cpu_flags=("avx512_bf16",), workload_tags=("recurrent",))
    reasons = explain(ev)
    text = {r.id: r.text for r in reasons}
    assert "0.00" in text["overhead-bound"] and "190 GFLOP/s" in text["overhead-bound"]
    assert "7.5x" in text["recurrent-loop"]  # best TF is jit=on
    assert "2.3x faster" in text["xla-payback"]
    mixed = [r.text for r in reasons if r.id == "mixed-precision-slower"]
    assert any("mixed_float16" in t and "2.9x slower" in t for t in mixed)
    assert "threads" in text
    # no evidence, no reason
    assert explain(Evidence(baseline=res[BASE], results={BASE: res[BASE]})) == []


def test_xla_slower_reason_says_it_never_pays_back():
    base = TrialSpec("mnist-cnn")
    res = {base: _result(base, 0.019, flops=None),
           base.with_(jit="on"): _result(base.with_(jit="on"), 0.06, first_step=3.0, flops=None)}
    text = {r.id: r.text for r in explain(Evidence(baseline=res[base], results=res))}
    assert "3.2x slower" in text["xla-slower"] and "never pays back" in text["xla-slower"]


def test_snippet_applies_each_knob():
    code = snippet(BASE.with_(backend="jax", jit="on", precision="mixed_bfloat16"), BASE)
    assert 'os.environ["KERAS_BACKEND"] = "jax"' in code
    assert "jit_compile=True" in code and "mixed_bfloat16" in code
    code = snippet(BASE.with_(device="cpu"), BASE.with_(device="gpu:0"))
    assert 'tf.config.set_visible_devices([], "GPU")' in code
    assert "tf.data.Dataset" in snippet(BASE.with_(pipeline="tf.data"), BASE, 32)
    assert snippet(BASE, BASE) == "# nothing to change"


def test_candidates_and_budget():
    cands = candidate_space(BASE, _snap())
    assert cands[0].backend == "jax" and BASE not in cands
    assert BASE.with_(jit="on") in cands and BASE.with_(precision="mixed_float16") in cands
    assert all(c.batch_size is None for c in cands)
    with_batch = candidate_space(BASE, _snap(), allow_batch_change=True, workload_batch_size=32)
    assert BASE.with_(batch_size=64) in with_batch
    first, rest = fit_to_budget(cands, 40)
    assert len(first) == 2 and first + rest == cands


def test_parse_baseline():
    spec = parse_baseline("backend=jax,device=cpu,jit=off,batch-size=64", "seed-rnn",
                          "tensorflow")
    assert spec == TrialSpec("seed-rnn", backend="jax", jit="off", batch_size=64)
    with pytest.raises(SpecError, match="bad --baseline"):
        parse_baseline("gpu", "seed-rnn", "tensorflow")
    with pytest.raises(SpecError, match="device"):
        parse_baseline("device=cuda", "seed-rnn", "tensorflow")


def test_cpu_fallback_reason_counts_ops_placed_on_the_cpu_in_a_gpu_trial():
    gpu = BASE.with_(device="gpu:0")
    r = _result(gpu, 0.05)
    r.placement = {"ops_by_device": {"GPU:0": 300, "CPU:0": 12},
                   "cpu_op_types": {"StatelessRandomGetKeyCounter": 8, "Cast": 4}}
    cpu = _result(BASE, 0.01)
    cpu.placement = {"ops_by_device": {"CPU:0": 312}, "cpu_op_types": {"MatMul": 40}}
    reasons = explain(Evidence(baseline=r, results={gpu: r, BASE: cpu}))
    fallback = [x.text for x in reasons if x.id == "cpu-fallback"]
    assert len(fallback) == 1  # the CPU trial's ops are not fallbacks
    assert "12 of 312 ops" in fallback[0] and "StatelessRandomGetKeyCounter x8" in fallback[0]


def test_public_advise_is_never_shadowed_by_a_subpackage():
    import devicebench
    import devicebench.advisor.advice  # noqa: F401  (importing it must not rebind the name)

    assert callable(devicebench.advise) and devicebench.advise.__module__ == "devicebench"


def test_compute_heavy_workloads_try_precision_and_jit_first():
    from devicebench.advisor.candidates import is_compute_heavy

    assert is_compute_heavy(432e6, ()) and not is_compute_heavy(432e6, ("recurrent",))
    assert not is_compute_heavy(28_800, ())
    mnist = TrialSpec("mnist-cnn")
    heavy = candidate_space(mnist, _snap(), compute_heavy=True)
    assert heavy[:3] == [mnist.with_(jit="on"), mnist.with_(precision="mixed_bfloat16"),
                         mnist.with_(precision="mixed_float16")]
    light = candidate_space(mnist, _snap())
    assert light[0].backend != "tensorflow" and set(heavy) == set(light)
