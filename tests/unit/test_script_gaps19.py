"""Round 19's step 0 (issue 24): corpus_round17's held-out misses written generally
(script_check/gap19_rules.py); each form fires and stays silent on the fixed or a near form.
"""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_SCALER = """\
    import torch

    class Algo:
        def __init__(self, cfg):
            self.dtype = torch.bfloat16 if cfg.bf16 else torch.float16
            if cfg.amp:
                self.scaler = torch.cuda.amp.GradScaler()

        def step(self, batch):
            with torch.autocast("cuda", dtype=self.dtype):
                return self.net(batch)
"""


def test_gradscaler_for_a_dtype_chosen_with_bf16() -> None:
    assert ids_at(_SCALER, "script.gradscaler-bf16") == [7]
    fixed = _SCALER.replace("if cfg.amp:", "if cfg.fp16:")
    assert ids_at(fixed, "script.gradscaler-bf16") == []
    fp16 = _SCALER.replace("torch.bfloat16 if cfg.bf16 else torch.float16", "torch.float16")
    assert ids_at(fp16, "script.gradscaler-bf16") == []


_BENCH = """\
    import torch

    torch.backends.cudnn.benchmark = True

    for prompt in queue:
        x = torch.randn(prompt.batch, 4, prompt.height, device="cuda")
        save(net(x))
"""


def test_cudnn_benchmark_at_import_with_sizes_from_the_loop() -> None:
    assert 3 in ids_at(_BENCH, "script.cudnn-benchmark-varying")
    fixed = _BENCH.replace("prompt.batch, 4, prompt.height", "8, 4, 64")
    assert ids_at(fixed, "script.cudnn-benchmark-varying") == []


_EVAL = """\
    import torch
    from torch.utils.data import DataLoader

    class MyTrainer(Trainer):
        def get_eval_dataloader(self, ds=None):
            return DataLoader(ds, batch_size=8, num_workers=self.args.workers,
                              persistent_workers=self.args.persistent)
"""


def test_loader_built_per_evaluation_without_persistent_workers() -> None:
    assert ids_at(_EVAL, "script.dataloader-workers-respawn") == [6]
    fixed = _EVAL.replace("persistent_workers=self.args.persistent", "persistent_workers=True")
    assert ids_at(fixed, "script.dataloader-workers-respawn") == []
    other = _EVAL.replace("get_eval_dataloader", "make_loader")
    assert 6 not in ids_at(other, "script.dataloader-workers-respawn")


_LR = """\
    import torch
    from torch.optim.lr_scheduler import LambdaLR

    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    sched = LambdaLR(opt, warmup)

    @torch.compile
    def opt_step():
        opt.step()

    for x in loader:
        model(x).sum().backward()
        opt_step()
        sched.step()
"""


def test_scheduler_writes_float_lr_into_a_compiled_step() -> None:
    assert ids_at(_LR, "script.recompile-shapes") == [13]
    tensor = _LR.replace("lr=3e-4", "lr=lr").replace("import torch\n", "import torch\n"
                                                     "    lr = torch.tensor(3e-4)\n", 1)
    assert ids_at(tensor, "script.recompile-shapes") == []
    plateau = tensor.replace("LambdaLR(opt, warmup)", "ReduceLROnPlateau(opt)").replace(
        "import LambdaLR", "import ReduceLROnPlateau")
    assert ids_at(plateau, "script.recompile-shapes") == [14]
    assert ids_at(_LR.replace("    @torch.compile\n", ""), "script.recompile-shapes") == []


_KERAS = """\
    import tensorflow as tf
    from tensorflow import keras

    def build(n):
        m = keras.Model(inp, out)
        m.compile(optimizer="adam", loss="mse")
        return m

    for sample in stream:
        model = build(n)
        model.fit(sample, sample)

    for images, labels in ds:
        cls, box = net(images, training=False)
        dets = post(cls, box, labels)
"""


def test_keras_factory_in_loop_and_eager_eval_calls() -> None:
    assert ids_at(_KERAS, "script.model-built-in-loop") == [10]
    assert ids_at(_KERAS, "script.eager-custom-loop") == [14, 15]
    once = _KERAS.replace("    for sample in stream:\n        model = build(n)\n",
                          "    model = build(n)\n    for sample in stream:\n")
    assert ids_at(once, "script.model-built-in-loop") == []
    graph = _KERAS.replace("net(images, training=False)", "serve(images)")
    assert ids_at(graph, "script.eager-custom-loop") == []


_SEQ = """\
    from tensorflow import keras

    class Gen(keras.utils.Sequence):
        def __getitem__(self, i):
            return load(i)

    gen = Gen(files)
    model.fit(gen, epochs=3, workers=4, use_multiprocessing=args.mp)
"""


def test_sequence_fitted_with_thread_workers() -> None:
    assert 8 in ids_at(_SEQ, "script.dataloader-workers")
    fixed = _SEQ.replace("use_multiprocessing=args.mp", "use_multiprocessing=True")
    assert 8 not in ids_at(fixed, "script.dataloader-workers")


_OPTAX = """\
    from functools import partial
    import jax
    import optax

    @partial(jax.jit, static_argnames=("optimizer",))
    def step(optimizer, params, state, batch):
        return optimizer.update(batch, state, params)

    def train(params, batches):
        optimizer = optax.adam(1e-2)
        state = optimizer.init(params)
        for b in batches:
            params, state = step(optimizer, params, state, b)

    for run in range(3):
        train(p0, data)
"""


