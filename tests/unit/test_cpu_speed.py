"""The CPU's own speed during a run (devicebench.measure.cpuspeed) and the stability
finding it feeds: a real sampler thread timing the real reference loop, and the
judgement on samples shaped like this VM's (two speeds, ~0.77 and ~1.3 ms)."""

from __future__ import annotations

import time

from devicebench.measure.cpuspeed import CpuSpeed, CpuSpeedSampler, reference_seconds
from devicebench.results.run_report import _stability
from devicebench.trials.stability import cpu_speed_findings, stability_findings

# 40 samples as this VM gave them on a quiet minute: fast ~0.77 ms, slow ~1.3 ms in 25%.
TWO_SPEEDS = tuple([0.00077, 0.00078, 0.00076, 0.00131] * 10)
STEADY = tuple([0.00077, 0.00078, 0.00076, 0.00079] * 10)


def test_the_reference_loop_and_the_sampler_are_real_and_stop():
    one = reference_seconds()
    assert 0 < one < 1.0
    sampler = CpuSpeedSampler(interval_s=0.02).start()
    time.sleep(0.3)
    got = sampler.stop()
    assert len(got.samples) >= 3 and all(0 < s < 1.0 for s in got.samples)
    assert not sampler._thread.is_alive()  # noqa: SLF001 - the thread ended
    assert sampler.stop() == got  # twice is harmless (a with block after an early stop)


def test_two_speeds_are_summarised_from_the_samples():
    speed = CpuSpeed(TWO_SPEEDS)
    assert speed.fastest == 0.00076 and speed.slowest == 0.00131  # 10th, 90th percentile
    assert speed.slow_share == 0.25
    assert 0.18 < speed.mean_slowdown < 0.20  # (0.76 + 0.77 + 0.78 + 1.31) / 4 / 0.76 - 1
    assert CpuSpeed.from_dict(speed.to_dict()) == speed


def test_a_cpu_at_two_speeds_is_a_finding_with_its_numbers_and_a_steady_one_is_not():
    (f,) = cpu_speed_findings(CpuSpeed(TWO_SPEEDS))
    assert f.id == "stability.cpu-speed" and f.severity == "warning"
    assert "760 µs–1.31 ms" in f.observed and "25%" in f.observed and "19%" in f.observed
    assert "±" in f.fix
    assert cpu_speed_findings(CpuSpeed(STEADY)) == []
    assert cpu_speed_findings(CpuSpeed(TWO_SPEEDS[:4])) == []  # too few to judge
    assert cpu_speed_findings(None) == []
    assert [x.id for x in stability_findings([], cpu_speed=CpuSpeed(TWO_SPEEDS))] == [
        "stability.cpu-speed"]


def test_a_stored_run_is_judged_again_from_its_samples():
    class Run:  # the two fields _stability reads of a StoredRun
        trials: list = []
        summary = {"load": {"cpu_speed": CpuSpeed(TWO_SPEEDS).to_dict()}}

    assert [f.id for f in _stability(Run())] == ["stability.cpu-speed"]
    Run.summary = {"load": {"cpu_speed": {"samples": "garbled"}}}
    assert _stability(Run()) == []
