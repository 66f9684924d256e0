"""The forms round 11's step 0 taught the script check (issue 24; ``script_check/form_rules.py``
and the widened helpers): each fires on the form users write and stays silent on the form
that runs once, or that the fix recommends."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at


def test_gc_collect_per_item_of_an_iterable_dataset() -> None:
    source = """\
        import gc
        from torch.utils.data import DataLoader, IterableDataset

        class Gc(IterableDataset):
            def __init__(self, data):
                self.data = data

            def __iter__(self):
                for sample in self.data:
                    yield sample
                    gc.collect()

        loader = DataLoader(Gc(data), batch_size=None)
    """
    assert ids_at(source, "script.empty-cache-in-loop", "warning") == [11]
    # every 10 000 items, fixed in the file: housekeeping, not per item
    rare = source.replace("gc.collect()", "n += 1\n                    if n % 10_000 == 0:\n"
                                          "                        gc.collect()")
    assert ids_at(rare, "script.empty-cache-in-loop") == []
    # the same class that is no Dataset: nothing drives it per item
    plain = source.replace("class Gc(IterableDataset):", "class Gc:")
    assert ids_at(plain, "script.empty-cache-in-loop") == []


def test_gc_collect_in_getitem_every_configured_n() -> None:
    source = """\
        import gc
        from torch.utils.data import Dataset

        class Items(Dataset):
            def __getitem__(self, i):
                if i % self.every == 0:
                    gc.collect()
                return self.rows[i]

            def __init__(self, rows):
                gc.collect()
                self.rows = rows
    """
    assert ids_at(source, "script.empty-cache-in-loop", "info") == [7]
    assert ids_at(source, "script.empty-cache-in-loop", "warning") == []


def test_compiling_decorator_factory_applied_inside_a_loop() -> None:
    source = """\
        import tensorflow as tf

        def graph_mode(xla):
            def wrap(func):
                @tf.function(jit_compile=xla)
                def run(*args):
                    return func(*args)
                return run
            return wrap

        def bench(model, sizes):
            for n in sizes:
                x = tf.zeros((n, 8))

                @graph_mode(False)
                def forward():
                    return model(x)

                forward()
    """
    assert ids_at(source, "script.jit-in-loop", "warning") == [16]
    # the same factory applied once, at the top level: compiled once
    once = source.replace("""            for n in sizes:
                x = tf.zeros((n, 8))

                @graph_mode(False)
                def forward():
                    return model(x)

                forward()""", """            @graph_mode(False)
            def forward(x):
                return model(x)

            for n in sizes:
                forward(tf.zeros((n, 8)))""")
    assert ids_at(once, "script.jit-in-loop") == []
    # a factory that does not compile (a plain wrapper) applied in the loop: no finding
    plain = source.replace("@tf.function(jit_compile=xla)", "@functools.wraps(func)")
    assert ids_at(plain, "script.jit-in-loop") == []


def test_attribute_bounded_loop_in_jit() -> None:
    source = """\
        import jax
        import jax.numpy as jnp

        @jax.jit
        def crba(model, q):
            out = []
            for i in reversed(range(1, model.NB)):
                out.append(q[i] * model.mass[i])
            return jnp.stack(out)

        def loop_outside(model, q):
            for i in range(model.NB):
                q = crba(model, q)
            return q
    """
    assert ids_at(source, "script.python-loop-in-jit", "info") == [7]
    # a loop over the model's layers is the structure jit unrolls on purpose: silent
    layers = source.replace("range(1, model.NB)", "range(model.num_layers)")
    assert ids_at(layers, "script.python-loop-in-jit") == []


def test_concat_in_a_conditional_expression_and_mlx_concat() -> None:
    source = """\
        import mlx.core as mx

        def generate(model, y, steps):
            tokens = None
            for _ in range(steps):
                tokens = mx.concat([tokens, y]) if tokens is not None else y
                y = mx.argmax(model(y), axis=-1)
            return tokens
    """
    assert ids_at(source, "script.growing-tensor", "info") == [6]
    # concatenating two fresh values (nothing carried from the last iteration): silent
    fresh = source.replace("mx.concat([tokens, y])", "mx.concat([y, y])")
    assert ids_at(fresh, "script.growing-tensor") == []


def test_collate_class_instance_runs_per_batch() -> None:
    source = """\
        import torch
        from torch.utils.data import DataLoader

        class Collater:
            def __call__(self, batch):
                ys = []
                for audio in batch:
                    ys.append(audio[:100])
                return torch.tensor(ys)

        loader = DataLoader(data, batch_size=6, collate_fn=Collater())
    """
    assert ids_at(source, "script.tensor-from-python-list") == [9]
    # the instance not given to a DataLoader: nothing runs it per batch
    unused = source.replace(", collate_fn=Collater()", "")
    assert ids_at(unused, "script.tensor-from-python-list") == []


def test_list_literal_around_a_comprehension_in_getitem() -> None:
    source = """\
        import torch
        from torch.utils.data import Dataset

        class Grids(Dataset):
            def __getitem__(self, i):
                rows = [self.f[name][i] for name in self.names]
                return torch.tensor([rows], dtype=torch.float)
    """
    assert ids_at(source, "script.tensor-from-python-list") == [7]
    constants = source.replace("torch.tensor([rows]", "torch.tensor([1.0, 2.0]")
    assert ids_at(constants, "script.tensor-from-python-list") == []


def test_tolist_in_a_module_of_a_model_compiled_by_parameter() -> None:
    source = """\
        import torch
        from torch import nn

        class Experts(nn.Module):
            def forward(self, x, counts):
                sizes = counts.tolist()
                return torch.cat([c * 2 for c in torch.split(x, sizes)])

        def train(model, loader):
            model = torch.compile(model)
            for x, counts in loader:
                model(x.cuda(), counts.cuda()).sum().backward()
    """
    assert ids_at(source, "script.graph-break-item", "info") == [6]
    # nothing compiled: a host read in eager code is no graph break
    eager = source.replace("model = torch.compile(model)", "model = model.cuda()")
    assert ids_at(eager, "script.graph-break-item") == []
