"""Trial specs, statistics, equivalence, planning and interleaving (no framework)."""

from __future__ import annotations

import dataclasses

import pytest

from devicebench.advisor.equivalence import compare_losses, loss_check
from devicebench.env.snapshot import EnvSnapshot, HostInfo, NvidiaGpu, NvidiaSmi
from devicebench.errors import SpecError
from devicebench.launch import WorkerFailure, worker_env
from devicebench.measure.stats import paired_ratio, settled, summarize
from devicebench.trials.engine import RunOptions, default_reference, run_workload_group
from devicebench.trials.plan import machine_devices, plan_trials
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec

# -- TrialSpec ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"backend": "mxnet"}, "backend"),
        ({"device": "cuda"}, "device"),
        ({"device": "mps", "backend": "tensorflow"}, "mps"),
        ({"precision": "fp16"}, "precision"),
        ({"jit": "yes"}, "jit"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": -4}, "batch_size"),
        ({"threads": 0}, "threads"),
        ({"pipeline": "generator"}, "pipeline"),
        ({"steps_per_execution": 0}, "steps_per_execution"),
        ({"workload": ""}, "workload"),
    ],
)
def test_spec_rejects_bad_values_naming_the_field(changes, needle):
    kwargs = {"workload": "seed-rnn", **changes}
    with pytest.raises(SpecError) as err:
        TrialSpec(**kwargs)
    assert needle in str(err.value)


def test_spec_is_frozen_hashable_and_round_trips():
    a = TrialSpec("seed-rnn", backend="jax", jit="on", batch_size=64)
    assert TrialSpec.from_dict(a.to_dict()) == a
    assert {a, TrialSpec.from_dict(a.to_dict())} == {a}
    assert a.key == TrialSpec.from_dict(a.to_dict()).key
    assert a.key != a.with_(jit="off").key
    with pytest.raises(AttributeError):
        a.backend = "tensorflow"  # type: ignore[misc]


def test_knobs_declare_whether_they_keep_the_math():
    ref = TrialSpec("seed-rnn")
    assert ref.with_(backend="jax", jit="on", device="gpu:0", threads=1).math_changes(ref) == []
    assert set(ref.with_(precision="mixed_bfloat16", batch_size=64).math_changes(ref)) == {
        "precision", "batch_size"}


def test_process_key_separates_process_global_settings():
    a = TrialSpec("seed-rnn")
    assert a.process_key == a.with_(jit="on", precision="mixed_bfloat16").process_key
    assert a.process_key != a.with_(backend="jax").process_key
    assert a.process_key != a.with_(threads=1).process_key
    assert a.process_key != a.with_(device="gpu:0").process_key


