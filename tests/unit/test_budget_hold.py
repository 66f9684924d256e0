"""The budget holds past the least a comparison needs (issue 25): set-ups stopped at the
search's deadline, the final's extra processes and rounds planned on what its least
rounds cost, and what was cut said. Fakes only at the seams: the clock, the launcher
(a replayed H200 profile on a virtual clock) and the trial group."""

from __future__ import annotations

import pytest

from devicebench.advisor.advice import advise_workload, decided
from devicebench.advisor.budget import FINAL_MIN_ROUNDS, LEAST_ROUNDS, SearchBudget
from devicebench.advisor.final import final_comparison
from devicebench.launch import WorkerFailure
from devicebench.profiles import load_profile
from devicebench.profiles.replay import VirtualClock, replay_launcher
from devicebench.trials.engine import RunOptions, TrialGroup
from devicebench.trials.rounds import bounded_request
from devicebench.trials.spec import TrialSpec
from tests.unit.test_advise import BASE, STEPS, FakeGroup, _snap

JAX = BASE.with_(backend="jax")


class SlowWorker:
    """Replies after ``cost`` seconds of a fake clock; times out as a real one does."""

    def __init__(self, clock: VirtualClock, cost: float) -> None:
        self.clock, self.cost = clock, cost

    def request(self, message, timeout):
        if self.cost > timeout:
            self.clock.advance(timeout)
            raise WorkerFailure("timeout", f"no reply within {timeout:.0f} s")
        self.clock.advance(self.cost)
        return {"ok": True}


def test_a_request_past_its_deadline_is_stopped_there_as_a_budget_skip():
    clock = VirtualClock()
    with pytest.raises(WorkerFailure) as exc:
        bounded_request(SlowWorker(clock, 30.0), {}, timeout=300, end=10.0, clock=clock)
    assert exc.value.status == "skipped" and exc.value.message.startswith("budget")
    assert clock.now == pytest.approx(10.0)  # stopped at the deadline, not at 30 s
    # A real timeout (the user's --timeout the nearer limit) stays a timeout.
    with pytest.raises(WorkerFailure) as exc:
        bounded_request(SlowWorker(clock, 30.0), {}, timeout=5, end=clock.now + 100,
                        clock=clock)
    assert exc.value.status == "timeout"
    assert bounded_request(SlowWorker(clock, 2.0), {}, timeout=5, end=None,
                           clock=clock) == {"ok": True}


def test_the_engine_stops_a_compile_that_runs_past_the_set_up_deadline():
    # torch.compile on the H200 cost 25 s of set-up: a search planning on torch's other
    # set-ups (a few seconds) must not wait for it past its deadline.
    profile, clock = load_profile("h200"), VirtualClock()
    base = TrialSpec("mnist-cnn", backend="torch", device="gpu:0")
    jit = base.with_(jit="on")
    with TrialGroup(base, RunOptions(equivalence_steps=20), clock=clock,
                    start_worker=replay_launcher(profile, clock)) as group:
        group.add([base])
        deadline = clock.now + 15.0  # its import (~5 s there) and 10 s of its set-up
        group.add([jit], end_by={jit: deadline})
        r = group.results[jit]
        assert r.status == "skipped" and r.error.startswith("budget: its set-up was stopped")
        assert clock.now <= deadline + 1.0
        assert group.results[base].status == "ok"  # the reference is never cut


class SlowRounds(FakeGroup):
    """Rounds cost ``factor`` times what the set-up steps promise (a TensorFlow epoch
    under ``fit`` on a loaded VM ran ~2x its set-up steps' estimate); its rounds stop,
    past ``min_rounds``, as the engine's do: when another like the last would end past
    ``budget_seconds``."""

    def __init__(self, factor: float) -> None:
        super().__init__({s: t * factor for s, t in STEPS.items()}, setup_bias=1 / factor)

    def measure(self, options, enough=None):
        start, ran = self.now, 0
        while self.rounds_done < options.max_rounds:
            t0 = self.now
            ran += super().measure(
                RunOptions(min_rounds=self.rounds_done + 1, max_rounds=self.rounds_done + 1))
            if self.rounds_done >= options.min_rounds and (
                    (enough is not None and enough(self.results))
                    or self.now - start + (self.now - t0) > options.budget_seconds):
                break
        return ran


