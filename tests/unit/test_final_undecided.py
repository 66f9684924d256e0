"""The final's open answers and what replication costs (issue 25, advise's regret).

On the H200 profile advise keeps jax/gpu:0 for mnist-cnn while the exhaustive sweep's
median puts mixed_bfloat16 ~9% ahead — a difference neither advise's final nor the
sweep's 30 rounds can show (the sweep's own CI: -1% to +21%). advise keeps the baseline
and now says what may be faster, by how much, and whether a larger budget could tell.
Replays of the shipped profiles on a virtual clock: no process, no framework, no wall
time.
"""

from __future__ import annotations

from dataclasses import replace

from devicebench.advisor.advice import decided
from devicebench.advisor.budget import FINAL_MAX_ROUNDS, SearchBudget
from devicebench.advisor.final import final_comparison
from devicebench.profiles import load_profile
from devicebench.profiles.replay import replay_advise
from tests.unit.test_advise import BASE, FakeGroup

JAX = BASE.with_(backend="jax")

BF16 = "jax/gpu:0 precision=mixed_bfloat16"


def _undecided(advice) -> list[str]:
    return [n for n in advice.notes if "undecided:" in n]


def test_an_open_answer_under_a_short_budget_says_what_may_be_faster_and_the_budget():
    advice, spent = replay_advise(load_profile("h200"), "mnist-cnn", budget_s=40)
    assert advice.recommended is None  # keeps the baseline: nothing shown faster
    assert advice.verdict.startswith("keep jax/gpu:0")
    (line,) = _undecided(advice)
    assert line.startswith("budget was the limit: undecided: " + BF16 + " may be ")
    assert "faster than jax/gpu:0" in line and "but not significantly" in line
    # The figure it quotes is the final's own ratio, its CI spanning 1.
    row = next(r for r in advice.rows if r.result.spec.label == BF16)
    assert row.speedup.ci_low <= 1 < row.speedup.value
    assert f"{row.speedup.value:.2f}x [95% CI {row.speedup.ci_low:.2f}-" in line
    budget = int(line.rsplit("to about ", 1)[1].split(" s")[0])
    assert budget > 40  # a budget above this one
    assert line in advice.budget["cuts"] and advice.budget["limited"]
    assert spent <= 40 * 1.1


def test_an_answer_still_open_after_the_finals_most_rounds_is_not_a_budget_cut():
    advice, spent = replay_advise(load_profile("h200"), "mnist-cnn", budget_s=120)
    assert advice.recommended is None
    (line,) = _undecided(advice)
    assert not line.startswith("budget was the limit")
    assert f"more than the final's {FINAL_MAX_ROUNDS} rounds" in line
    assert "the baseline is kept" in line
    assert max(len(r.result.round_step_times) for r in advice.rows) >= FINAL_MAX_ROUNDS
    assert not any("undecided" in c for c in advice.budget["cuts"])
    assert spent <= 120 * 1.1


def test_a_decided_answer_has_no_undecided_line():
    advice, _ = replay_advise(load_profile("h200"), "seed-rnn", budget_s=40)
    assert advice.recommended.label == "jax/cpu"
    assert _undecided(advice) == []


def test_replication_off_measures_one_process_each_and_costs_less_time():
    profile = load_profile("h200")
    on, spent_on = replay_advise(profile, "seed-rnn", budget_s=120)
    off, spent_off = replay_advise(profile, "seed-rnn", budget_s=120, replicate=False)
    assert {r.result.spec.label: r.result.processes for r in on.rows} == {
        "jax/gpu:0": 2, "jax/cpu": 2}
    assert all(r.result.processes == 1 for r in off.rows)
    assert off.replication.processes and set(off.replication.processes.values()) == {1}
    assert any(n.startswith("replication off") for n in off.replication.notes)
    # Same verdict, without the second processes' imports, set-ups and rounds.
    assert off.recommended == on.recommended
    assert spent_off < spent_on


class StopsEarly(FakeGroup):
    """A group whose rounds end after ``stop`` rounds with time left (as the engine
    stops once every step time's CI is within its target), the candidate's rounds
    scattered ±6% around a 4% speed-up."""

    NOISE = [0.94, 1.0, 1.06, 0.97, 1.03, 0.95, 1.05, 1.0]

    def __init__(self, stop: int) -> None:
        super().__init__({BASE: 0.007, JAX: 0.007 / 1.04})
        self.stop = stop

    def measure(self, options, enough=None):
        ran = 0
        while self.rounds_done < max(options.min_rounds, self.stop):
            for s in self.live:
                r = self.results[s]
                step = self.steps[s] * (self.NOISE[self.rounds_done % 8] if s == JAX else 1)
                self.results[s] = replace(r, block_seconds=(*r.block_seconds, 10 * step),
                                          block_rounds=(*r.block_rounds, self.rounds_done))
                self.now += 10 * step
            self.rounds_done += 1
            ran += 1
        return ran


def test_an_open_answer_with_time_left_says_the_difference_is_noise_not_the_budget():
    group = StopsEarly(stop=8)
    budget = SearchBudget(600.0, clock=group.clock)
    group.add([BASE, JAX])
    rep = final_comparison(group, budget, [BASE, JAX], decided(BASE, [JAX]),
                           replicate=False)
    (line,) = [n for n in rep.notes if "undecided:" in n]
    assert line.startswith("undecided: jax/cpu may be ")
    assert "within this run's noise, so the baseline is kept" in line
    assert "raise --budget" not in line
    assert not any("undecided" in c for c in budget.cuts)