def test_worker_env_is_set_before_import():
    env = worker_env("jax", "cpu", 1, base={})
    assert env["KERAS_BACKEND"] == "jax"
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["JAX_PLATFORMS"] == "cpu"
    assert env["OMP_NUM_THREADS"] == "1"
    gpu = worker_env("tensorflow", "gpu:1", base={})
    assert gpu["CUDA_VISIBLE_DEVICES"] == "1"
    assert gpu["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert gpu["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"


# -- statistics -----------------------------------------------------------------------


def test_summary_median_iqr_and_ci_contain_the_median():
    s = summarize([1.0, 1.2, 0.9, 1.1, 1.0, 5.0])
    assert s.median == pytest.approx(1.05)
    assert s.q1 <= s.median <= s.q3
    assert s.ci_low <= s.median <= s.ci_high
    assert summarize([1.0] * 10).rel_ci_halfwidth == 0


def test_summary_ci_narrows_with_more_samples():
    import numpy as np

    rng = np.random.default_rng(1)
    few = summarize(1 + 0.1 * rng.standard_normal(5))
    many = summarize(1 + 0.1 * rng.standard_normal(200))
    assert many.rel_ci_halfwidth < few.rel_ci_halfwidth


def test_paired_ratio_recovers_a_known_speedup_under_common_drift():
    # Both configurations drift together (a busy machine); the ratio stays 4x.
    drift = [1.0, 1.5, 0.8, 2.0, 1.1, 1.3, 0.9]
    base = {i: 0.004 * d for i, d in enumerate(drift)}
    cand = {i: 0.001 * d for i, d in enumerate(drift)}
    r = paired_ratio(base, cand)
    assert r is not None
    assert r.value == pytest.approx(4.0)
    assert r.ci_low == pytest.approx(4.0) and r.ci_high == pytest.approx(4.0)
    assert r.significant


def test_paired_ratio_noise_gives_ci_around_one():
    base = {0: 1.0, 1: 1.1, 2: 0.9, 3: 1.05, 4: 0.95}
    cand = {0: 1.05, 1: 0.95, 2: 1.0, 3: 0.9, 4: 1.1}
    r = paired_ratio(base, cand)
    assert r.ci_low < 1 < r.ci_high and not r.significant
    assert paired_ratio({0: 1.0}, {1: 1.0}) is None


def test_settled():
    assert not settled([1.0])
    assert settled([1.0, 1.05])
    assert not settled([1.0, 2.0])


def test_result_derives_step_time_epoch_and_throughput():
    r = TrialResult(TrialSpec("seed-rnn"), block_seconds=[0.5, 0.6, 0.4], block_rounds=[0, 1, 2],
                    steps_per_block=10, batch_size=32, steps_per_epoch=219,
                    flops_per_step=1e6)
    assert r.step_time.median == pytest.approx(0.05)
    assert r.epoch_seconds == pytest.approx(0.05 * 219)
    assert r.samples_per_second == pytest.approx(32 / 0.05)
    assert r.achieved_flops == pytest.approx(1e6 / 0.05)
    assert r.round_step_times == {0: 0.05, 1: 0.06, 2: 0.04}
    assert TrialResult.from_dict(r.to_dict()).to_dict() == r.to_dict()


def test_wide_spread_is_reported_not_hidden():
    r = TrialResult(TrialSpec("seed-rnn"), block_seconds=[1, 2, 1, 3, 1], steps_per_block=1)
    assert "spread too wide" in r.spread_warning
    tight = TrialResult(TrialSpec("seed-rnn"), block_seconds=[1.0] * 5, steps_per_block=1)
    assert tight.spread_warning == ""


# -- loss equivalence -----------------------------------------------------------------


def test_compare_losses_verdicts():
    ref = [1.0, 0.5, 0.25]
    assert compare_losses(ref, [1.0, 0.5000001, 0.25], 1e-3)[0] == "same"
    verdict, detail = compare_losses(ref, [1.0, 0.6, 0.25], 1e-3)
    assert verdict == "differs" and "step 2" in detail and "1e-03" in detail
    verdict, detail = compare_losses(ref, [1.0, float("nan")], 1e-3)
    assert verdict == "nan" and "step 2" in detail


# -- planning -------------------------------------------------------------------------


def _snap(**dists: str) -> EnvSnapshot:
    return EnvSnapshot(host=HostInfo(os="Linux", machine="x86_64"), distributions=dict(dists))


def test_plan_skips_backends_that_are_not_installed_with_a_note():
    plan = plan_trials(_snap(tensorflow="2.21.0"), ["seed-rnn"], backends=["tensorflow", "jax"])
    assert [s.backend for s in plan.specs] == ["tensorflow"]
    assert any("jax" in n and "not installed" in n for n in plan.notes)


def test_plan_rejects_devices_this_machine_lacks():
    with pytest.raises(SpecError, match="no device 'gpu:0'"):
        plan_trials(_snap(tensorflow="2.21.0"), ["seed-rnn"], devices=["gpu:0"])
    with pytest.raises(SpecError, match="unknown backend"):
        plan_trials(_snap(tensorflow="2.21.0"), ["seed-rnn"], backends=["caffe"])


def test_plan_cross_product_and_machine_devices():
    snap = _snap(tensorflow="2.21.0", jax="0.10.2")
    snap.nvidia_smi = NvidiaSmi(gpus=[NvidiaGpu(0, "H200")])
    assert machine_devices(snap) == ["cpu", "gpu:0"]
    plan = plan_trials(snap, ["seed-rnn"], jits=["on", "off"])
    assert len(plan.specs) == 2 * 2 * 2  # backends x devices x jit
    mac = EnvSnapshot(host=HostInfo(os="Darwin", machine="arm64"))
    assert machine_devices(mac) == ["cpu", "gpu:0", "mps"]


# -- interleaving, with a fake launcher (the seam) ----------------------------------


class FakeWorker:
    instances: list[FakeWorker] = []

    def __init__(self, spec: TrialSpec, log: list, step: float, fail_on: str | None) -> None:
        self.spec, self.log, self.step, self.fail_on = spec, log, step, fail_on
        self.messages: list[dict] = []
        FakeWorker.instances.append(self)

    def send(self, message):
        self.log.append((self.spec.backend, "send " + message["cmd"]))
        self._sent = message

    def receive(self, timeout):
        return self.request(self._sent, timeout)

    def request(self, message, timeout):
        self.log.append((self.spec.backend, message["cmd"]))
        self.messages.append(message)
        if message["cmd"] == self.fail_on:
            raise WorkerFailure("crashed", "worker killed by SIGABRT")
        if message["cmd"] == "prepare":
            return {"ok": True, "import_seconds": 1.0}
        if message["cmd"] == "setup":
            return {"ok": True, "batch_size": 32, "steps_per_epoch": 100,
                    "equivalence_losses": [1.0, 0.5],
                    "epoch_estimate_seconds": 10.0 if self.spec.backend == "jax" else 1.0}
        if message["cmd"] == "measure":
            return {"ok": True, "block_seconds": [self.step * 10], "steps_per_block": 10}
        return {"ok": True, "final_loss": 0.5}

    def begin_close(self):
        pass

    def close(self, timeout=10):
        self.log.append((self.spec.backend, "close"))

    def kill(self):
        pass


def test_rounds_interleave_trials_and_a_failure_never_stops_the_others():
    FakeWorker.instances.clear()
    log: list = []
    stored: list[TrialResult] = []
    a, b, c = (TrialSpec("seed-rnn", backend=x) for x in ("tensorflow", "jax", "torch"))
    steps = {"tensorflow": 0.004, "jax": 0.001, "torch": 0.002}

    def start(spec):
        return FakeWorker(spec, log, steps[spec.backend],
                          "measure" if spec.backend == "torch" else None)

    results = run_workload_group([a, b, c], RunOptions(min_rounds=3, max_rounds=3),
                                 start_worker=start, on_result=stored.append,
                                 loss_check=loss_check)
    # Every worker is told to import before the first is set up: the imports overlap.
    assert log[:4] == [("tensorflow", "send prepare"), ("jax", "send prepare"),
                       ("torch", "send prepare"), ("tensorflow", "prepare")]
    measures = [be for be, cmd in log if cmd == "measure"]
    assert measures[:3] == ["tensorflow", "jax", "torch"]  # round 1: A B C
    assert measures[3:] == ["tensorflow", "jax"] * 2  # torch died; A B continue
    by = {r.spec.backend: r for r in results}
    assert by["torch"].status == "crashed" and "SIGABRT" in by["torch"].error
    assert by["tensorflow"].loss_verdict == "reference"
    assert by["jax"].loss_verdict == "same"
    assert by["jax"].block_rounds == (0, 1, 2)
    assert [r.spec.backend for r in stored][0] == "torch"  # stored when it failed
    assert by["jax"].step_time.median == pytest.approx(0.001)
    # One epoch is long (jax: 10 s), so every trial is cut into K-step blocks alike.
    cuts = {m["whole_epochs"] for w in FakeWorker.instances for m in w.messages
            if m["cmd"] == "measure"}
    assert cuts == {False}
    assert {r.spec.backend for r in stored} == {"tensorflow", "jax", "torch"}


def test_reference_defaults_to_tensorflow_cpu_float32():
    specs = [TrialSpec("x", backend="jax"), TrialSpec("x"), TrialSpec("x", jit="on")]
    assert default_reference(specs) == TrialSpec("x")
    assert default_reference([TrialSpec("x", backend="jax")]).backend == "jax"


def test_loop_ops_counts_what_a_while_frame_feeds_until_its_exit():
    from types import SimpleNamespace as Node

    from devicebench.backends.tensorflow import _loop_ops

    graph = [
        Node(name="x", op="Placeholder", input=[]),
        Node(name="w", op="ReadVariableOp", input=[]),
        Node(name="enter", op="Enter", input=["x"]),
        Node(name="merge", op="Merge", input=["enter", "next"]),
        Node(name="mul", op="MatMul", input=["merge", "w"]),
        Node(name="tanh", op="Tanh", input=["mul:0"]),
        Node(name="next", op="NextIteration", input=["tanh"]),
        Node(name="ident", op="Identity", input=["^tanh"]),  # infrastructure: not counted
        Node(name="exit", op="Exit", input=["tanh"]),
        Node(name="loss", op="Mean", input=["exit"]),  # after the loop: runs once
    ]
    # Enter, Merge, MatMul, Tanh, NextIteration run per iteration; Exit and Mean do not.
    assert _loop_ops(graph) == 5
    assert _loop_ops([n for n in graph if n.op not in ("Enter",)]) == 0


def test_fit_estimate_adds_validation_and_the_first_epochs_one_time_cost():
    from devicebench.trials.epochs import fit_estimate

    r = TrialResult(TrialSpec("seed-rnn"), block_seconds=[2.0, 2.2, 1.8], block_rounds=[0, 1, 2],
                    steps_per_block=200, steps_per_epoch=200, first_step_seconds=1.01,
                    warmup_seconds=5.0, warmup_blocks=2, validation_samples=2000,
                    validation_first_seconds=0.9, validation_seconds=[0.4, 0.5, 0.3],
                    validation_rounds=[0, 1, 2], workload_epochs=20)
    f = fit_estimate(r)
    assert f.train_s == pytest.approx(2.0) and f.validation_s == pytest.approx(0.4)
    assert f.epoch_s == pytest.approx(2.4) and r.epoch_seconds == pytest.approx(2.4)
    # first step 1.01 s vs 0.01 steady; warm-up 5 s for two 2 s blocks; first val 0.9 vs
    # 0.4. The step compiled in the first step and again in fit's warm-up (TensorFlow: two
    # tf.functions): a user's fit pays one, the larger (here both 1 s)
    assert f.one_time_s == pytest.approx(1.0 + 0.5)
    assert f.first_epoch_s == pytest.approx(3.9)
    assert f.fit_s == pytest.approx(1.5 + 20 * 2.4)
    longer_warmup = fit_estimate(dataclasses.replace(r, warmup_seconds=7.0))
    assert longer_warmup.one_time_s == pytest.approx(3.0 + 0.5)
    lo, hi = f.fit_ci
    assert lo < f.fit_s < hi  # per-round epochs 2.4, 2.7, 2.1: a real spread
    assert fit_estimate(r, epochs=5).fit_s == pytest.approx(1.5 + 5 * 2.4)
    # A whole fit adds up its slow epochs: N x the mean, not the median. Rounds 3-5 timed
    # no validation (a trial's first rounds only): their epochs take the median pass.
    # Round 5 (a 9 s stall, over 3x the median) is an interleaving artifact, left out.
    slow = dataclasses.replace(r, block_seconds=[2.0, 2.2, 1.8, 3.0, 2.0, 9.0],
                               block_rounds=[0, 1, 2, 3, 4, 5])
    f = fit_estimate(slow)
    assert f.epoch_s == pytest.approx(2.5) and f.validation_s == pytest.approx(0.4)
    steady = [2.4, 2.7, 2.1, 3.4, 2.4]
    assert f.mean_epoch[0] == pytest.approx(sum(steady) / 5)
    assert f.fit_s == pytest.approx(f.one_time_s + 20 * sum(steady) / 5)
    # stored before validation was timed: a training pass, no whole fit
    old = TrialResult.from_dict({k: v for k, v in r.to_dict().items()
                                 if not k.startswith(("validation", "workload_epochs"))})
    assert old.epoch_seconds == pytest.approx(2.0) and fit_estimate(old).fit_s is None


def test_fit_estimate_from_two_processes_has_each_process_inside_its_cis():
    """Two processes at two speeds (1.0 s and 1.3 s epochs, each steady within itself):
    the epoch's and the whole fit's CIs hold both, as a rerun in a fresh process may land
    on either; from one process alone they would be a few per cent wide."""
    from devicebench.trials.epochs import fit_estimate

    fast, slow = [1.0, 1.01, 0.99, 1.0, 1.02], [1.3, 1.31, 1.29, 1.3, 1.32]
    blocks = [x for pair in zip(fast, slow, strict=True) for x in pair]
    rounds = [r for r in range(5) for _ in range(2)]
    two = TrialResult(TrialSpec("seed-rnn"), block_seconds=blocks, block_rounds=rounds,
                      block_replicas=[0, 1] * 5, steps_per_block=100, steps_per_epoch=100,
                      workload_epochs=10)
    f = fit_estimate(two)
    lo, hi = f.epoch_ci
    assert lo <= 1.0 and hi >= 1.3
    _, mlo, mhi = f.mean_epoch
    assert mlo <= sum(fast) / 5 and mhi >= sum(slow) / 5
    flo, fhi = f.fit_ci
    assert flo <= 10 * sum(fast) / 5 and fhi >= 10 * sum(slow) / 5
    one = fit_estimate(TrialResult(TrialSpec("seed-rnn"), block_seconds=fast,
                                   block_rounds=list(range(5)), steps_per_block=100,
                                   steps_per_epoch=100, workload_epochs=10))
    assert one.epoch_ci[1] - one.epoch_ci[0] < 0.1 < hi - lo


def test_ratios_precise_stops_only_when_the_speedups_ci_is_narrow():
    from devicebench.trials.summary import ratios_precise

    a, b = TrialSpec("seed-rnn"), TrialSpec("seed-rnn", jit="on")
    rounds = list(range(8))

    def res(spec, times):
        return TrialResult(spec, block_seconds=times, block_rounds=rounds[:len(times)],
                           steps_per_block=1)

    base = res(a, [1.0] * 8)
    rule = ratios_precise(a, 0.02)
    steady = res(b, [0.5, 0.502, 0.499, 0.501, 0.5, 0.5, 0.498, 0.501])
    noisy = res(b, [0.5, 0.6, 0.45, 0.55, 0.5, 0.62, 0.41, 0.5])
    assert rule({a: base, b: steady})
    assert not rule({a: base, b: noisy})
    failed = TrialResult(a, status="error")
    assert rule({a: failed, b: noisy})  # nothing to compare with: more rounds cannot help


def test_the_worker_protocol_round_trips_through_json_and_fills_result_fields() -> None:
    import json

    from devicebench.trials.protocol import (
        BlockReply,
        MeasureRequest,
        SetupReply,
        SetupRequest,
    )

    spec = TrialSpec("seed-rnn", backend="jax")
    req = SetupRequest(spec, weights_in="/tmp/w.npz", equivalence_seconds=2.0,
                       screen_step_seconds=0.1, screen_min_steps=3)
    wire = json.loads(json.dumps(req.to_message()))
    assert wire["cmd"] == "setup" and SetupRequest.from_message(wire) == req
    assert MeasureRequest.from_message(MeasureRequest(False).to_message()) == MeasureRequest(False)
    # A reply with unknown keys (a newer worker) and missing ones (a fake) still reads.
    reply = SetupReply.from_message({"ok": True, "batch_size": 32, "new_key": 1})
    assert reply.batch_size == 32 and reply.epoch_estimate_seconds is None
    # Every set-up figure lands on a TrialResult field of the same name and default.
    assert TrialResult(spec, **SetupReply().result_fields()) == TrialResult(spec)
    block = BlockReply.from_message(BlockReply([0.25], 10, 0.5, 1.0, 2).to_message())
    assert block.block_seconds == [0.25] and block.warmup_blocks == 2


def test_results_are_frozen_carry_their_group_and_never_pair_across_groups() -> None:
    import dataclasses

    from devicebench.measure.stats import UnpairedGroups
    from devicebench.trials.summary import compare

    spec, other = TrialSpec("seed-rnn"), TrialSpec("seed-rnn", backend="jax")
    kw = dict(steps_per_block=10, block_seconds=[0.1, 0.11, 0.09, 0.1],
              block_rounds=[0, 1, 2, 3])
    a = TrialResult(spec, loss_verdict="reference", group_id="g1", run_id=1, **kw)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.status = "error"  # type: ignore[misc]
    assert a.step_time is a.step_time  # the bootstrap runs once per record
    b = TrialResult(other, loss_verdict="reference", group_id="g2", run_id=2, **kw)
    with pytest.raises(UnpairedGroups):
        paired_ratio(a.round_step_times, b.round_step_times)
    same_group = dataclasses.replace(b, group_id="g1", loss_verdict="same")
    assert paired_ratio(a.round_step_times, same_group.round_step_times).value == 1.0
    # Two groups of one workload: each keeps its own reference; no row pairs across.
    rows = compare([a, b])
    assert [r.is_reference for r in rows] == [True, True]
    assert all(r.speedup is None for r in rows)
