"""`advise train.py` names the user's script, not the capture's cached workload file, in
everything it prints: the verdict, notes, rows and the stability findings (a run of
keras-io's timeseries example showed `/root/.cache/devicebench/scripts/<hash>/workload.py:
workload tensorflow/cpu` in its "too few rounds" line)."""

from __future__ import annotations

from devicebench.advisor.advice import AdviceResult
from devicebench.env.finding import Finding
from devicebench.jobs.advise_script import _named
from devicebench.trials.spec import TrialSpec

REF = "/root/.cache/devicebench/scripts/f404137f/workload.py:workload"


def test_stability_findings_name_the_script():
    few = Finding("stability.few-rounds", "warning", f"too few rounds ({REF} tensorflow/cpu)",
                  f"{REF} tensorflow/cpu: 3 rounds", "", "measure more")
    advice = AdviceResult(REF, TrialSpec(REF), 60.0, stability=[few],
                          notes=[f"stability: {REF} tensorflow/cpu"],
                          verdict=f"keep {REF} tensorflow/cpu")
    named = _named(advice, REF, "train.py")
    f, = named.stability
    assert f.title == "too few rounds (train.py tensorflow/cpu)"
    assert f.observed == "train.py tensorflow/cpu: 3 rounds" and f.fix == "measure more"
    assert named.notes == ["stability: train.py tensorflow/cpu"]
    assert named.baseline.workload == "train.py" and REF not in named.verdict
