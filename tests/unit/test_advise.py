"""The advisor's logic on synthetic measurements (no framework, no processes)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from devicebench.advisor.advice import advise_workload, parse_baseline
from devicebench.advisor.budget import SearchBudget
from devicebench.advisor.candidates import candidate_space
from devicebench.advisor.explain import Evidence, explain
from devicebench.advisor.facts import WorkloadFacts
from devicebench.advisor.search import search
from devicebench.advisor.snippet import snippet
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


DRIFT = [1.0, 1.1, 0.95, 1.05, 1.0, 0.9, 1.2]


def successive_halving(baseline, candidates, group, *, rung_options):
    """The search on an unlimited budget: every candidate is set up."""
    found = search(baseline, candidates, group, SearchBudget(1e9, clock=lambda: 0.0),
                   rung_options=rung_options)
    return found.finalists, found.outcomes


class FakeGroup:
    """Synthetic timings in place of worker processes; records what each rung measured.
    Its ``clock`` moves with the work done: 2 s to set a trial up or start a process,
    each block's own seconds."""

    def __init__(self, steps=None, *, nan=frozenset(), crash=frozenset(), verdicts=None,
                 setup_bias: float | None = None):
        self.steps = steps or STEPS
        # Set-up step times (train_on_batch, biased long) = step x setup_bias; None: none.
        self.setup_bias = setup_bias
        self.nan, self.crash, self.verdicts = nan, crash, verdicts or {}
        self.results: dict[TrialSpec, TrialResult] = {}
        self.order: list[TrialSpec] = []
        self.finished: set[TrialSpec] = set()
        self.calls: list[list[TrialSpec]] = []
        self.rounds_done = 0
        self.n: dict[TrialSpec, int] = {}  # worker processes per trial (replicas)
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def processes(self, spec):
        return 0 if spec in self.finished else self.n.get(spec, 1)

    def replicate(self, counts):
        for s, k in counts.items():
            if s in self.live:
                self.now += 2.0 * max(0, k - self.n.get(s, 1))
                self.n[s] = max(self.n.get(s, 1), k)
        return {s: self.processes(s) for s in counts}

    @property
    def live(self):
        return [s for s in self.order if s not in self.finished]

    def add(self, specs, start_by=None, end_by=None):
        for s in specs:
            self.order.append(s)
            self.now += 2.0
            if s in self.crash:
                self.results[s] = TrialResult(s, status="crashed",
                                              error="worker killed by SIGSEGV")
                self.finished.add(s)
                continue
            verdict = "reference" if s == BASE else self.verdicts.get(s, "same")
            self.results[s] = TrialResult(
                s, steps_per_block=10, batch_size=32, steps_per_epoch=219,
                loss_verdict="nan" if s in self.nan else verdict, first_step_seconds=1.0,
                flops_per_step=28_800, loss_detail="max relative difference 1e-07",
                setup_step_seconds=self.steps.get(s, 0.02) * self.setup_bias
                if self.setup_bias else None)

    def measure(self, options, enough=None):
        live = self.live
        self.calls.append(live)
        ran = 0
        while self.rounds_done < options.max_rounds:
            d = DRIFT[self.rounds_done % len(DRIFT)]
            for s in live:
                r, k = self.results[s], self.processes(s)
                tags = r.block_replicas or (0,) * len(r.block_seconds)
                self.results[s] = replace(
                    r, block_seconds=(*r.block_seconds,
                                      *[10 * self.steps.get(s, 0.02) * d] * k),
                    block_rounds=(*r.block_rounds, *[self.rounds_done] * k),
                    block_replicas=(*tags, *range(k)) if k > 1 or r.block_replicas else ())
                self.now += 10 * self.steps.get(s, 0.02) * d * k
            self.rounds_done += 1
            ran += 1
            if self.rounds_done >= options.min_rounds and (enough is None
                                                           or enough(self.results)):
                break
        return ran

    def finish(self, specs=None):
        self.finished.update(self.live if specs is None else specs)

    def close(self):
        self.closed = True

    def start(self, reference, options, equivalence_seconds):
        """As a StartGroup: advise_workload(start_group=fake.start)."""
        return self


