"""The script check's rules written against corpus_round11's dev half (issue 24, round 12):
each fires on its form and stays silent on the form its thread recommends (or on code that
runs once)."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at


def test_copying_constructor_before_device_copy_per_step() -> None:
    source = """\
        import torch

        device = torch.device("cuda")
        obs = torch.Tensor(envs.reset()).to(device)
        for step in range(128):
            obs_np, reward, done, info = envs.step(policy(obs))
            obs = torch.Tensor(obs_np).to(device)
    """
    assert ids_at(source, "script.per-step-copy", "info") == [7]
    shared = source.replace("obs = torch.Tensor(obs_np).to(device)",
                            "obs = torch.as_tensor(obs_np, device=device)")
    assert ids_at(shared, "script.per-step-copy") == []
    # a Python literal has no memory to share; a dtype cast is no device copy
    literal = source.replace("torch.Tensor(obs_np).to(device)", "torch.tensor([1.0]).to(device)")
    assert ids_at(literal, "script.per-step-copy") == []
    cast = source.replace("torch.Tensor(obs_np).to(device)", "torch.Tensor(obs_np).to(torch.half)")
    assert ids_at(cast, "script.per-step-copy") == []


def test_copy_helper_with_non_blocking_defaulting_to_false() -> None:
    source = """\
        import torch

        def send_to_device(batch, device, non_blocking=False):
            return {k: v.to(device, non_blocking=non_blocking) for k, v in batch.items()}

        for batch in loader:
            batch = send_to_device(batch, "cuda")
            model(**batch).loss.backward()
    """
    assert ids_at(source, "script.blocking-h2d-copy", "info") == [4]
    passed = source.replace('send_to_device(batch, "cuda")',
                            'send_to_device(batch, "cuda", non_blocking=True)')
    assert ids_at(passed, "script.blocking-h2d-copy") == []
    once = source.replace("        for batch in loader:\n            batch = send_to_device",
                          "        batch = next(iter(loader))\n        batch = send_to_device")
    once = once.replace("            model(**batch)", "        model(**batch)")
    assert ids_at(once, "script.blocking-h2d-copy") == []


def test_lightning_auto_accelerator_and_loader_kwargs_dict() -> None:
    source = """\
        import hydra
        import lightning.pytorch as pl
        from torch.utils.data import DataLoader

        class Data(pl.LightningDataModule):
            def __init__(self, num_workers):
                super().__init__()
                self._kw = dict(batch_size=None, num_workers=num_workers)

            def train_dataloader(self):
                return DataLoader(self.ds, shuffle=True, **self._kw)

        trainer = hydra.utils.instantiate(config.trainer)
        trainer.fit(model=model, datamodule=Data(4))
    """
    assert ids_at(source, "script.dataloader-no-pin-memory", "info") == [11]
    pinned = source.replace("num_workers=num_workers)", "num_workers=num_workers, "
                            "pin_memory=True)")
    assert ids_at(pinned, "script.dataloader-no-pin-memory") == []
    # Lightning 1.x (pytorch_lightning) without an accelerator trains on the CPU
    old = source.replace("import lightning.pytorch as pl", "import pytorch_lightning as pl")
    assert ids_at(old, "script.dataloader-no-pin-memory") == []
    cpu = source.replace("trainer = hydra.utils.instantiate(config.trainer)",
                         'trainer = pl.Trainer(accelerator="cpu")')
    assert ids_at(cpu, "script.dataloader-no-pin-memory") == []


def test_fit_on_one_sample_per_epoch() -> None:
    source = """\
        import numpy as np
        import tensorflow as tf

        model.compile(optimizer="adam", loss="mse")
        model.fit(x[np.newaxis], y[np.newaxis], batch_size=32, epochs=500)
    """
    assert ids_at(source, "script.keras-epoch-overhead", "info") == [5]
    windows = source.replace("x[np.newaxis], y[np.newaxis]", "x_windows, y_windows")
    assert ids_at(windows, "script.keras-epoch-overhead") == []
    once = source.replace("epochs=500", "epochs=1")
    assert ids_at(once, "script.keras-epoch-overhead") == []
    reshaped = source.replace("x[np.newaxis], y[np.newaxis]", "x.reshape(1, -1, 3), y")
    assert ids_at(reshaped, "script.keras-epoch-overhead") == [5]


def test_batch_generator_builds_jnp_arrays() -> None:
    source = """\
        import jax
        import jax.numpy as jnp
        import numpy as np

        def data_loader(dataset, perms):
            for perm in perms:
                batch = dataset[perm]
                yield {k: jnp.array(v) for k, v in batch.items()}

        p_step = jax.pmap(train_step)
        for epoch in range(3):
            rng, input_rng = jax.random.split(rng)
            for batch in data_loader(ds, perms):
                state = p_step(state, shard(batch))
    """
    assert ids_at(source, "script.jnp-in-data-loader", "info") == [8]
    numpy = source.replace("jnp.array(v)", "np.array(v)")
    assert ids_at(numpy, "script.jnp-in-data-loader") == []
    # the per-epoch key split beside the inner step loop is no per-step dispatch chain
    assert ids_at(source, "script.jax-host-op-in-loop") == []
    per_step = """\
        import jax

        for i in range(1000):
            key, sub = jax.random.split(key)
            x = x + jax.random.normal(sub, (3,))
    """
    assert ids_at(per_step, "script.jax-host-op-in-loop") == [4]


def test_jax_libraries_count_as_jax() -> None:
    source = """\
        import optax
        import zodiax as zdx

        def step_fn(model, opt_state, data):
            loss, grads = zdx.filter_value_and_grad(loss_fn)(model, data)
            updates, opt_state = optim.update(grads, opt_state)
            return zdx.apply_updates(model, updates), opt_state

        optim = optax.adam(1e-2)
        for i in range(200):
            model, opt_state = step_fn(model, opt_state, data)
    """
    assert ids_at(source, "script.jax-update-outside-jit", "warning") == [4]
    jitted = source.replace("        def step_fn", "        @eqx.filter_jit\n        def step_fn")
    jitted = jitted.replace("import optax\n", "import equinox as eqx\n        import optax\n")
    assert ids_at(jitted, "script.jax-update-outside-jit") == []
