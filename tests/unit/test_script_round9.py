"""The script check's rules written against corpus_round9's dev half (issue 24, round 10):
each fires on its form and stays silent on the form its thread recommends (or on code that
runs once)."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at


def test_ema_loop_with_augmented_updates_through_a_given_object() -> None:
    source = """\
        import torch

        class ModelEMA:
            def update(self, model):
                msd = model.state_dict()
                for k, v in self.ema.state_dict().items():
                    v *= 0.999
                    v += 0.001 * msd[k]

        def train(model, loader, optimizer, ema):
            for x, y in loader:
                loss = model(x.cuda()).sum()
                loss.backward()
                optimizer.step()
                ema.update(model)
    """
    assert ids_at(source, "script.foreach-not-used", "info") == [6]
    once = source.replace("                ema.update(model)\n", "") + "    ema.update(model)\n"
    assert ids_at(once, "script.foreach-not-used") == []


def test_lightning_hook_runs_per_step() -> None:
    source = """\
        import torch
        from pytorch_lightning import LightningModule

        @torch.no_grad()
        def update_momentum(model, model_ema, m):
            for pe, p in zip(model_ema.parameters(), model.parameters()):
                pe.data = pe.data * m + p.data * (1.0 - m)

        class DINO(LightningModule):
            def on_train_batch_end(self, outputs, batch, batch_idx):
                update_momentum(self.student, self.teacher, 0.996)
    """
    assert ids_at(source, "script.foreach-not-used", "info") == [6]
    assert ids_at(source, "script.ema-out-of-place", "info") == [7]
    setup = source.replace("on_train_batch_end", "on_fit_start")
    assert ids_at(setup, "script.foreach-not-used") == []


def test_out_of_place_copy_back_but_not_in_place_lerp() -> None:
    source = """\
        import torch

        def ema_step(ema_model, model, d):
            for e, m in zip(ema_model.state_dict().values(), model.state_dict().values()):
                e.copy_(d * e + (1 - d) * m)

        def train(model, ema_model, loader, opt):
            for x in loader:
                model(x.cuda()).sum().backward()
                opt.step()
                ema_step(ema_model, model, 0.99)
    """
    assert ids_at(source, "script.ema-out-of-place", "info") == [5]
    in_place = source.replace("e.copy_(d * e + (1 - d) * m)", "e.lerp_(m, 1 - d)")
    assert ids_at(in_place, "script.ema-out-of-place") == []
    plain_copy = source.replace("e.copy_(d * e + (1 - d) * m)", "e.copy_(m)")
    assert ids_at(plain_copy, "script.ema-out-of-place") == []


def test_gc_collect_in_an_evaluation_pass() -> None:
    source = """\
        import gc
        import torch

        @torch.no_grad()
        def predict(model, loader):
            out = []
            for batch in loader:
                out.append(model(batch.cuda()).cpu())
                gc.collect()
            return out
    """
    assert ids_at(source, "script.empty-cache-in-loop", "warning") == [9]
    after = source.replace("                gc.collect()\n", "") .replace(
        "            return out", "            gc.collect()\n            return out")
    assert ids_at(after, "script.empty-cache-in-loop") == []


def test_collate_function_given_through_a_lambda_and_rebound_name() -> None:
    source = """\
        import numpy as np
        import torch
        from torch.utils.data import DataLoader

        def collate(batch, r):
            embeds = [x[2] for x in batch]
            embeds = torch.tensor(embeds)
            return embeds

        def train(dataset):
            loader = DataLoader(dataset, collate_fn=lambda b: collate(b, 2), batch_size=32)
            for e in loader:
                pass
    """
    assert ids_at(source, "script.tensor-from-python-list", "warning") == [7]
    stacked = source.replace("torch.tensor(embeds)", "torch.tensor(np.stack(embeds))")
    assert ids_at(stacked, "script.tensor-from-python-list") == []


def test_numpy_array_of_model_outputs() -> None:
    source = """\
        import numpy as np
        import tensorflow as tf

        def collect(model, dataset):
            outputs = []
            scores = []
            for x in dataset:
                outputs.append(model(x, training=False))
                scores.append(float(x[0, 0]))
            return np.array(outputs), np.array(scores)
    """
    assert ids_at(source, "script.tensor-from-python-list", "info") == [10]
    converted = source.replace("np.array(outputs), ", "tf.concat(outputs, 0).numpy(), ")
    assert ids_at(converted, "script.tensor-from-python-list") == []


def test_comprehension_over_object_data_in_jit() -> None:
    source = """\
        import jax
        import jax.numpy as jnp

        @jax.jit
        def cost(coll, pose):
            terms = [jnp.sum(pose[i] - pose[j]) for (i, j) in coll.pairs]
            outs = [layer(pose) for layer in coll.layers]
            return jnp.stack(terms).sum() + sum(outs)
    """
    assert ids_at(source, "script.python-loop-in-jit", "info") == [6]


def test_lax_map_without_batch_size() -> None:
    source = """\
        import jax

        def run(f, xs):
            a = jax.lax.map(f, xs)
            b = jax.lax.map(f, xs, batch_size=16)
            c = jax.vmap(f)(xs)
            return a, b, c
    """
    assert ids_at(source, "script.lax-map-not-vmap", "info") == [4]


def test_decoding_the_growing_token_list() -> None:
    source = """\
        def generate(step, tokenizer, prompt, n):
            tokens = []
            for token in step(prompt, n):
                tokens.append(token)
                text = tokenizer.decode(tokens)
                piece = tokenizer.decode([token])
            return tokenizer.decode(tokens)
    """
    assert ids_at(source, "script.decode-all-tokens-per-step", "info") == [5]


def test_constant_buffer_under_ddp() -> None:
    source = """\
        import torch
        from torch import nn
        from torch.nn.parallel import DistributedDataParallel as DDP

        class Attn(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.register_buffer("mask", torch.tril(torch.ones(n, n)))

        model = DDP(Attn(8).cuda(), device_ids=[0])
    """
    assert ids_at(source, "script.ddp-broadcast-buffers", "info") == [8]
    off = source.replace("device_ids=[0])", "device_ids=[0], broadcast_buffers=False)")
    assert ids_at(off, "script.ddp-broadcast-buffers") == []
    single = source.replace("DDP(Attn(8).cuda(), device_ids=[0])", "Attn(8).cuda()")
    assert ids_at(single, "script.ddp-broadcast-buffers") == []