def test_successive_halving_keeps_the_fastest_and_always_measures_the_baseline():
    cands = [s for s in STEPS if s != BASE]
    fake = FakeGroup()
    finalists, outcomes = successive_halving(
        BASE, cands, fake, rung_options=[RunOptions(max_rounds=2, min_rounds=2),
                                         RunOptions(max_rounds=5, min_rounds=5)])
    assert finalists == [BASE.with_(backend="jax"), BASE.with_(jit="on")]
    assert all(call[0] == BASE for call in fake.calls)
    assert len(fake.calls[0]) == len(cands) + 1
    assert len(fake.calls[1]) == 1 + 4  # ceil(8 / 2) survivors
    assert outcomes[BASE.with_(backend="jax", jit="off")].pruned
    assert outcomes[BASE.with_(backend="jax")].rung == 1
    # Each candidate's speed-up over the baseline in the rounds they shared.
    assert outcomes[BASE.with_(backend="jax")].speedup == pytest.approx(0.007 / 0.0004)
    assert outcomes[BASE.with_(backend="torch")].speedup == pytest.approx(0.007 / 0.04)
    # The pruned are finished; the baseline and the finalists stay live for the final,
    # their rounds from the rungs kept (5 = 2 + 3).
    assert fake.live == [BASE, *finalists]
    assert fake.results[finalists[0]].block_rounds == (0, 1, 2, 3, 4)


def test_screening_finishes_candidates_far_slower_in_their_set_up_steps_untimed():
    steps = {BASE: 0.007, BASE.with_(backend="jax"): 0.002, BASE.with_(jit="on"): 0.0079,
             BASE.with_(backend="torch"): 0.0081, BASE.with_(precision="mixed_float16"): 0.02}
    cands = [s for s in steps if s != BASE]
    fake = FakeGroup(steps, setup_bias=1.5)
    finalists, outcomes = successive_halving(
        BASE, cands, fake, rung_options=[RunOptions(max_rounds=2, min_rounds=2)])
    # 4x the fastest (jax, 2 ms) is 8 ms: torch (8.1) and float16 (20) are screened out,
    # jit=on (7.9) is not; the baseline never is.
    screened = {s for s, o in outcomes.items() if o.screened}
    assert screened == {BASE.with_(backend="torch"), BASE.with_(precision="mixed_float16")}
    assert all(outcomes[s].pruned and outcomes[s].blocks_cut == "setup" for s in screened)
    assert outcomes[BASE.with_(backend="torch")].speedup == pytest.approx(0.007 / 0.0081)
    assert all(s not in call for s in screened for call in fake.calls)
    assert screened <= fake.finished and BASE in fake.live
    # jax and jit=on are few enough to go straight on to the final: no rung was run.
    assert finalists == [BASE.with_(backend="jax"), BASE.with_(jit="on")] and not fake.calls
    # Without set-up figures nothing is screened.
    _, outcomes = successive_halving(BASE, cands, FakeGroup(steps),
                                     rung_options=[RunOptions(max_rounds=2, min_rounds=2)])
    assert not any(o.screened for o in outcomes.values())


def test_a_screened_candidates_reasons_quote_its_set_up_steps():
    base = TrialSpec("mnist-cnn")
    res = {base: replace(_result(base, 0.019, flops=None), setup_step_seconds=0.025),
           base.with_(jit="on"): TrialResult(base.with_(jit="on"), first_step_seconds=3.0,
                                             setup_step_seconds=0.1)}
    text = {r.id: r.text for r in explain(Evidence(baseline=res[base], results=res))}
    assert "4.0x slower" in text["xla-slower"] and "set-up steps" in text["xla-slower"]
    # Measured in the same rounds, the interleaved blocks are used, not the set-up steps.
    res[base.with_(jit="on")] = _result(base.with_(jit="on"), 0.057, flops=None)
    text = {r.id: r.text for r in explain(Evidence(baseline=res[base], results=res))}
    assert "3.0x slower" in text["xla-slower"] and "set-up" not in text["xla-slower"]
    # The best TF trial against JAX may be one screened out: compared on set-up steps.
    jax, xla = BASE.with_(backend="jax"), BASE.with_(jit="on")
    res = {BASE: replace(_result(BASE, 0.007), setup_step_seconds=0.0075),
           jax: replace(_result(jax, 0.0003), setup_step_seconds=0.0004),
           xla: TrialResult(xla, setup_step_seconds=0.0024)}
    text = {r.id: r.text for r in explain(Evidence(baseline=res[BASE], results=res,
                                                   workload_tags=("recurrent",)))}
    assert "(tensorflow/cpu jit=on)" in text["recurrent-loop"]
    assert "6.0x" in text["recurrent-loop"] and "set-up steps" in text["recurrent-loop"]


