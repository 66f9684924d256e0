"""Process replication: a configuration measured in several worker processes, its CI
across processes and rounds (hierarchical bootstrap), its blocks tagged by replica all
the way to the store. The launcher is the seam (a fake worker); the store is a real
SQLite file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from devicebench.env.snapshot import EnvSnapshot, HostInfo
from devicebench.launch import WorkerFailure
from devicebench.measure.stats import (
    RoundTimes,
    between_process_spread,
    hierarchical_summary,
    paired_ratio,
    process_medians,
    summarize,
)
from devicebench.store import ResultStore, schema
from devicebench.trials.engine import RunOptions, TrialGroup
from devicebench.trials.replication import measure_replicated
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec

# -- statistics -----------------------------------------------------------------------


def test_one_process_is_the_ordinary_bootstrap():
    x = [1.0, 1.02, 0.98, 1.01, 0.99]
    assert hierarchical_summary({0: x}) == summarize(x)


def test_two_processes_at_two_speeds_give_a_ci_that_spans_both():
    fast = [1.0, 1.01, 0.99, 1.0, 1.005, 0.995]
    slow = [1.3, 1.31, 1.29, 1.3, 1.305, 1.295]
    within = summarize(fast + slow)  # as if one process: rounds resampled only
    across = hierarchical_summary({0: fast, 1: slow})
    assert across.ci_low <= 1.0 and across.ci_high >= 1.3
    assert across.rel_ci_halfwidth > within.rel_ci_halfwidth
    assert between_process_spread({0: fast, 1: slow}) == pytest.approx(0.3 / 1.15)


def test_paired_ratio_resamples_processes_when_there_are_several():
    rounds = range(8)
    # The candidate's two processes run at 1.0 and 1.2 (a two-speed process); the
    # baseline's at 2.0: the ratio is 2/1.1 and its CI must cover 2/1.2 .. 2/1.0.
    base = RoundTimes({r: 2.0 for r in rounds}, group="g",
                      by_process={0: {r: 2.0 for r in rounds}, 1: {r: 2.0 for r in rounds}})
    cand = RoundTimes({r: 1.1 for r in rounds}, group="g",
                      by_process={0: {r: 1.0 for r in rounds}, 1: {r: 1.2 for r in rounds}})
    q = paired_ratio(base, cand)
    assert q.processes == (2, 2) and q.interleaved
    assert q.ci_low <= 2 / 1.2 + 1e-9 and q.ci_high >= 2 / 1.0 - 1e-9
    single = paired_ratio(RoundTimes(dict(base), "g"), RoundTimes(dict(cand), "g"))
    assert single.processes == (1, 1) and single.ci_high - single.ci_low < 1e-9


def test_a_result_measured_by_two_processes_knows_it():
    r = TrialResult(TrialSpec("seed-rnn"), steps_per_block=10,
                    block_seconds=[0.10, 0.13, 0.10, 0.13, 0.10, 0.13],
                    block_rounds=[0, 0, 1, 1, 2, 2], block_replicas=[0, 1, 0, 1, 0, 1])
    assert r.processes == 2
    assert r.samples_by_process == {0: [0.01] * 3, 1: pytest.approx([0.013] * 3)}
    assert r.round_step_times.processes == 2
    assert r.round_step_times[0] == pytest.approx(0.0115)  # the median of the two
    assert r.step_time.ci_low <= 0.01 and r.step_time.ci_high >= 0.013
    untagged = TrialResult(TrialSpec("seed-rnn"), steps_per_block=10,
                           block_seconds=[0.1, 0.1], block_rounds=[0, 1])
    assert untagged.processes == 1 and untagged.round_step_times.by_process == {}


# -- the engine: more than one worker per spec ----------------------------------------


class Fake:
    """A worker whose step time is fixed per process; ``fail`` names a command it dies on."""

    def __init__(self, spec, n, log, fail=None):
        self.spec, self.n, self.log, self.fail = spec, n, log, fail
        self.step = {"tensorflow": 0.004, "jax": 0.001}[spec.backend] * (1 + 0.2 * n)

    def send(self, message):
        self._sent = message

    def receive(self, timeout):
        return self.request(self._sent, timeout)

    def request(self, message, timeout):
        cmd = message["cmd"]
        if cmd == "measure":
            self.log.append((self.spec.backend, self.n))
        if cmd == self.fail:
            raise WorkerFailure("crashed", "worker killed by SIGSEGV")
        if cmd == "setup":
            return {"ok": True, "batch_size": 32, "steps_per_epoch": 100,
                    "equivalence_losses": [1.0], "epoch_estimate_seconds": 10.0,
                    "setup_seconds": 5.0 + self.n, "setup_step_seconds": self.step}
        if cmd == "measure":
            return {"ok": True, "block_seconds": [self.step * 10], "steps_per_block": 10,
                    "warmup_seconds": 1.0 + self.n}
        return {"ok": True, "import_seconds": 1.0, "final_loss": 0.5}

    def begin_close(self):
        pass

    def close(self, timeout=10):
        pass

    def kill(self):
        pass


def _group(log, fail_replica=None):
    started: dict[TrialSpec, int] = {}

    def start(spec):
        n = started.get(spec, 0)
        started[spec] = n + 1
        return Fake(spec, n, log, fail_replica if n == 2 else None)

    a, b = TrialSpec("seed-rnn"), TrialSpec("seed-rnn", backend="jax")
    return a, b, TrialGroup(a, RunOptions(), start_worker=start)


def test_replicas_interleave_in_time_and_tag_their_blocks():
    log: list = []
    a, b, group = _group(log)
    with group:
        group.add([a, b])
        assert group.replicate({a: 2, b: 3}) == {a: 2, b: 3}
        group.measure(RunOptions(min_rounds=2, max_rounds=2, target_ci=0))
        group.finish()
    # Each round: every trial's first process, then every trial's second, ...
    assert log == [("tensorflow", 0), ("jax", 0), ("tensorflow", 1), ("jax", 1), ("jax", 2)] * 2
    ra, rb = group.results[a], group.results[b]
    assert ra.block_replicas == (0, 1, 0, 1) and ra.block_rounds == (0, 0, 1, 1)
    assert rb.processes == 3 and rb.process_spread == pytest.approx(0.4 / 1.2)
    # Set-up and warm-up figures stay the first process's.
    assert ra.setup_seconds == 5.0 and ra.warmup_seconds == 1.0
    q = paired_ratio(ra.round_step_times, rb.round_step_times)
    assert q.processes == (2, 3)


def test_a_failed_replica_is_dropped_and_the_trial_goes_on():
    log: list = []
    a, b, group = _group(log, fail_replica="measure")
    with group:
        group.add([a, b])
        group.replicate({b: 3})
        group.measure(RunOptions(min_rounds=2, max_rounds=2, target_ci=0))
        assert group.processes(b) == 2
        group.finish()
    rb = group.results[b]
    assert rb.status == "ok" and set(rb.block_replicas) == {0, 1}
    assert ("jax", 2) in log and log.count(("jax", 2)) == 1  # asked once, then dropped


def test_run_replicates_its_verdict_configurations_more_where_processes_disagree():
    # Each fake process runs 20% slower than the last: processes always disagree.
    log: list = []
    a, b, group = _group(log)
    reps = []
    with group:
        group.add([a, b])
        measure_replicated(group, RunOptions(min_rounds=3, max_rounds=12, target_ci=0,
                                             budget_seconds=1e6), clock=lambda: 0.0,
                           on_replication=reps.append)
        group.finish()
    (rep,) = reps
    # The reference and the fastest by set-up steps (jax): 2, then 3, then 4 processes.
    assert rep.processes == {a: 4, b: 4} and not rep.budget_limited
    assert any("disagree beyond their own CIs" in n for n in rep.notes)
    assert {k for k in group.results[b].block_replicas} == {0, 1, 2, 3}


def test_a_fixed_number_of_rounds_gets_two_processes_and_the_budget_is_said():
    a, b, group = _group([])
    reps = []
    with group:
        group.add([a, b])
        measure_replicated(group, RunOptions(min_rounds=3, max_rounds=3, budget_seconds=1e6),
                           clock=lambda: 0.0, on_replication=reps.append)
        assert group.rounds_done == 3
    assert reps[0].processes == {a: 2, b: 2}
    a, b, group = _group([])
    with group:
        group.add([a, b])
        measure_replicated(group, RunOptions(min_rounds=3, max_rounds=3, budget_seconds=5),
                           clock=lambda: 0.0, on_replication=reps.append)
    assert reps[1].processes == {a: 1, b: 1} and reps[1].budget_limited
    assert reps[1].notes[0].startswith("budget was the limit: tensorflow/cpu, jax/cpu "
                                       "measured in 1 worker process each, not 2")


# -- the store ------------------------------------------------------------------------


def test_replica_tags_survive_the_store_and_a_version_4_file_migrates(tmp_path: Path):
    path = tmp_path / "v4.db"
    raw = sqlite3.connect(path, isolation_level=None)
    schema.apply_migrations(raw, target=4)
    raw.close()
    r = TrialResult(TrialSpec("seed-rnn"), steps_per_block=10,
                    block_seconds=[0.1, 0.12, 0.1, 0.12], block_rounds=[0, 0, 1, 1],
                    block_replicas=[0, 1, 0, 1])
    one = TrialResult(TrialSpec("seed-rnn", jit="on"), steps_per_block=10,
                      block_seconds=[0.1, 0.1], block_rounds=[0, 1])
    with ResultStore.open(path) as store:
        assert schema.schema_version(store.connection) == 5
        run = store.start_run(store.add_machine(EnvSnapshot(host=HostInfo())), "run", {})
        store.add_trial(run, r)
        store.add_trial(run, one)
        back, back_one = store.trials_for_run(run)
    assert back.block_replicas == (0, 1, 0, 1) and back.processes == 2
    assert back_one.block_replicas == () and back_one == one


class OwnCut(Fake):
    """A worker that plans its own blocks from its own step estimate (as a process does
    when not told): K = 10 steps in the first process, 30 in the second, ... — unless the
    measure request names the trial's ``steps_per_block`` and ``obey`` is set."""

    obey = True

    def request(self, message, timeout):
        reply = super().request(message, timeout)
        if message["cmd"] == "measure":
            k = message.get("steps_per_block") if self.obey else None
            k = k or 10 * (1 + 2 * self.n)
            reply = {**reply, "block_seconds": [self.step * k], "steps_per_block": k}
            self.log.append(("k", self.n, message.get("steps_per_block")))
        return reply


