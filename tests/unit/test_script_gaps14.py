"""Round 14's step 0 (issue 24): corpus_round12's held-out misses written generally
(script_check/gap14_rules.py; vector_rules.loss_method_loops; Context.runs_compiled;
dataflow.param_constant with shape_rules._static_compile_varying); each form fires and
stays silent on the form its thread recommends (or a near form that is fine).
"""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_MASK = """\
    import torch
    from torch import nn

    class Block(nn.Module):
        def make_mask(self, n):
            mask = torch.zeros((1, n, n, 1))
            return mask.masked_fill(mask != 0, -100.0)

        def forward(self, x):
            return self.attn(x, mask=self.make_mask(x.shape[1]).to(x.device))

    model = Block().cuda()
    for x, y in loader:
        loss = (model(x.cuda()) - y.cuda()).abs().mean()
        loss.backward()
        optimizer.step()
"""


def test_host_tensor_built_in_a_method_the_forward_calls_then_copied() -> None:
    # the factory, and the call site that copies the result
    assert ids_at(_MASK, "script.host-built-in-forward") == [6, 10]
    on_device = _MASK.replace("torch.zeros((1, n, n, 1))",
                              "torch.zeros((1, n, n, 1), device=self.device)")
    assert ids_at(on_device, "script.host-built-in-forward") == []
    # built in __init__ once (a buffer): silent
    once = _MASK.replace("def make_mask(self, n):", "def __init__(self, n):")
    assert ids_at(once, "script.host-built-in-forward") == []


def test_free_helper_result_copied_at_the_call_site_and_in_forward() -> None:
    source = """\
        import torch
        from torch import nn

        def causal(n, dtype):
            mask = torch.full((n, n), torch.finfo(dtype).min)
            return mask

        class Decoder(nn.Module):
            def prepare(self, shape, emb):
                return causal(shape[-1], emb.dtype).to(emb.device)

            def forward(self, ids):
                emb = self.embed(ids)
                ones = torch.triu(torch.ones(8, 8), diagonal=1)
                return self.layer(emb, self.prepare(ids.shape, emb), ones.bool().to(emb.device))
    """
    assert ids_at(source, "script.host-built-in-forward") == [5, 10, 14]
    # nothing copied to the device afterwards (a CPU-only model): silent
    cpu = source.replace(".to(emb.device)", "")
    assert ids_at(cpu, "script.host-built-in-forward") == []


def test_tokenizer_pad_in_a_trainer_collator() -> None:
    source = """\
        from dataclasses import dataclass
        from transformers import Trainer

        @dataclass
        class Collator:
            tokenizer: object

            def __call__(self, features):
                return self.tokenizer.pad(features, padding=True, return_tensors="pt")

        trainer = Trainer(model, args, train_dataset=ds, data_collator=Collator(tokenizer))
        trainer.train()
    """
    assert ids_at(source, "script.pad-in-collator") == [9]
    # a collator that stacks ids padded up front: silent
    stacked = source.replace(
        'self.tokenizer.pad(features, padding=True, return_tensors="pt")',
        '{"input_ids": torch.stack([f["input_ids"] for f in features])}')
    assert ids_at(stacked, "script.pad-in-collator") == []


def test_per_sample_loop_in_a_loss_method_the_loop_backpropagates() -> None:
    source = """\
        import torch

        class Lyapunov:
            def loss_at_samples(self, net, x_samples, margin):
                losses = []
                for i in range(x_samples.shape[0]):
                    x = x_samples[i]
                    losses.append(torch.relu(net(x) + margin))
                return torch.stack(losses).mean()

        dut = Lyapunov()
        for it in range(1000):
            loss = dut.loss_at_samples(net, x_samples, 0.1)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """
    assert ids_at(source, "script.per-sample-python-loop") == [6]
    # a loop over a fixed number of terms, not the batch: silent
    terms = source.replace("range(x_samples.shape[0])", "range(3)")
    assert ids_at(terms, "script.per-sample-python-loop") == []


def test_device_get_per_step_of_a_step_compiled_inline() -> None:
    source = """\
        import jax

        def run(state, num_steps):
            losses = []
            for i in range(num_steps):
                state, loss = jax.jit(body_fn)(state, None)
                losses.append(jax.device_get(loss))
            return state, losses
    """
    assert 7 in ids_at(source, "script.sync-in-step-loop")
    # the compiled call does not carry state (one evaluation per item): not a training step
    evals = source.replace("state, loss = jax.jit(body_fn)(state, None)",
                           "loss = jax.jit(body_fn)(items[i], None)")
    assert 7 not in ids_at(evals, "script.sync-in-step-loop")


def test_compile_dynamic_false_through_a_parameter_with_varying_shapes() -> None:
    source = """\
        import torch

        class Patcher:
            def patch(self, model, mode, dynamic):
                return torch.compile(model, mode=mode, dynamic=dynamic)

        compiled = Patcher().patch(model, "default", False)
        for width, height in [(1024, 1024), (832, 1216)]:
            latent = torch.randn(1, 16, height // 8, width // 8, device="cuda")
            image = compiled(latent)
    """
    assert 5 in ids_at(source, "script.recompile-shapes")
    default = source.replace('"default", False)', '"default", None)')
    assert 5 not in ids_at(default, "script.recompile-shapes")
    # one fixed shape: dynamic=False costs nothing
    fixed = source.replace("height // 8, width // 8", "128, 128")
    assert 5 not in ids_at(fixed, "script.recompile-shapes")