def test_nan_and_crashed_candidates_are_rejected_with_the_reason():
    nan = BASE.with_(backend="jax")
    crash = BASE.with_(jit="on")
    fake = FakeGroup(nan={nan}, crash={crash})
    finalists, outcomes = successive_halving(
        BASE, [nan, crash, BASE.with_(threads=1)], fake,
        rung_options=[RunOptions(max_rounds=2, min_rounds=2)])
    assert nan not in finalists and crash not in finalists
    assert "loss nan" in outcomes[nan].rejected
    assert "crashed" in outcomes[crash].rejected and "SIGSEGV" in outcomes[crash].rejected
    # Known unsafe after set-up: dropped before any timed round.
    assert nan in fake.finished and all(nan not in call for call in fake.calls)


def _snap() -> EnvSnapshot:
    return EnvSnapshot(host=HostInfo(os="Linux", machine="x86_64", cpu_cores_logical=2,
                                     cpu_flags=["avx512_bf16"]),
                       distributions={"tensorflow": "2.21.0", "jax": "0.10.2",
                                      "torch": "2.13.0"})


def test_advise_recommends_the_significantly_faster_safe_candidate():
    fake = FakeGroup()
    advice = advise_workload("seed-rnn", _snap(), baseline=BASE, budget_s=120,
                             equivalence_steps=50, facts=WorkloadFacts(tags=("recurrent",)),
                             start_group=fake.start, clock=fake.clock)
    assert advice.recommended == BASE.with_(backend="jax")
    assert advice.to_dict()["speedup_vs_baseline"]["value"] == pytest.approx(0.007 / 0.0004)
    assert "KERAS_BACKEND" in advice.code and '"jax"' in advice.code
    ids = {r.id for r in advice.reasons}
    assert {"overhead-bound", "recurrent-loop", "xla-payback"} <= ids
    # The baseline and the winner were measured in two processes each, and the final
    # stopped as soon as the winner was clear: 3 rounds once the second processes had
    # joined (after the rungs' 4), not 30.
    assert advice.replication.processes == {BASE: 2, BASE.with_(backend="jax"): 2}
    assert not advice.replication.budget_limited
    assert fake.rounds_done == 4 + 3
    assert advice.to_dict()["replication"]["processes"] == {"tensorflow/cpu": 2,
                                                           "jax/cpu": 2}


def test_advise_keeps_the_baseline_when_nothing_is_faster():
    slow = {s: (0.007 if s == BASE else 0.02) for s in STEPS}
    fake = FakeGroup(slow)
    advice = advise_workload("seed-rnn", _snap(), baseline=BASE, budget_s=120,
                             equivalence_steps=50, start_group=fake.start, clock=fake.clock)
    assert advice.recommended is None
    assert advice.verdict.startswith("keep")
    assert advice.code == ""


