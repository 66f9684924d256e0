"""Round 12's step 0 (issue 24): forms of known kinds the analysis did not read, grouped by
the gap behind the seen misses (script_check/gap_rules.py), and two kinds no rule knew;
each fires on its form and stays silent on the form its thread recommends."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at


def test_clock_read_inside_warmup_conditional_closes_the_timer() -> None:
    source = """\
        import time
        import torch

        def measure(block, n_steps, device="cuda"):
            elapsed = 0.0
            for step in range(n_steps):
                x = torch.randn(1, 128, 64, device=device)
                start = time.perf_counter()
                out = block.forward(x)
                if step >= 1:
                    elapsed += time.perf_counter() - start
            return elapsed
    """
    assert ids_at(source, "script.unsynced-timing") == [9]
    synced = source.replace("                if step >= 1:\n",
                            "                torch.cuda.synchronize()\n"
                            "                if step >= 1:\n")
    assert ids_at(synced, "script.unsynced-timing") == []


def test_list_as_static_argument_in_a_loop() -> None:
    source = """\
        from functools import partial
        import jax
        import jax.numpy as jnp

        @partial(jax.jit, static_argnums=(0,))
        def add_offsets(offsets, x):
            return x + sum(offsets)

        x = jnp.zeros((3,))
        for step in range(100):
            x = add_offsets([0, 1], x)
    """
    assert ids_at(source, "script.static-arg-unhashable", "warning") == [11]
    as_tuple = source.replace("add_offsets([0, 1], x)", "add_offsets((0, 1), x)")
    assert ids_at(as_tuple, "script.static-arg-unhashable") == []
    # the list at a traced (not static) position is an array argument
    traced = source.replace("add_offsets([0, 1], x)", "add_offsets((0, 1), [x])")
    assert ids_at(traced, "script.static-arg-unhashable") == []
    by_name = """\
        import jax

        def f(x, sizes):
            return x * len(sizes)

        g = jax.jit(f, static_argnames=("sizes",))
        for i in range(10):
            y = g(1.0, sizes=[1, 2])
    """
    assert ids_at(by_name, "script.static-arg-unhashable") == [8]


def test_new_iterator_every_step() -> None:
    source = """\
        import torch
        from torch.utils.data import DataLoader

        def train(model, dataset, optimizer, iterations):
            loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=1)
            for step in range(iterations):
                x, y = next(iter(loader))
                loss = model(x.cuda(), y.cuda())
                loss.backward()
                optimizer.step()
    """
    assert ids_at(source, "script.iterator-per-step", "warning") == [7]
    once = source.replace("            for step in range(iterations):\n"
                          "                x, y = next(iter(loader))\n",
                          "            it = iter(loader)\n"
                          "            for step in range(iterations):\n"
                          "                x, y = next(it)\n")
    assert ids_at(once, "script.iterator-per-step") == []
    # one batch taken once (to read the shapes) costs one start-up
    shape = "from torch.utils.data import DataLoader\nx, y = next(iter(DataLoader(ds)))\n"
    assert ids_at(shape, "script.iterator-per-step") == []


def test_pandas_iloc_in_getitem() -> None:
    source = """\
        import torch
        from torch.utils.data import Dataset

        class Windows(Dataset):
            def __init__(self, df):
                self.df = df
                self.first = df.iloc[0]

            def __getitem__(self, i):
                row = self.df.iloc[i]
                return torch.tensor(row["x"]), row["y"]
    """
    assert ids_at(source, "script.pandas-in-getitem", "info") == [10]
    arrays = source.replace('row = self.df.iloc[i]\n                return torch.tensor('
                            'row["x"]), row["y"]',
                            'return self.x[i], self.y[i]')
    assert ids_at(arrays, "script.pandas-in-getitem") == []


LIGHTNING = """\
    import pytorch_lightning as pl
    from torch.utils.data import DataLoader

    class Data(pl.LightningDataModule):
        def train_dataloader(self):
            return DataLoader(self.ds, batch_size=64, shuffle=True,
                              num_workers=8, drop_last=True)

    trainer = pl.Trainer(accelerator="gpu", devices=1, max_epochs=300)
    trainer.fit(model, datamodule=Data())
"""


def test_lightning_train_dataloader_is_iterated_every_epoch() -> None:
    assert ids_at(LIGHTNING, "script.dataloader-workers-respawn", "info") == [6]
    assert ids_at(LIGHTNING, "script.dataloader-no-pin-memory", "info") == [6]
    kept = LIGHTNING.replace("drop_last=True)", "drop_last=True, persistent_workers=True, "
                             "pin_memory=True)")
    assert ids_at(kept, "script.dataloader-workers-respawn") == []
    assert ids_at(kept, "script.dataloader-no-pin-memory") == []
    # one epoch starts the workers once; a CPU Trainer copies nothing to a device
    one = LIGHTNING.replace("max_epochs=300", "max_epochs=1").replace('"gpu"', '"cpu"')
    assert ids_at(one, "script.dataloader-workers-respawn") == []
    assert ids_at(one, "script.dataloader-no-pin-memory") == []


def test_accelerate_device_is_the_gpu_for_pinning() -> None:
    source = """\
        import torch
        from torch.utils.data import DataLoader

        def make_loader(ds):
            return DataLoader(ds, batch_size=1, shuffle=True, num_workers=8)

        def train(network, ds, optimizer, accelerator):
            for batch in make_loader(ds):
                loss = network(batch["latents"].to(accelerator.device))
                accelerator.backward(loss)
                optimizer.step()
    """
    assert ids_at(source, "script.dataloader-no-pin-memory", "info") == [5]
    pinned = source.replace("num_workers=8)", "num_workers=8, pin_memory=True)")
    assert ids_at(pinned, "script.dataloader-no-pin-memory") == []
