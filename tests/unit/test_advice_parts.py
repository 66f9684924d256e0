"""advise in two parts: the search returns data (SearchOutcome), the wording turns it
into the verdict, the reasons and the code; the AdviceResult is built once, frozen."""

from __future__ import annotations

import dataclasses

import pytest

from devicebench.advisor.advice import advise_workload
from devicebench.advisor.facts import WorkloadFacts, workload_facts
from devicebench.advisor.wording import word_advice
from devicebench.advisor.workload_search import search_workload
from tests.unit.test_advise import BASE, FakeGroup, _snap


def _clock():
    return iter(range(0, 10_000, 5)).__next__


def test_the_search_gives_data_and_the_wording_words_it_the_same_way_twice() -> None:
    facts = WorkloadFacts(tags=("recurrent",))
    found = search_workload(_snap(), baseline=BASE, budget_s=120, equivalence_steps=50,
                            facts=facts, epochs=10, start_group=FakeGroup().start,
                            clock=_clock())
    assert found.baseline_row is not None and found.finalists
    once = word_advice(found, _snap(), facts=facts, figures=None, device_figures={},
                       cpu_rate=None)
    again = word_advice(found, _snap(), facts=facts, figures=None, device_figures={},
                        cpu_rate=None)
    assert once == again  # no measuring in the wording: same data, same words
    assert once.recommended == BASE.with_(backend="jax")
    assert once.verdict.startswith("use jax/cpu: ")
    assert any("no `devicebench ops` figures" in n for n in once.notes)


def test_the_advice_is_frozen_and_whole_at_the_end() -> None:
    advice = advise_workload("seed-rnn", _snap(), baseline=BASE, budget_s=120,
                             equivalence_steps=50, facts=workload_facts("seed-rnn"),
                             start_group=FakeGroup().start, clock=_clock(), cpu_rate=None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        advice.verdict = "changed"  # type: ignore[misc]
    assert advice.headline is not None and advice.reasons and advice.code
    assert advice.to_dict()["recommended"]["backend"] == "jax"


def test_a_builtin_workloads_facts_are_one_value() -> None:
    facts = workload_facts("seed-rnn")
    assert facts.batch_size and facts.flops_per_step and "recurrent" in facts.tags
    assert workload_facts("no/such/file.py:f") == WorkloadFacts()


def test_the_main_jobs_outcome_serialises_itself_in_the_envelope() -> None:
    """The main job's outcome, from a saved snapshot's doctor and a replayed advice."""
    from pathlib import Path

    from devicebench.jobs.doctor import doctor
    from devicebench.jobs.main import MainOutcome
    from devicebench.jobs.profile import replay
    from devicebench.schema import VERSIONS

    snap = Path(__file__).resolve().parent.parent / "fixtures" / "snapshots"
    found = doctor(snapshot=next(iter(sorted(snap.glob("*.json")))))
    advice = replay("h200", "seed-rnn").advice
    doc = MainOutcome(found, None, (advice,)).to_dict()
    assert (doc["schema"], doc["version"]) == ("devicebench.main", VERSIONS["main"])
    assert doc["doctor"]["schema"] == "devicebench.doctor"
    assert doc["advice"][0]["verdict"] == advice.verdict