def test_math_changing_candidate_needs_loss_equivalence():
    bf16 = BASE.with_(precision="mixed_bfloat16")
    bigger = BASE.with_(batch_size=128)
    verdicts = {bf16: "same", bigger: "n/a"}
    steps = {BASE: 0.01, bf16: 0.002, bigger: 0.002}

    finalists, outcomes = successive_halving(
        BASE, [bf16, bigger, BASE.with_(threads=1)], FakeGroup(steps, verdicts=verdicts),
        rung_options=[RunOptions(max_rounds=2, min_rounds=2)])
    assert finalists[0] == bf16  # changes the math, but its loss matched: allowed
    assert "changes the math (batch_size)" in outcomes[bigger].rejected
    fake = FakeGroup(steps, verdicts=verdicts)
    advice = advise_workload("seed-rnn", _snap(), baseline=BASE, budget_s=120,
                             equivalence_steps=50, start_group=fake.start, clock=fake.clock)
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
    r = replace(_result(gpu, 0.05), placement={
        "ops_by_device": {"GPU:0": 300, "CPU:0": 12},
        "cpu_op_types": {"StatelessRandomGetKeyCounter": 8, "Cast": 4}})
    cpu = replace(_result(BASE, 0.01), placement={"ops_by_device": {"CPU:0": 312},
                                                  "cpu_op_types": {"MatMul": 40}})
    reasons = explain(Evidence(baseline=r, results={gpu: r, BASE: cpu}))
    fallback = [x.text for x in reasons if x.id == "cpu-fallback"]
    assert len(fallback) == 1  # the CPU trial's ops are not fallbacks
    assert "12 of 312 ops" in fallback[0] and "StatelessRandomGetKeyCounter x8" in fallback[0]


def test_public_advise_is_never_shadowed_by_a_subpackage():
    import devicebench
    import devicebench.advisor.advice  # noqa: F401  (importing it must not rebind the name)

    assert callable(devicebench.advise) and devicebench.advise.__module__ == "devicebench"
    # Every public call, after every subpackage is imported (a subpackage of the same
    # name would rebind it: why the op sweep is devicebench.api.ops, not devicebench.ops).
    import pkgutil

    for m in pkgutil.walk_packages(devicebench.__path__, "devicebench."):
        if not m.name.startswith(("devicebench.backends.", "devicebench.monitor",
                                  "devicebench.__main__")):
            __import__(m.name)
    for name in devicebench.__all__[1:]:
        fn = getattr(devicebench, name)
        assert callable(fn) and fn.__module__ == "devicebench", name


def test_compute_heavy_workloads_try_precision_and_jit_first():
    from devicebench.advisor.candidates import is_compute_heavy

    assert is_compute_heavy(432e6, ()) and not is_compute_heavy(432e6, ("recurrent",))
    assert not is_compute_heavy(28_800, ())
    mnist = TrialSpec("mnist-cnn")
    heavy = candidate_space(mnist, _snap(), compute_heavy=True)
    # On a CPU with bfloat16 instructions bf16 first (XLA's CPU kernels lose there).
    assert heavy[:3] == [mnist.with_(precision="mixed_bfloat16"), mnist.with_(jit="on"),
                         mnist.with_(precision="mixed_float16")]
    gpu = mnist.with_(device="gpu:0")
    assert candidate_space(gpu, _snap(), compute_heavy=True)[0] == gpu.with_(jit="on")
    light = candidate_space(mnist, _snap())
    assert light[0].backend != "tensorflow" and set(heavy) == set(light)


# -- `devicebench ops` figures in the reasons -------------------------------------------


def _figures():
    from devicebench.advisor.figures import device_figures
    from tests.unit.test_ops import _workers

    return device_figures(3, _workers(), "cpu")


def test_device_figures_from_a_stored_ops_run():
    from devicebench.advisor.figures import device_figures
    from tests.unit.test_ops import _workers

    f = _figures()
    assert f.source == "devicebench ops run #3" and f.device == "cpu"
    # The fastest matmul measured on the CPU (numpy's, ~150 GFLOP/s at 2048).
    assert f.peak_gflops == pytest.approx(150, rel=0.1) and "numpy/cpu" in f.peak_label
    # TF's per-op cost inside a graph: the cheapest op at a small size (synthetic 2 µs).
    assert f.per_op_seconds["tensorflow"] == pytest.approx(2e-6, rel=0.2)
    assert f.per_op_labels["tensorflow"].startswith("multiply at ")
    assert device_figures(3, _workers(), "gpu:0") is None  # nothing measured there


