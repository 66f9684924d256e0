"""The epoch as Keras' log shows it (training + validation) and the whole-fit figure,
measured by real workers on TF, JAX and torch (tiny user workload, few rounds); nothing
here asserts a wall-clock time."""

from __future__ import annotations

from pathlib import Path

import pytest

from devicebench.trials.engine import RunOptions, run_workload_group
from devicebench.trials.spec import TrialSpec
from devicebench.trials.summary import compare
from tests.conftest import requires_jax, requires_tf, save_keras_model

ROOT = Path(__file__).resolve().parents[2]
W = str(ROOT / "tests" / "fixtures" / "workloads.py")
FAST = RunOptions(min_rounds=3, max_rounds=3, budget_seconds=5, equivalence_steps=5,
                  max_warmup_seconds=1)


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


@pytest.mark.slow  # the validation figures are also checked by test_run and the saved-model test
@requires_tf
@requires_jax
def test_a_validating_user_workload_times_its_validation_pass():
    specs = [TrialSpec(f"{W}:validated", backend=b) for b in ("tensorflow", "jax", "torch")
             if b != "torch" or _has("torch")]
    rows = compare(run_workload_group(specs, FAST))
    for row in rows:
        r = row.result
        assert r.status == "ok", r.error
        assert r.validation_samples == 100 and r.workload_epochs == 3
        # one synced validation pass in each of the first measured rounds (all three
        # here), the first (compilation) apart
        assert len(r.validation_seconds) == 3 and r.validation_rounds == r.block_rounds
        assert r.validation_first_seconds > 0
        f = row.fit
        assert f is not None and f.validation_s == pytest.approx(r.validation_pass_seconds)
        assert f.epoch_s == pytest.approx(f.train_s + f.validation_s)
        assert r.epoch_seconds == pytest.approx(f.epoch_s)
        assert f.epochs == 3 and f.one_time_s >= 0
        assert f.fit_s == pytest.approx(f.one_time_s + 3 * f.mean_epoch[0])
        lo, hi = f.fit_ci
        assert lo <= f.fit_s <= hi
        d = row.to_dict()
        assert d["fit"]["fit_s"] == pytest.approx(f.fit_s)
        assert d["train_epoch_s"] == pytest.approx(r.step_time.median * r.steps_per_epoch)


@pytest.mark.slow  # test_run checks the epoch of a validating built-in
@requires_tf
def test_a_workload_without_validation_keeps_its_epoch_a_training_pass():
    (row,) = compare(run_workload_group([TrialSpec(f"{W}:tiny")], FAST))
    r = row.result
    assert r.status == "ok", r.error
    assert r.validation_seconds == () and r.validation_first_seconds is None
    assert row.fit.validation_s is None and row.fit.fit_s is None  # epochs not stated
    assert r.epoch_seconds == pytest.approx(r.step_time.median * r.steps_per_epoch)
    # a whole fit of the epochs the caller plans (advise --epochs)
    (row,) = compare([r], epochs=4)
    assert row.fit.fit_s == pytest.approx(row.fit.one_time_s + 4 * row.fit.mean_epoch[0])


@pytest.mark.slow  # 9 s; the validation-round bookkeeping is also held by tests/unit/test_trials.py
@requires_tf
def test_validation_is_timed_in_a_trials_first_rounds_only():
    from devicebench.trials.worker import VALIDATION_TIMINGS

    rounds = VALIDATION_TIMINGS + 2
    opts = RunOptions(min_rounds=rounds, max_rounds=rounds, budget_seconds=30,
                      equivalence_steps=5, max_warmup_seconds=1)
    (row,) = compare(run_workload_group([TrialSpec(f"{W}:validated")], opts))
    r = row.result
    assert r.status == "ok", r.error
    assert len(r.block_rounds) == rounds
    assert list(r.validation_rounds) == list(r.block_rounds[:VALIDATION_TIMINGS])
    # every round's epoch still holds a validation pass: the median one where none ran
    assert row.fit.epoch.n == rounds


@requires_jax
def test_a_saved_model_workload_declares_validation_and_epochs_in_its_data(tmp_path):
    import numpy as np

    model_path, data_path = tmp_path / "small.keras", tmp_path / "data.npz"
    save_keras_model(model_path, "keras.Input((8,)), keras.layers.Dense(3, activation='softmax')",
                     "sparse_categorical_crossentropy", "'adam'")
    rng = np.random.default_rng(0)
    np.savez(data_path, x=rng.standard_normal((256, 8)).astype("float32"),
             y=rng.integers(0, 3, 256), x_val=rng.standard_normal((64, 8)).astype("float32"),
             y_val=rng.integers(0, 3, 64), epochs=7)
    spec = TrialSpec(f"{model_path}::{data_path}", backend="jax")
    (row,) = compare(run_workload_group([spec], FAST))
    r = row.result
    assert r.status == "ok", r.error
    assert r.validation_samples == 64 and r.workload_epochs == 7
    assert len(r.validation_seconds) == 3 and row.fit.fit_s is not None
