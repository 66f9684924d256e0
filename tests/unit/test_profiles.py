"""Machine profiles and their replay: the unchanged advisor judged on machines we lack.

The H200 profile is devicebench's own output on a real NVIDIA H200
(tests/fixtures/recorded/h200/); the M1 profile is derived from published figures
(tests/fixtures/recorded/apple-public/). Replays run on a virtual clock: no process, no
framework, no wall time.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from devicebench.advisor.advice import default_baseline, parse_baseline
from devicebench.advisor.budget import SearchBudget, step_lower_bound
from devicebench.advisor.figures import DeviceFigures
from devicebench.advisor.verdict import choose, payback
from devicebench.env.snapshot import EnvSnapshot, HostInfo
from devicebench.errors import InputError
from devicebench.launch.worker import WorkerFailure
from devicebench.profiles import MachineProfile, load_profile
from devicebench.profiles.profile import PROFILES_DIR
from devicebench.profiles.replay import ReplayWorker, VirtualClock, replay_advise, replay_launcher
from devicebench.profiles.shipped import build_all
from devicebench.trials.headline import Headline, headline
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec
from devicebench.trials.summary import compare

RECORDED = Path(__file__).resolve().parent.parent / "fixtures" / "recorded"
MAIN_BUDGET = 40.0  # the main job's budget per workload


def test_shipped_profiles_are_what_the_recorded_inputs_build():
    for name, built in build_all(RECORDED).items():
        shipped = json.loads((PROFILES_DIR / f"{name}.json").read_text())
        assert built.to_dict() == shipped, f"rebuild with python bench/make_profiles.py ({name})"


def test_h200_records_carry_the_raw_blocks_of_the_recorded_run():
    run = json.loads((RECORDED / "h200" / "run.json").read_text())
    row = next(r for r in run["results"] if r["workload"] == "seed-rnn"
               and r["label"] == "jax/gpu:0")
    rec = load_profile("h200").record(TrialSpec.from_dict(row["spec"]))
    k = row["raw"]["steps_per_block"]
    assert rec.origin == "measured"
    assert rec.step_seconds == [b / k for b in row["raw"]["block_seconds"]]
    assert rec.median_step == pytest.approx(row["step_time_s"]["median"], rel=1e-9)
    assert rec.steps_per_epoch == 219 and rec.batch_size == 32
    # What was not measured there is absent, not invented.
    assert load_profile("h200").record(TrialSpec("seed-rnn", backend="tensorflow")) is None


def _replay(name: str, workload: str, baseline: str | None = None, **kw):
    profile = load_profile(name)
    spec = parse_baseline(baseline, workload, "jax") if baseline else None
    return replay_advise(profile, workload, budget_s=kw.pop("budget_s", MAIN_BUDGET),
                         baseline=spec, **kw)


def test_h200_seed_rnn_moves_to_the_cpu_with_a_launch_cost_reason():
    advice, spent = _replay("h200", "seed-rnn")
    assert advice.baseline.label == "jax/gpu:0"
    assert "tensorflow, which is not installed" in advice.baseline_reason
    assert advice.recommended.label == "jax/cpu"
    assert advice.headline.text.startswith("Accelerator: no — gpu:0 is")
    assert "SLOWER than the CPU" in advice.headline.text
    assert advice.headline.ratio.ci_high < 1
    why = {r.id: r.text for r in advice.reasons}
    launch = why["accelerator-launch-bound"]
    assert "50-timestep loop" in launch and "per timestep on gpu:0" in launch
    assert "one compiled call" in launch and "recorded/h200/ops.json" in launch
    assert "TF32" in why["float32-precision"]
    assert spent <= MAIN_BUDGET * 1.1


def test_h200_mnist_from_torch_gpu_finds_jax_gpu_not_the_slow_to_compile_jit():
    advice, spent = _replay("h200", "mnist-cnn", "backend=torch,device=gpu:0")
    assert advice.recommended.label == "jax/gpu:0"
    assert "yes — gpu:0 trains mnist-cnn" in advice.headline.text  # torch: GPU 4x the CPU
    jit = next(o for o in advice.outcomes if o.spec.label == "torch/gpu:0 jit=on")
    assert jit.untried.startswith("could not win")  # 4x its 6.2 ms is still > 1.3 ms
    assert spent <= MAIN_BUDGET * 1.1


def test_m1_seed_rnn_verdict_is_the_cpu():
    advice, spent = _replay("m1-published", "seed-rnn")
    assert advice.baseline.label == "tensorflow/gpu:0"
    assert advice.recommended.label == "tensorflow/cpu"
    assert "33.5x SLOWER" in advice.headline.text
    assert "accelerator-launch-bound" in {r.id for r in advice.reasons}
    assert spent <= MAIN_BUDGET * 1.1
    assert "derived" in load_profile("m1-published").label


def test_cpu_vm_profile_keeps_this_machines_verdicts():
    # Recorded here with `devicebench profile record` (an exhaustive sweep of 10
    # configurations per workload): the answers the live main job gives on this VM.
    rnn, spent_rnn = _replay("cpu-vm", "seed-rnn")
    cnn, spent_cnn = _replay("cpu-vm", "mnist-cnn")
    assert rnn.headline.text.startswith("No accelerator")
    assert rnn.recommended.label == "jax/cpu"
    assert cnn.recommended.label == "tensorflow/cpu precision=mixed_bfloat16"
    assert "changes the math: precision" in cnn.verdict
    assert max(spent_rnn, spent_cnn) <= MAIN_BUDGET * 1.1


@pytest.mark.parametrize("name,workload", [("h200", "seed-rnn"), ("h200", "mnist-cnn"),
                                           ("h200", "lstm-forecast"),
                                           ("m1-published", "mnist-cnn"),
                                           ("cpu-vm", "seed-rnn"), ("cpu-vm", "mnist-cnn")])
def test_replayed_searches_stay_within_their_budget(name, workload):
    for budget in (20.0, 40.0, 100.0):
        advice, spent = _replay(name, workload, budget_s=budget)
        if spent > budget * 1.1:
            # Only when the least a comparison needs does not fit, and it says so.
            assert budget < 40 and any("raise --budget" in n and "least a CI needs" in n
                                       for n in advice.notes), (budget, spent)


def test_replay_worker_serves_a_record_on_the_virtual_clock_and_absent_specs_skip():
    profile = load_profile("h200")
    clock = VirtualClock()
    start = replay_launcher(profile, clock)
    with pytest.raises(WorkerFailure, match="absent from the h200 profile") as exc:
        start(TrialSpec("seed-rnn", backend="tensorflow"))
    assert exc.value.status == "skipped"
    spec = TrialSpec("seed-rnn", backend="jax", device="gpu:0")
    w = start(spec)
    assert isinstance(w, ReplayWorker)
    w.send({"cmd": "prepare"})
    assert w.receive(timeout=60)["import_seconds"] == pytest.approx(clock.now)
    setup = w.request({"cmd": "setup", "equivalence_steps": 50}, timeout=60)
    assert setup["steps_per_epoch"] == 219 and setup["equivalence_losses"]
    before = clock.now
    block = w.request({"cmd": "measure", "whole_epochs": False}, timeout=60)
    assert clock.now - before == pytest.approx(block["block_seconds"][0]
                                               + block["warmup_seconds"])


def test_profile_files_are_validated():
    with pytest.raises(InputError, match="no machine profile"):
        load_profile("no-such-machine")
    with pytest.raises(InputError, match="not a devicebench machine profile"):
        MachineProfile.from_dict({"schema": "other"})


def _result(spec, step, first=0.5, rounds=6, spe=100):
    drift = [1.0, 1.1, 0.95, 1.05, 1.0, 0.9][:rounds]
    return TrialResult(spec, steps_per_block=10, steps_per_epoch=spe,
                       block_seconds=[10 * step * d for d in drift],
                       block_rounds=list(range(rounds)), first_step_seconds=first,
                       loss_verdict="same")


def test_a_compile_that_does_not_pay_back_within_the_planned_epochs_is_not_the_verdict():
    base = TrialSpec("mnist-cnn", backend="torch", device="gpu:0")
    jit = base.with_(jit="on")
    res = [replace(_result(base, 0.006), loss_verdict="reference"),
           _result(jit, 0.003, first=25.0)]
    rows = compare(res)
    outcomes = {jit: type("O", (), {"rejected": ""})()}
    best, notes = choose(rows, base, outcomes, epochs=5)
    assert best is None
    # 24.5 s more up front / 3 ms saved per step / 100 steps an epoch = 82 epochs.
    assert "does not pay back" in notes[0] and "from 81.7 epochs on" in notes[0]
    best, _ = choose(rows, base, outcomes, epochs=100)
    assert best.result.spec == jit
    p = payback(res[1], res[0], 5)
    assert p.extra_s == pytest.approx(24.5) and not p.pays_back


def test_headline_without_an_accelerator_says_so_and_what_was_compared():
    h = headline(TrialSpec("seed-rnn"), None, {})
    assert isinstance(h, Headline) and h.text.startswith("No accelerator")
    assert "compared across backends" in h.text


def test_default_baseline_names_its_reason():
    snap = EnvSnapshot(host=HostInfo(os="Linux", machine="x86_64"),
                       distributions={"jax": "0.10.2"}, env_vars={"KERAS_BACKEND": "torch"})
    spec, why = default_baseline(snap, "seed-rnn")
    assert spec.backend == "jax" and spec.device == "cpu"
    assert "KERAS_BACKEND selects torch, which is not installed" in why


def test_step_lower_bounds_come_from_measured_evidence():
    base = TrialSpec("mnist-cnn", backend="torch", device="gpu:0")
    r = TrialResult(base, setup_step_seconds=0.006)
    cpu = DeviceFigures("ops", "cpu", peak_gflops=1000.0)
    # A knob flip of a measured backend and device: at most 4x faster.
    assert step_lower_bound(base.with_(jit="on"), {base: r}, {}, None).seconds == 0.0015
    # Another device: its FLOPs at the device's measured peak.
    b = step_lower_bound(base.with_(device="cpu"), {base: r}, {"cpu": cpu}, 4e8)
    assert b.seconds == pytest.approx(4e-4) and "measured peak" in b.why
    # No evidence: it could win.
    assert step_lower_bound(base.with_(backend="jax"), {base: r}, {}, None).seconds == 0.0
    budget = SearchBudget(40.0, clock=lambda: 0.0)
    assert budget.setup_deadline() == pytest.approx(34.0)  # 15% kept for the final


def test_profile_replay_command_answers_and_refuses_bad_input():
    from tests.conftest import assert_one_line_error, run_cli

    res = run_cli("profile", "replay", "h200", "seed-rnn", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["profile"] == "h200" and doc["spent_s"] <= 44
    assert doc["advice"]["recommended"]["device"] == "cpu"
    assert doc["advice"]["headline"]["speedup_over_cpu"]["ci95"][1] < 1
    res = run_cli("profile", "replay", "m1-published", "mnist-cnn")
    assert res.returncode == 0 and "DERIVED from published figures" in res.stdout
    assert_one_line_error(run_cli("profile", "replay", "nope", "seed-rnn"),
                          "no machine profile 'nope'")
    assert_one_line_error(run_cli("profile", "replay", "h200", "small-resnet"),
                          "has no workload 'small-resnet'")


def test_profile_record_says_what_it_is_doing():
    """Issue 26: `profile record` printed nothing for 84 s. The sweep reports each set-up
    (k of n) and each round through the progress protocol; replayed here on the H200
    profile's seed-rnn records."""
    from devicebench.profiles.record import sweep
    from devicebench.progress import Reporter

    profile = load_profile("h200")
    specs = [r.spec for r in profile.workloads["seed-rnn"]][:3]
    clock = VirtualClock()
    events: list = []
    sweep(specs, max_rounds=3, start_worker=replay_launcher(profile, clock), clock=clock,
          on_event=Reporter("seed-rnn", events.append).trial_events(len(specs)))
    setups = [e for e in events if "setting up" in e.message]
    assert [(e.message.split(": import")[0], e.done, e.total) for e in setups] == [
        (f"setting up {s.label}", i, 3) for i, s in enumerate(specs, 1)]
    rounds = [e for e in events if e.message == "interleaved round"]
    assert [(e.done, e.total) for e in rounds][-1] == (3, 3)
    assert rounds[-1].line() == "seed-rnn: interleaved round (3 of 3)"