def test_dispatch_reason_multiplies_ops_per_step_by_the_measured_per_op_cost():
    r = replace(_result(BASE, 0.007), placement={
        "ops_by_device": {"CPU:0": 274}, "loop_ops": 150, "input_shape": [28, 28]})
    ev = Evidence(baseline=r, results={BASE: r}, figures=_figures(),
                  workload_tags=("recurrent",))
    (text,) = [x.text for x in explain(ev) if x.id == "dispatch-cost"]
    # 124 ops outside the loop + 150 in its body x 28 timesteps = 4,324 ops x ~2 µs.
    assert "~4,324 TensorFlow ops" in text and "devicebench ops run #3" in text
    per_op = ev.figures.per_op_seconds["tensorflow"]  # ~2 µs, as synthesised
    assert f"~{4324 * per_op * 1e3:.2g} ms of the 7 ms step" in text
    assert "more than the step itself" in text and "the cheapest op measured, multiply at" in text
    # Without knowing the loop runs per timestep: a lower bound on the graph's ops.
    ev.workload_tags = ()
    (text,) = [x.text for x in explain(ev) if x.id == "dispatch-cost"]
    assert "at least 274 TensorFlow ops" in text
    assert f"≥ {274 * per_op * 1e6:.3g} µs of the 7 ms step" in text
    # No figures, an XLA-compiled step, or another backend: no such reason.
    for changed in (dict(figures=None),):
        ev2 = Evidence(baseline=r, results={BASE: r}, **changed)
        assert not [x for x in explain(ev2) if x.id == "dispatch-cost"]
    r = replace(r, jit_resolved=True)
    ev = Evidence(baseline=r, results={BASE: r}, figures=_figures())
    assert not [x for x in explain(ev) if x.id == "dispatch-cost"]


def test_advise_cites_the_ops_rate_or_says_how_to_get_it():
    fake = FakeGroup()
    kw = dict(baseline=BASE, budget_s=120, equivalence_steps=50, clock=fake.clock)
    with_ops = advise_workload("seed-rnn", _snap(), figures=_figures(),
                               start_group=fake.start, **kw)
    (text,) = [r.text for r in with_ops.reasons if r.id == "overhead-bound"]
    assert "devicebench ops run #3" in text and "150 GFLOP/s" in text
    assert not any("devicebench ops --backend" in n for n in with_ops.notes)
    fake = FakeGroup()
    kw["clock"] = fake.clock
    without = advise_workload("seed-rnn", _snap(), start_group=fake.start, **kw)
    assert any("`devicebench ops --backend tensorflow --device cpu`" in n
               for n in without.notes)


def test_input_reason_compares_the_pipeline_alone_with_the_step():
    r = replace(_result(BASE, 0.010), input_seconds_per_batch=0.0002)
    (reason,) = [x for x in explain(Evidence(baseline=r, results={BASE: r}))
                 if x.id.startswith("input")]
    assert reason.id == "input-time" and "200 µs, 2% of the 10 ms step" in reason.text
    r = replace(r, input_seconds_per_batch=0.008)
    (reason,) = [x for x in explain(Evidence(baseline=r, results={BASE: r}))
                 if x.id.startswith("input")]
    assert reason.id == "input-bound" and "80% of the 10 ms step" in reason.text
    assert "prefetch" in reason.text
    r = replace(r, input_seconds_per_batch=None)  # not measured: no claim either way
    assert not [x for x in explain(Evidence(baseline=r, results={BASE: r}))
                if x.id.startswith("input")]


