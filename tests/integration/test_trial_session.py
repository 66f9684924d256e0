"""`TrialSession` inline: the worker's own set-up and timed blocks driven directly (no
launcher, no pipes), in a fresh interpreter so Keras' backend choice stays out of the
test process; a list stands in for the channel (the seam)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import requires_jax

ROOT = Path(__file__).resolve().parents[2]
W = str(ROOT / "tests" / "fixtures" / "workloads.py")

SCRIPT = """
import json, sys
from devicebench.trials.protocol import MeasureRequest, SetupRequest
from devicebench.trials.spec import TrialSpec
from devicebench.trials.worker import TrialSession

class ListChannel:
    def __init__(self, commands):
        self.commands, self.sent, self.pending = list(commands), [], None
    def recv(self):
        if self.pending is not None:
            msg, self.pending = self.pending, None
            return msg
        return self.commands.pop(0) if self.commands else None
    def send(self, reply):
        self.sent.append(reply)

session = TrialSession(TrialSpec(sys.argv[1], backend="jax"))
setup = session.setup(SetupRequest(session.spec, equivalence_steps=12))
# Three timed blocks, then another command ends the fit (as the parent's finish does).
channel = ListChannel([MeasureRequest(True).to_message()] * 2 + [{"cmd": "finish"}])
session.run_blocks(channel, whole_epochs=True)
print(json.dumps({"setup": setup.to_message(), "blocks": channel.sent,
                  "pending": channel.pending, "finish": session.finish().to_message()}))
"""


@requires_jax
def test_a_trial_session_sets_up_and_times_blocks_inline(tmp_path):
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, f"{W}:tiny"], capture_output=True,
                          text=True, timeout=300, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    setup = out["setup"]
    assert len(setup["equivalence_losses"]) == 12 and setup["first_step_seconds"] > 0
    assert setup["steps_per_epoch"] > 0 and setup["epoch_estimate_seconds"] > 0
    # JAX: the kernels of XLA's compiled train step are counted.
    assert setup["placement"]["kernels_per_step"] > 0
    blocks = out["blocks"]
    assert len(blocks) == 3 and all(len(b["block_seconds"]) == 1 for b in blocks)
    assert all(b["block_seconds"][0] > 0 and b["ok"] for b in blocks)
    assert blocks[0]["warmup_blocks"] >= 1  # the warm-up is reported with the first block
    assert out["pending"] == {"cmd": "finish"}  # the command that ended the fit, kept
    assert out["finish"]["peak_rss_bytes"] > 0 and out["finish"]["final_loss"] is not None


DROPOUT = """
import json, sys
from devicebench.advisor.equivalence import RTOL_FLOAT32, compare_losses
from devicebench.trials.protocol import SetupRequest
from devicebench.trials.spec import TrialSpec
from devicebench.trials.worker import TrialSession

losses, audits, rates = [], [], []
for jit in ("on", "off"):
    session = TrialSession(TrialSpec(sys.argv[1], backend="tensorflow", jit=jit))
    setup = session.setup(SetupRequest(session.spec, equivalence_steps=8))
    losses.append(setup.equivalence_losses)
    audits.append(setup.placement.get("cpu_op_types", {}))
    model = session.model
    rates.append([model.layers[1].rate, model.layers[2].stddev,
                  model.layers[6].cell.dropout, model.layers[6].cell.recurrent_dropout])
    assert "call" not in vars(model.layers[4])  # RandomFlip's own call again
    # the timed steps train the model as written: dropout draws again
    assert model.train_function is not None  # traced again after the layers came back
print(json.dumps({"verdict": compare_losses(losses[0], losses[1], RTOL_FLOAT32),
                  "audits": audits, "rates": rates}))
"""


def test_dropout_is_off_for_the_loss_comparison_and_back_on_for_timing():
    """XLA draws other dropout masks than TensorFlow's kernels: with the layers' randomness
    on, jit=on and jit=off of one model part after one step and "loss differs" would
    reject every candidate of a script with ``Dropout`` (TensorFlow's beginner quickstart)
    or a random augmentation layer. Without suspend_random_layers this verdict reads
    'differs'."""
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, "-c", DROPOUT, f"{W}:dropout"],
                          capture_output=True, text=True, timeout=300, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["verdict"][0] == "same", out["verdict"]
    assert out["rates"] == [[0.5, 0.3, 0.3, 0.2]] * 2  # restored for the timed steps
    # the placement audit ran on the model as it trains (after the layers came back): the
    # graph TensorFlow runs without XLA holds its random ops (an XLA cluster lists none)
    ops = out["audits"][1]
    assert "StatelessRandomUniformV2" in ops, ops