def _own_cut_group(log, obey, events=None):
    started: dict[TrialSpec, int] = {}

    def start(spec):
        n = started.get(spec, 0)
        started[spec] = n + 1
        w = OwnCut(spec, n, log)
        w.obey = obey
        return w

    a = TrialSpec("seed-rnn")
    on_event = (lambda kind, spec, info: events.append((kind, info))) if events is not None \
        else None
    return a, TrialGroup(a, RunOptions(), start_worker=start, on_event=on_event)


def test_a_later_process_cuts_the_blocks_its_trials_first_process_cut():
    # Found on the 2-core VM: a JAX replica planned 3-epoch blocks from its own estimate
    # where the first process cut 7, and its block seconds were divided by the first's
    # step count: "processes 2.3x apart" that were one block cut two ways.
    log: list = []
    a, group = _own_cut_group(log, obey=True)
    with group:
        group.add([a])
        group.replicate({a: 2})
        group.measure(RunOptions(min_rounds=2, max_rounds=2, target_ci=0))
        group.finish()
    asked = [entry for entry in log if entry[0] == "k"]
    assert asked == [("k", 0, None), ("k", 1, 10)] * 2  # the replica is told K = 10
    r = group.results[a]
    assert r.processes == 2 and r.steps_per_block == 10
    # Both processes have one step time (the Fake's own: 0.004 s and 0.0048 s).
    meds = sorted(process_medians(r.samples_by_process).values())
    assert meds == pytest.approx([0.004, 0.0048])


def test_a_block_cut_another_way_is_refused_and_its_process_dropped():
    log: list = []
    events: list = []
    a, group = _own_cut_group(log, obey=False, events=events)
    with group:
        group.add([a])
        group.replicate({a: 2})
        group.measure(RunOptions(min_rounds=2, max_rounds=2, target_ci=0))
        assert group.processes(a) == 1
        group.finish()
    r = group.results[a]
    assert r.status == "ok" and set(r.block_replicas or (0,)) == {0}
    failed = [info for kind, info in events if kind == "replica-failed"]
    assert failed and "30 steps where the trial's first process cut 10" in failed[0]["error"]