def test_optax_optimizer_as_a_static_argument_rebuilt_per_run() -> None:
    assert 13 in ids_at(_OPTAX, "script.recompile-shapes")
    once = _OPTAX.replace("        optimizer = optax.adam(1e-2)\n", "").replace(
        "    def train(", "    optimizer = optax.adam(1e-2)\n\n    def train(")
    assert ids_at(once, "script.recompile-shapes") == []


_CLOSURE = """\
    import jax

    def fit(model, data):
        for sites in plan:
            def jac(x):
                def foo(s, *a):
                    return loss(s, a)
                return jax.vmap(jax.grad(foo))(data, x)
            optimize(jac)
"""


def test_transform_of_a_closure_rebuilt_per_call() -> None:
    assert ids_at(_CLOSURE, "script.jit-in-loop") == [8]
    top = """\
        import jax

        def jac(x):
            return jax.vmap(jax.grad(loss))(data, x)
    """
    assert ids_at(top, "script.jit-in-loop") == []


_DEBUG = """\
    import jax

    def convert(state):
        jax.debug.callback(lambda: log("converting"))
        return state

    @jax.jit
    def run(state, times):
        def step(c, t):
            return convert(c), t
        return jax.lax.scan(step, state, times)
"""


def test_debug_callback_in_a_scanned_step() -> None:
    assert ids_at(_DEBUG, "script.jax-host-op-in-loop") == [4]
    eager = _DEBUG.replace("    @jax.jit\n", "").replace("jax.lax.scan(step, state, times)",
                                                          "step(state, times)")
    assert ids_at(eager, "script.jax-host-op-in-loop") == []


_FLAX = """\
    import jax.numpy as jnp
    import flax.linen as nn

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            rates = [r.item() for r in jnp.linspace(0, 0.1, 4)]
            return nn.Dense(10)(x) * rates[0]

    model = Net()
    for images in loader:
        out = model.apply(variables, images)
"""


def test_item_in_a_flax_call_and_an_unjitted_apply() -> None:
    assert 7 in ids_at(_FLAX, "script.jax-host-op-in-loop")
    assert ids_at(_FLAX, "script.hot-function-not-compiled") == [12]
    jitted = _FLAX.replace("model = Net()", "model = Net()\n    f = jax.jit(model.apply)")
    # the wrapper is called by the loop (a wrapper left unused while the loop calls
    # model.apply is round 21's jit-left-unused form, blackjax#711)
    jitted = jitted.replace("out = model.apply(", "out = f(")
    assert ids_at(jitted, "script.hot-function-not-compiled") == []
    assert 7 not in ids_at(_FLAX.replace("r.item()", "r"), "script.jax-host-op-in-loop")


_LU = """\
    import jax
    import jax.numpy as jnp

    @jax.jit
    def lu(a):
        m, n = a.shape
        for k in range(n - 1):
            for j in range(k + 1, n):
                a = a.at[j, k].set(a[j, k] / a[k, k])
        return a
"""


def test_shape_bound_loops_unrolled_in_jit() -> None:
    assert ids_at(_LU, "script.python-loop-in-jit") == [7]
    plain = _LU.replace("                a = a.at[j, k].set(a[j, k] / a[k, k])\n",
                        "                pass\n").replace(
        "            for j in range(k + 1, n):\n", "            a = a + k\n")
    assert ids_at(plain.replace("                pass\n", ""), "script.python-loop-in-jit") == []


_PERM = """\
    import numpy as np
    from jax import random

    class Loader:
        def __iter__(self):
            idx = np.asarray(random.permutation(self.key, self.n))
            for s in range(0, self.n, self.bs):
                yield self.data[idx[s:s + self.bs]]
"""


def test_device_permutation_in_a_loader() -> None:
    assert ids_at(_PERM, "script.jnp-in-data-loader") == [6]
    host = _PERM.replace("np.asarray(random.permutation(self.key, self.n))",
                         "self.rng.permutation(self.n)")
    assert ids_at(host, "script.jnp-in-data-loader") == []


_PINNED = """\
    import lightning as L
    from torch.utils.data import DataLoader

    class DM(L.LightningDataModule):
        def train_dataloader(self):
            return DataLoader(self.train, batch_size=32, num_workers=8)

        def val_dataloader(self):
            return DataLoader(self.val, batch_size=32, num_workers=8, pin_memory=True)

        def test_dataloader(self):
            return DataLoader(self.test, batch_size=32, num_workers=8)

    trainer = L.Trainer(accelerator="gpu")
    trainer.fit(model, datamodule=DM())
"""


def test_every_unpinned_loader_of_a_file_with_one_reported() -> None:
    found = ids_at(_PINNED, "script.dataloader-no-pin-memory")
    assert 6 in found and 12 in found and 9 not in found


def test_jitted_transform_built_in_a_function_is_not_op_by_op() -> None:
    src = """\
        import jax

        @jax.jit
        def step(w):
            return w + 1

        def to_sph(points):
            f = jax.jit(jax.vmap(lambda p: convert(p)))
            return f(points)

        for _ in range(10):
            w = step(w)
            to_sph(w)
    """
    assert 7 not in ids_at(src, "script.jax-host-op-in-loop")
    eager = src.replace("f = jax.jit(jax.vmap(lambda p: convert(p)))",
                        "f = jax.numpy.sin(jax.numpy.cos(points))").replace("f(points)", "f")
    assert 7 in ids_at(eager, "script.jax-host-op-in-loop")
