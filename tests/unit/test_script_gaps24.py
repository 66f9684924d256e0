"""Round 24's step 0 (issue 24): corpus_round22's held-out misses written generally
(script_check/gap24_rules.py); each form fires and stays silent on the fixed or a near form."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_SYNC = "script.sync-in-step-loop"

_HOOK = """\
    import torch
    from lightning.pytorch.callbacks import Callback

    class Counter(Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, i):
            t = torch.tensor(n, device=pl_module.device)
            torch.distributed.all_reduce(t)
            pl_module.log("seen", t.item(), on_step=True, sync_dist=True)
"""


def test_collectives_in_a_callback_batch_hook() -> None:
    got = ids_at(_HOOK, _SYNC)
    assert 7 in got and 8 in got
    epoch = _HOOK.replace("on_train_batch_end", "on_train_epoch_end")
    assert ids_at(epoch, _SYNC) == []


_METRICS = """\
    import torch
    from trl import DPOTrainer

    class T(DPOTrainer):
        def get_batch_loss_metrics(self, model, batch):
            logits = model(batch)
            return {"logits": logits.detach().cpu().mean()}
"""


def test_cpu_before_reduction_in_trainer_metrics() -> None:
    assert 7 in ids_at(_METRICS, _SYNC)
    fixed = _METRICS.replace("logits.detach().cpu().mean()", "logits.detach().mean().cpu()")
    assert 7 not in ids_at(fixed, _SYNC)


_GATHER = """\
    import torch
    from detectron2.utils import comm

    class Trainer:
        def run_step(self):
            loss = self.model(next(self.it))
            self.write(loss)

        def write(self, loss):
            all_metrics = comm.gather({"loss": loss})
"""


def test_gather_in_a_step_callee() -> None:
    assert 10 in ids_at(_GATHER, _SYNC)
    assert 10 not in ids_at(_GATHER.replace("self.write(loss)", "pass"), _SYNC)


_ROUND_TRIP = """\
    import torch

    class M(torch.nn.Module):
        def forward(self, x):
            y = self.net(x)
            out = []
            for i in range(y.shape[0]):
                s = y[i].cpu().numpy()
                s = convert(s)
                t = torch.tensor(s, device=y.device)
                out.append(t)
            return out
"""


def test_host_round_trip_per_row() -> None:
    assert 8 in ids_at(_ROUND_TRIP, _SYNC)
    assert 7 in ids_at(_ROUND_TRIP, "script.per-sample-python-loop")
    kept = _ROUND_TRIP.replace("t = torch.tensor(s, device=y.device)", "t = s")
    assert 8 not in ids_at(kept, _SYNC)
    assert 10 in ids_at(_ROUND_TRIP, "script.per-step-copy")


_APPEND = """\
    import jax
    import jax.numpy as jnp

    def train(state, n):
        losses = jnp.array([])
        for e in range(n):
            state, v = step(state)
            losses = jnp.append(losses, v)
        return losses
"""


def test_jnp_append_in_a_loop() -> None:
    assert 8 in ids_at(_APPEND, "script.growing-tensor")
    fixed = _APPEND.replace("losses = jnp.append(losses, v)", "others = jnp.append(losses, v)")
    assert 8 not in ids_at(fixed, "script.growing-tensor")


_UPDATES = """\
    import equinox as eqx
    import optax

    def main(model, data):
        optim = optax.sgd(0.1)
        st = optim.init(model)
        for x in data:
            g = grad_step(model, x)
            updates, st = optim.update(g, st)
            model = eqx.apply_updates(model, updates)
"""


def test_apply_updates_outside_jit() -> None:
    assert 10 in ids_at(_UPDATES, "script.jax-update-outside-jit")
    once = _UPDATES.replace("for x in data:", "if data:")
    assert 10 not in ids_at(once, "script.jax-update-outside-jit")


_MAX = """\
    import torch

    def loss_fn(logits, targets):
        loss = torch.nn.functional.cross_entropy(logits, targets, reduction="sum")
        n = (targets != -100).sum()
        return loss / max(1, n)
"""


def test_builtin_max_of_a_tensor_sum() -> None:
    assert 6 in ids_at(_MAX, _SYNC)
    assert 6 not in ids_at(_MAX.replace("max(1, n)", "n.clamp(min=1)"), _SYNC)


_PSNR = """\
    import torch

    class Module:
        def validation_step(self, batch, i):
            out = self(batch)
            return self.psnr(out, batch)

        def psnr(self, out, target):
            return [f(target[:, i].cpu().numpy(), out[:, i].cpu().numpy()) for i in range(3)]
"""


def test_cpu_numpy_comprehension_in_a_step_callee() -> None:
    assert 9 in ids_at(_PSNR, _SYNC)
    assert 9 not in ids_at(_PSNR.replace("return self.psnr(out, batch)", "return out"), _SYNC)
