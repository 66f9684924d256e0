"""Replica processes for real: a trial measured in two fresh JAX worker processes,
interleaved with another trial, every block tagged with the process that timed it, the
CI across processes and the paired ratio resampling both (tiny workload, CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from devicebench.measure.stats import paired_ratio, process_medians
from devicebench.trials.engine import RunOptions, TrialGroup
from devicebench.trials.spec import TrialSpec
from tests.conftest import requires_jax

W = str(Path(__file__).resolve().parents[1] / "fixtures" / "workloads.py")


@pytest.mark.slow  # test_run's runs measure every trial in its processes; unit tests the CI
@requires_jax
def test_two_real_processes_per_trial_tag_their_blocks():
    a = TrialSpec(f"{W}:tiny", backend="jax")
    b = a.with_(jit="off")
    events: list[tuple[str, str]] = []
    with TrialGroup(a, RunOptions(equivalence_steps=12, max_warmup_seconds=2),
                    on_event=lambda kind, spec, info: events.append((kind, str(info)))
                    ) as group:
        group.add([a, b])
        assert group.replicate({a: 2}) == {a: 2}
        group.measure(RunOptions(min_rounds=3, max_rounds=3, target_ci=0))
        group.finish()
    ra, rb = group.results[a], group.results[b]
    assert ra.status == rb.status == "ok", (ra.error, rb.error)
    assert ra.processes == 2 and rb.processes == 1
    assert sorted(ra.block_replicas) == [0, 0, 0, 1, 1, 1]
    assert ra.block_rounds == (0, 0, 1, 1, 2, 2)
    # The CI is across processes: it spans both processes' medians, whatever they are.
    meds = process_medians(ra.samples_by_process)
    assert ra.step_time.ci_low <= min(meds.values()) <= max(meds.values()) <= ra.step_time.ci_high
    q = paired_ratio(ra.round_step_times, rb.round_step_times)
    assert q is not None and q.processes == (2, 1)
    assert ("replica", "{'replica': 1}") in events
