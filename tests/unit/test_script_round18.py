"""Round 18's rules (issue 24): corpus_round17's dev forms (script_check/round18_rules.py,
round18b_rules.py); each form fires and stays silent on the fixed or a near form."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_JIT = """\
    import jax

    def convert(points):
        f = jax.jit(jax.vmap(g))
        return f(points)

    for _ in range(n):
        out = convert(x)
"""


def test_jit_built_and_called_per_iteration() -> None:
    assert ids_at(_JIT, "script.jit-in-loop") == [4]
    once = _JIT.replace("    for _ in range(n):\n        out = convert(x)\n",
                        "    out = convert(x)\n")
    assert ids_at(once, "script.jit-in-loop") == []
    stored = "import jax\nf = jax.jit(g)\nfor _ in range(n):\n    out = f(x)\n"
    assert ids_at(stored, "script.jit-in-loop") == []


_SCAN = """\
    import jax

    class Proposal:
        def sample(self, key, xs):
            return jax.lax.scan(self.body, key, xs)

    for step in range(n):
        out = proposal.sample(key, xs)
"""


def test_lax_scan_outside_jit_per_iteration() -> None:
    assert ids_at(_SCAN, "script.jit-in-loop") == [5]
    jitted = _SCAN.replace("        def sample", "        @jax.jit\n        def sample")
    assert 6 not in ids_at(jitted, "script.jit-in-loop")


_STATIC = """\
    import functools as ft
    import jax
    import optax

    @ft.partial(jax.jit, static_argnums=0)
    def step(optim, params, batch):
        return optim.update(params, batch)

    for lr in rates:
        optim = optax.adam(lr)
        for batch in batches:
            params = step(optim, params, batch)
"""


def test_static_argument_built_per_iteration() -> None:
    assert 12 in ids_at(_STATIC, "script.recompile-shapes")
    once = _STATIC.replace("        optim = optax.adam(lr)\n", "").replace(
        "    for lr in rates:\n", "    optim = optax.adam(1e-3)\n    for lr in rates:\n")
    assert ids_at(once, "script.recompile-shapes") == []


_COPY = "import torch\nm = rewards.cpu().mean()\n"


def test_reduction_after_host_copy() -> None:
    assert ids_at(_COPY, "script.per-step-copy") == [2]
    assert ids_at(_COPY.replace(".cpu().mean()", ".mean().cpu()"), "script.per-step-copy") == []


_MICRO = """\
    import torch

    for mb in data.split(4):
        loss = model(mb).mean()
        loss.backward()
        vals.append(loss.detach().item())
    opt.step()
"""


def test_item_in_a_backward_loop() -> None:
    assert 6 in ids_at(_MICRO, "script.sync-in-step-loop")
    deferred = _MICRO.replace(".item()", "")
    assert 6 not in ids_at(deferred, "script.sync-in-step-loop")


_METRIC = """\
    import torch
    from torchmetrics import MeanMetric

    class Trainer:
        def __init__(self):
            self.loss_metric = MeanMetric().to("cuda")

        def train_step(self, batch):
            loss = self.model(batch)
            loss.backward()
            self.optim.step()
            self.loss_metric.update(loss.detach())
            return self.loss_metric.compute()

        def fit(self):
            for batch in self.loader:
                self.train_step(batch)
"""


def test_metric_compute_every_step() -> None:
    assert 13 in ids_at(_METRIC, "script.sync-in-step-loop")
    logged = _METRIC.replace("            return self.loss_metric.compute()\n",
                             "            if self.step % 100 == 0:\n"
                             "                return self.loss_metric.compute()\n")
    assert ids_at(logged, "script.sync-in-step-loop") == []


_NOGRAD = """\
    import torch

    class M(torch.nn.Module):
        @torch.no_grad()
        def query(self, h):
            return self.text.step(h)

    for x in requests:
        print(model.query(x))
"""


def test_no_grad_in_a_decoding_file() -> None:
    assert ids_at(_NOGRAD, "script.no-grad-not-inference-mode") == [4]
    trains = _NOGRAD + "    loss.backward()\n"
    assert ids_at(trains, "script.no-grad-not-inference-mode") == []


_SCALER = """\
    import torch

    class Acc:
        def __init__(self, mixed_precision):
            self.native_amp = mixed_precision in ("fp16", "bf16")
            if self.native_amp:
                self.scaler = torch.cuda.amp.GradScaler()
"""


def test_gradscaler_under_a_bf16_condition() -> None:
    assert 7 in ids_at(_SCALER, "script.gradscaler-bf16")
    fp16 = _SCALER.replace('("fp16", "bf16")', '("fp16",)')
    assert 7 not in ids_at(fp16, "script.gradscaler-bf16")


_XLA = """\
    import tensorflow as tf

    def input_fn(files, batch_size):
        dataset = tf.data.TFRecordDataset(files)
        return dataset.batch(batch_size)

    tf.config.optimizer.set_jit(True)
