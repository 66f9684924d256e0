"""Pure parts of capturing a user's script, from defects found on tutorial scripts
(tests/fixtures/scripts/users/README.md)."""

from __future__ import annotations

import numpy as np

from devicebench.workloads.capture_worker import plain_weights


def test_loss_weights_are_kept_as_json_numbers_or_dropped_whole() -> None:
    assert plain_weights({"priority": 1, "department": np.float32(0.2)}) == {
        "priority": 1.0, "department": float(np.float32(0.2))}
    assert plain_weights([1.0, 0.5]) == [1.0, 0.5]
    assert plain_weights(None) is None
    # Anything not made of numbers is dropped whole (Keras' default, all 1), never half-kept.
    assert plain_weights({"a": 1.0, "b": "heavy"}) is None