def test_the_final_stops_when_the_winner_is_clear_or_nothing_is_faster():
    from devicebench.advisor.advice import decided
    from devicebench.measure.stats import paired_ratio

    def paired_ratio_of(res, spec):
        return paired_ratio(res[BASE].round_step_times, res[spec].round_step_times)

    fast, mid, slow = BASE.with_(backend="jax"), BASE.with_(jit="on"), BASE.with_(threads=1)

    def results(steps, noise=0.0):
        import numpy as np

        out = {}
        for seed, (s, t) in enumerate(steps.items()):
            jitter = np.random.default_rng(seed).uniform(1 - noise, 1 + noise, 6)
            out[s] = TrialResult(s, steps_per_block=1,
                                 block_seconds=[t * d * jitter[i]
                                                for i, d in enumerate(DRIFT[:6])],
                                 block_rounds=list(range(6)))
        return out

    assert decided(BASE, [fast, mid])(results({BASE: 7, fast: 1, mid: 3}))
    assert decided(BASE, [slow])(results({BASE: 7, slow: 9}))  # nothing is faster
    # Two finalists whose CIs overlap: more rounds needed.
    assert not decided(BASE, [fast, mid])(results({BASE: 7, fast: 2, mid: 2.05}, 0.2))
    # A winner whose CI is still wider than ±25% and reaches below 2x: more rounds for
    # a usable figure; one whose CI is as wide but all of it above 2x: decided.
    wide = paired_ratio_of(results({BASE: 3, fast: 1}, 0.5), fast)
    assert 1 < wide.ci_low < 2 and wide.ci_high - wide.ci_low > 0.5 * wide.value
    assert not decided(BASE, [fast])(results({BASE: 3, fast: 1}, 0.5))
    decisive = paired_ratio_of(results({BASE: 9, fast: 1}, 0.5), fast)
    assert decisive.ci_low > 2 and decisive.ci_high - decisive.ci_low > 0.5 * decisive.value
    assert decided(BASE, [fast])(results({BASE: 9, fast: 1}, 0.5))
    # A finalist indistinguishable from the baseline: not decided either.
    assert not decided(BASE, [mid])(results({BASE: 7, mid: 7}, 0.2))
    assert decided(BASE, [mid])({})  # the baseline failed: nothing to wait for


HLO = Path(__file__).resolve().parent.parent / "fixtures" / "raw" / \
    "jax-seed-rnn-train-step-cpu.hlo.txt"


def test_kernels_per_step_are_counted_in_xlas_compiled_program():
    from devicebench.backends.hlo import count_kernels

    # seed-rnn's train step as XLA compiled it (recorded): a forward and a backward
    # lax.scan over 50 timesteps; 17 of the program's 51 kernels are in their bodies
    # and conditions, so a step launches 34 + 17 x 50 = 884.
    c = count_kernels(HLO.read_text())
    assert (c.per_call, c.in_program, c.in_loops, c.trips) == (884, 51, 17, 50)
    # A loop whose trip count XLA did not prove counts once; a conditional, its
    # largest branch plus the branch itself; text without an ENTRY: no count.
    text = """%body (p: f32[]) -> f32[] {
  %p = f32[] parameter(0)
  ROOT %f = f32[] fusion(%p), kind=kLoop, calls=%g
}
%cond (p: f32[]) -> pred[] {
  %p = f32[] parameter(0)
  ROOT %c = pred[] fusion(%p), kind=kLoop, calls=%h
}
ENTRY %main (x: f32[], b: pred[]) -> f32[] {
  %x = f32[] parameter(0)
  %w = f32[] while(%x), condition=%cond, body=%body
  ROOT %k = f32[] conditional(%b, %w, %w), true_computation=%body, false_computation=%cond
}"""
    assert count_kernels(text) == type(c)(per_call=4, in_program=4, in_loops=2, trips=0)
    assert count_kernels("HloModule m") is None


def test_the_dispatch_reason_uses_the_kernels_jax_compiled():
    import dataclasses

    from devicebench.backends.hlo import kernel_placement
    from devicebench.profiles import load_profile

    # The H200's CPU figures (recorded ops run) and jax/cpu's step there; the kernel
    # count is what a worker records from the compiled program (recorded on this VM).
    h200 = load_profile("h200")
    cpu = h200.device_figures("cpu")
    spec = TrialSpec("seed-rnn", backend="jax")
    r = dataclasses.replace(_result(spec, 372e-6), placement=kernel_placement(
        HLO.read_text(), "XLA's compiled train step"))
    ev = Evidence(baseline=r, results={spec: r}, device_figures={"cpu": cpu},
                  workload_tags=("recurrent",))
    (text,) = [x.text for x in explain(ev) if x.id == "dispatch-cost"]
    per_op = cpu.per_op_seconds["jax"]
    assert "~884 kernels run per step (XLA's compiled train step: 51 in the program, 17 " \
        "of them in loops that run 50 times)" in text
    assert f"~{884 * per_op * 1e6:.3g} µs of the 372 µs step ({884 * per_op / 372e-6:.0%})" \
        in text and "dispatch is a part of the step" in text
    # Beside the same configuration on the accelerator: the CPU's launches per step.
    gpu = dataclasses.replace(_result(spec.with_(device="gpu:0"), 1.79e-3), placement={})
    ev = Evidence(baseline=gpu, results={spec: r, gpu.spec: gpu},
                  device_figures={d: h200.device_figures(d) for d in ("cpu", "gpu:0")},
                  workload_tags=("recurrent",), timesteps=50)
    (text,) = [x.text for x in explain(ev) if x.id == "accelerator-launch-bound"]
    assert "on the CPU ~884 kernels run per step" in text and "17 of them each timestep" in text