def test_the_final_measures_its_least_rounds_first_and_plans_replicas_on_their_cost():
    group = SlowRounds(factor=20.0)  # rounds of 1.5 s, promised as 0.08 s
    budget = SearchBudget(16.0, clock=group.clock)
    group.add([BASE, JAX])
    rep = final_comparison(group, budget, [BASE, JAX], decided(BASE, [JAX]))
    # The least (3 rounds) ran; the rounds it measured showed no room for second
    # processes, so none were started, and the output says so.
    assert group.rounds_done >= LEAST_ROUNDS
    assert rep.budget_limited and rep.processes == {BASE: 1, JAX: 1}
    assert any(c.startswith("budget was the limit") and "1 worker process" in c
               for c in budget.cuts)
    assert budget.elapsed() <= 1.1 * budget.total_s
    assert set(budget.phases) >= {"least rounds"}


def test_with_room_the_final_replicates_and_reaches_its_rounds():
    group = FakeGroup(setup_bias=1.0)
    budget = SearchBudget(600.0, clock=group.clock)
    group.add([BASE, JAX])
    rep = final_comparison(group, budget, [BASE, JAX], decided(BASE, [JAX]))
    assert rep.processes == {BASE: 2, JAX: 2} and not rep.budget_limited
    assert group.rounds_done >= FINAL_MIN_ROUNDS and budget.cuts == []


def test_advise_reports_where_the_time_went_and_what_the_budget_cut():
    slow = SlowRounds(factor=20.0)
    advice = advise_workload("seed-rnn", _snap(), baseline=BASE, budget_s=30, equivalence_steps=50,
                             start_group=slow.start, clock=slow.clock)
    report = advice.to_dict()["budget"]
    assert report["limited"] and report["cuts"]
    assert all(c.startswith("budget was the limit") for c in report["cuts"])
    assert {"least set-up", "least rounds"} <= set(report["phases_s"])
    assert advice.elapsed_s <= 1.1 * 30
    roomy = FakeGroup(STEPS)
    advice = advise_workload("seed-rnn", _snap(), baseline=BASE, budget_s=1e6, equivalence_steps=50,
                             start_group=roomy.start, clock=roomy.clock)
    assert advice.budget["limited"] is False and advice.budget["cuts"] == []


def test_an_overrun_of_the_least_says_what_it_cost_and_the_budget_that_fits():
    # Set-ups of 2 s each and rounds of ~7 s: a 10 s budget cannot hold the least a
    # comparison needs, and the advice says so with the figures.
    slow = SlowRounds(factor=100.0)
    advice = advise_workload("seed-rnn", _snap(), baseline=BASE, budget_s=10, equivalence_steps=50,
                             start_group=slow.start, clock=slow.clock)
    assert advice.elapsed_s > 11
    (note,) = [n for n in advice.notes if n.startswith("took ")]
    assert "least a CI needs" in note and "raise --budget (to about" in note
    fits = int(note.rsplit("to about ", 1)[1].split(" s")[0])
    assert fits >= advice.elapsed_s - advice.budget["phases_s"].get("final", 0.0)


# -- the least a comparison costs here, and a budget below it (issue 27, item 15) ------

def test_the_first_batch_is_what_advise_sets_up_first():
    from devicebench.advisor.floor import first_batch

    fake = FakeGroup()
    advise_workload("seed-rnn", _snap(), baseline=BASE, budget_s=120, equivalence_steps=50,
                    start_group=fake.start, clock=fake.clock)
    assert first_batch(BASE, _snap()) == fake.order[:2]