"""


def test_batch_without_drop_remainder_under_global_xla() -> None:
    assert 5 in ids_at(_XLA, "script.ragged-last-batch")
    dropped = _XLA.replace("batch(batch_size)", "batch(batch_size, drop_remainder=True)")
    assert ids_at(dropped, "script.ragged-last-batch") == []
    no_xla = _XLA.replace("    tf.config.optimizer.set_jit(True)\n", "")
    assert ids_at(no_xla, "script.ragged-last-batch") == []


_NOSYNC = """\
    import torch

    class Brain:
        def fit_batch(self, batch):
            loss = self.compute(batch)
            with self.no_sync(not self.should_step):
                loss.backward()
"""


def test_no_sync_around_the_backward_only() -> None:
    assert 6 in ids_at(_NOSYNC, "script.ddp-no-sync")
    whole = _NOSYNC.replace("            loss = self.compute(batch)\n", "").replace(
        "                loss.backward()\n",
        "                loss = self.compute(batch)\n                loss.backward()\n")
    assert ids_at(whole, "script.ddp-no-sync") == []


_BREAK = """\
    import torch

    def no_sync(modules):
        for m in modules:
            if not hasattr(m, "require_backward_grad_sync"):
                break
            m.require_backward_grad_sync = False
"""


def test_break_in_a_sync_switch_loop() -> None:
    assert 6 in ids_at(_BREAK, "script.ddp-no-sync")
    skip = _BREAK.replace("break", "continue")
    assert ids_at(skip, "script.ddp-no-sync") == []


_ACCUM = """\
    import torch

    for minibatch in loader:
        for micro in minibatch:
            loss = model(micro)
            accelerator.backward(loss)
        opt.step()
"""


def test_micro_batch_backward_without_no_sync() -> None:
    assert 6 in ids_at(_ACCUM, "script.ddp-no-sync")
    guarded = _ACCUM + "    ctx = accelerator.no_sync(model)\n"
    assert 6 not in ids_at(guarded, "script.ddp-no-sync")


_TFKEY = """\
    import tensorflow as tf

    class Executor:
        @tf.function
        def _policy(self, agent, obs):
            return self.nets[agent](obs)

        def select_action(self, agent, obs):
            return self._policy(agent, obs)

        def select_actions(self, observations):
            return {a: self.select_action(a, o) for a, o in observations.items()} | {
                a: self.select_action(a, o) for a, o in []}

    for agent, obs in observations.items():
        executor.select_action(agent, obs)
"""


def test_tf_function_given_dict_keys() -> None:
    assert 9 in ids_at(_TFKEY, "script.recompile-shapes")
    values = _TFKEY.replace("executor.select_action(agent, obs)", "executor.select_action(0, obs)")
    assert 9 not in ids_at(values, "script.recompile-shapes")


_SEQ = """\
    import librosa
    from tensorflow import keras

    def load(path):
        return librosa.load(path)

    class Gen(keras.utils.Sequence):
        def __getitem__(self, i):
            return [load(p) for p in self.paths[i]]
"""


def test_audio_decoder_reached_from_a_keras_sequence() -> None:
    assert 5 in ids_at(_SEQ, "script.tfdata-python-in-pipeline")
    plain = _SEQ.replace("(keras.utils.Sequence)", "")
    assert ids_at(plain, "script.tfdata-python-in-pipeline") == []


_ONEHOT = """\
    import jax
    import numpy as np

    def encode(batch):
        def one(s):
            return jax.nn.one_hot(tokens(s), 10)
        return np.array([one(s) for s in batch])

    for step in range(n):
        x = encode(next_batch())
"""


def test_jax_op_in_a_per_example_helper() -> None:
    assert 6 in ids_at(_ONEHOT, "script.jnp-in-data-loader")
    host = _ONEHOT.replace("jax.nn.one_hot(tokens(s), 10)", "np.eye(10)[tokens(s)]")
    assert ids_at(host, "script.jnp-in-data-loader") == []


_READ = """\
    import jax
    import numpy as np

    def write_metrics(writer, metrics, step):
        writer.add_scalar("loss", np.array(metrics["loss"]), step)

    for step in range(n):
        state, metrics = p_train_step(state, batch)
        write_metrics(writer, metrics, step)
"""


def test_step_outputs_read_in_the_same_iteration() -> None:
    assert 5 in ids_at(_READ, "script.sync-in-step-loop")
    other = _READ.replace("write_metrics(writer, metrics, step)",
                          "write_metrics(writer, prev, step)")
    assert 5 not in ids_at(other, "script.sync-in-step-loop")