def test_torchs_tf32_switch_is_a_math_changing_candidate_on_ampere_and_newer():
    from devicebench.env.snapshot import load_snapshot
    from devicebench.trials.plan import plan_trials, validate_spec

    # Recorded on the H200 (compute capability 9.0): jax and torch with CUDA.
    h200 = load_snapshot(Path(__file__).resolve().parent.parent / "fixtures" / "snapshots"
                         / "h200_jax_torch_cuda13.json")
    torch_gpu = TrialSpec("mnist-cnn", backend="torch", device="gpu:0")
    tf32 = torch_gpu.with_(precision="tf32")
    assert tf32 in candidate_space(torch_gpu, h200, compute_heavy=True)
    validate_spec(tf32, h200)
    # JAX (and TensorFlow) use TF32 for float32 there already; a CPU has no tensor cores.
    for base in (torch_gpu.with_(backend="jax"), torch_gpu.with_(device="cpu")):
        assert all(s.precision != "tf32" for s in candidate_space(base, h200,
                                                                  compute_heavy=True))
    with pytest.raises(SpecError, match="cpu has no TF32 tensor cores"):
        validate_spec(tf32.with_(device="cpu"), h200)
    plan = plan_trials(h200, ["mnist-cnn"], backends=["torch"], precisions=["tf32"])
    assert [s.device for s in plan.specs] == ["gpu:0"]
    assert plan.notes == ["skipped precision tf32 on cpu: cpu has no TF32 tensor cores "
                          "(an NVIDIA GPU feature)"]
    with pytest.raises(SpecError, match="nothing to run: precision tf32 on cpu"):
        plan_trials(_snap(), ["mnist-cnn"], backends=["torch"], precisions=["tf32"])
    # It changes the math: loss-checked with reduced precision's tolerance; the change
    # to make is torch's switch, not a Keras dtype policy.
    from devicebench.advisor.equivalence import RTOL_MIXED, tolerance_for

    assert tolerance_for("tf32") == RTOL_MIXED
    code = snippet(tf32, torch_gpu)
    assert "torch.backends.cuda.matmul.allow_tf32 = True" in code
    assert "set_global_policy" not in code


def test_jaxs_per_op_cost_is_its_matmuls_because_xla_fuses_element_wise_chains():
    from devicebench.advisor.figures import cheapest_dispatch

    # (backend, mode, op, size, median seconds, usable): jax's 64 chained multiplies are
    # one fused kernel (4 ns each); its matmuls stay one kernel each.
    points = [("jax", "in-graph", "multiply", 2, 4e-9, True),
              ("jax", "in-graph", "matmul", 2, 1.2e-7, True),
              ("torch", "in-graph", "multiply", 8, 1.3e-6, True),
              ("torch", "in-graph", "matmul", 8, 8.9e-6, True),
              ("jax", "compiled", "multiply", 2, 8e-6, True)]
    per_op, per_call = cheapest_dispatch(points)
    assert per_op["jax"] == (1.2e-7, "matmul at 2×2")
    assert per_op["torch"] == (1.3e-6, "multiply at 8×8")  # no fusion: the cheapest op
    assert per_call["jax"] == (8e-6, "multiply at 2×2")