def _stored(spec, **kw):
    from devicebench.trials.result import TrialResult

    fields = dict(import_seconds=3.0, setup_seconds=4.0, first_step_seconds=1.0,
                  setup_step_seconds=0.01, setup_steps=49, warmup_seconds=2.0,
                  steps_per_block=10, block_seconds=[0.5, 0.6, 0.7], block_rounds=[0, 1, 2])
    return TrialResult(spec, **{**fields, **kw})


def test_a_budget_below_the_stored_least_is_refused_in_one_line(tmp_path):
    from devicebench.advisor.floor import (
        check_budget_floor,
        least_cost,
        refuse_short_budget,
        stored_trials,
    )
    from devicebench.errors import InputError
    from devicebench.store import ResultStore

    db, snap = tmp_path / "r.db", _snap()
    assert stored_trials(db, snap, [BASE]) == {} and not db.exists()  # none created
    with ResultStore.open(db) as store:
        run = store.start_run(store.add_machine(snap), "advise", {})
        for spec in (BASE, JAX):
            store.add_trial(run, _stored(spec))
    got = stored_trials(db, snap, [BASE, JAX])
    assert set(got) == {BASE, JAX} and got[BASE].import_seconds == 3.0
    least = least_cost([BASE, JAX], got, equivalence_steps=20)
    # The slowest import, each set-up with 20 of its steps, each warm-up, and three
    # rounds at blocks of at most 0.25 s (the final may cut them shorter).
    assert least.seconds == pytest.approx(3.0 + 2 * (4.0 + 1.0 + 0.2) + 2 * 2.0 + 3 * 0.5)
    assert least.runs == (run,) and least.budget_that_fits == 30
    check_budget_floor(least.seconds / 1.1, least)  # within 10%: kept
    with pytest.raises(InputError) as exc:
        refuse_short_budget(db, snap, BASE, 10.0, 20, {})
    line = str(exc.value)
    assert "\n" not in line and "--budget 10 s is below the least" in line
    assert "tensorflow/cpu and jax/cpu" in line and f"run #{run}" in line
    assert line.endswith("fix: --budget 30 (or more)")
    # Another machine's figures say nothing about this one.
    other = _snap()
    other.host.cpu_cores_logical = 64
    refuse_short_budget(db, other, BASE, 10.0, 20, {})


class Recording(FakeGroup):
    """Records the block cut each measure asked for (0: K steps)."""

    def __init__(self) -> None:
        super().__init__(setup_bias=1.0)
        self.cuts: list[float] = []

    def measure(self, options, enough=None):
        self.cuts.append(options.whole_epoch_seconds)
        return super().measure(options, enough)


@pytest.mark.parametrize("budget_s,whole", [(16.0, False), (120.0, True)])
def test_the_final_times_k_step_blocks_when_whole_epochs_would_not_fit(budget_s, whole):
    # seed-rnn-like: TensorFlow's epoch ~1.5 s by its set-up steps (up to 2x that in fit):
    # three rounds of whole epochs and their warm-up need ~13 s, 12 s are left at 16 s.
    group = Recording()
    budget = SearchBudget(budget_s, clock=group.clock)
    group.add([BASE, JAX])
    final_comparison(group, budget, [BASE, JAX], decided(BASE, [JAX]))
    assert group.cuts and all((c > 0) == whole for c in group.cuts)  # one cut throughout
    said = [c for c in budget.cuts if "blocks of K steps, not whole epochs" in c]
    assert bool(said) == (not whole)


def test_the_main_job_shares_its_total_between_its_searches():
    from devicebench.advisor.budget import share_of_total

    assert share_of_total(90, 16, 2, 40) == 36.0  # even shares of what is left
    assert share_of_total(90, 16 + 39, 1, 40) == 33.0  # the first ran long: less after
    assert share_of_total(90, 5, 2, 40) == 40.0  # never more than each one's own
    assert share_of_total(90, 95, 1, 40) == 10.0  # never below advise's least
