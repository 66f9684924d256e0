"""Stability findings (pyperf-style checks) on trial results and the machine's load,
read from a real /proc-shaped directory in tmp_path."""

from __future__ import annotations

from pathlib import Path

from devicebench.measure.load import LoadReading, read_load, steal_fraction
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec
from devicebench.trials.stability import (
    brief_lines,
    finding_line,
    load_findings,
    stability_findings,
)


def _result(blocks, replicas=(), rounds=None):
    return TrialResult(TrialSpec("seed-rnn"), steps_per_block=1, block_seconds=blocks,
                       block_rounds=rounds if rounds is not None else range(len(blocks)),
                       block_replicas=replicas)


def _ids(findings):
    return [f.id for f in findings]


def test_a_steady_trial_in_enough_rounds_has_nothing_to_say():
    assert stability_findings([_result([1.0, 1.01, 0.99, 1.0, 1.02, 0.98])]) == []


def test_two_processes_at_two_speeds_disagree_and_the_finding_names_the_spread():
    fast, slow = [0.0036, 0.00361, 0.00359] * 2, [0.0050, 0.00502, 0.00498] * 2
    blocks = [x for pair in zip(fast, slow, strict=True) for x in pair]
    r = _result(blocks, replicas=[0, 1] * 6, rounds=[i // 2 for i in range(12)])
    found = stability_findings([r])
    assert _ids(found) == ["stability.processes-disagree", "stability.wide-spread"]
    assert "2 processes measured medians 33% apart" in found[0].observed
    assert "±" in found[0].fix and "close other programs" in found[0].fix
    assert finding_line(found[0]).startswith("stability: seed-rnn tensorflow/cpu")


def test_the_main_jobs_brief_lines_hold_one_line_per_kind_naming_its_trials():
    wide = [0.9, 1.3, 1.0, 1.4, 0.8, 1.2]
    on_jax = TrialResult(TrialSpec("seed-rnn", backend="jax"), steps_per_block=1,
                         block_seconds=wide, block_rounds=range(6))
    busy = LoadReading(load1=3.0, ticks_total=100, ticks_steal=0, cores=2)
    found = stability_findings([_result(wide), on_jax, _result([1.0, 1.0, 1.0])], busy, busy)
    lines = brief_lines(found)
    assert _ids(found).count("stability.wide-spread") == 2
    assert len(lines) == len(set(_ids(found))) == 3
    assert lines[0].startswith("stability: its step times spread widely (seed-rnn "
                               "tensorflow/cpu, seed-rnn jax/cpu) — ")
    assert lines[1].startswith("stability: too few rounds (seed-rnn tensorflow/cpu) — measure")
    assert lines[2].startswith("stability: other processes loaded the machine — ")


def test_too_few_rounds_says_how_many_to_measure():
    (f,) = stability_findings([_result([1.0, 1.0, 1.0])])
    assert f.id == "stability.too-few-rounds" and "3 timed round(s)" in f.observed
    assert "--rounds 10" in f.fix


def test_load_from_other_processes_and_cpu_steal(tmp_path: Path):
    (tmp_path / "loadavg").write_text("3.10 2.00 1.50 3/400 12345\n")
    (tmp_path / "stat").write_text("cpu  100 0 50 800 10 0 0 40 0 0\ncpu0 1 2 3\n")
    before = read_load(tmp_path)
    assert before is not None and before.load1 == 3.1
    assert (before.ticks_total, before.ticks_steal) == (1000, 40)
    after = LoadReading(1.2, 2000, 240, before.cores)
    assert steal_fraction(before, after) == 0.2
    quiet = LoadReading(0.1, 1000, 40, 2)
    found = load_findings(LoadReading(3.1, 1000, 40, 2), LoadReading(1.2, 2000, 240, 2))
    assert _ids(found) == ["stability.machine-busy", "stability.cpu-steal"]
    assert "load average 3.10 before" in found[0].observed
    assert "20%" in found[1].observed
    assert load_findings(quiet, LoadReading(1.0, 2000, 41, 2)) == []  # ours: one core
    assert load_findings(None, after) == [] and read_load(tmp_path / "absent") is None


def test_report_recomputes_the_findings_from_a_stored_run(tmp_path: Path):
    from devicebench.env.snapshot import EnvSnapshot, HostInfo
    from devicebench.results.run_report import build_report
    from devicebench.store import ResultStore, recorded_run

    wide = _result([1.0, 1.5, 0.7, 1.2, 0.9, 1.4])
    with recorded_run(tmp_path / "r.db", EnvSnapshot(host=HostInfo()), "run", {}) as rec:
        rec.store.add_trial(rec.run_id, wide)
        rec.summary = {"load": {"before": LoadReading(3.0, 100, 0, 2).to_dict(),
                                "after": LoadReading(1.0, 200, 1, 2).to_dict()}}
    with ResultStore.open(tmp_path / "r.db") as store:
        rep = build_report(store, None)
    assert _ids(rep.stability) == ["stability.wide-spread", "stability.machine-busy"]
    assert sum(n.startswith("stability: ") for n in rep.notes) == 2
    assert [f["id"] for f in rep.to_dict()["stability"]] == _ids(rep.stability)
