"""The script check as program analysis (issue 24, classes 13-19): timed work followed into
methods, values, wrappers, context-manager and callback timers and notebook magics; compiled
functions built in loops; forward passes without a backward; tf.data order; Python numbers
that change across steps. Each rule is shown firing and staying quiet on the fixed code."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from devicebench.script_check import check_source, inspect_script


def ids_at(source: str, fid: str, severity: str | None = None) -> list[int]:
    found = check_source(textwrap.dedent(source))
    return [int(f.location.rsplit(":", 1)[1]) for f in found
            if f.id == fid and (severity is None or f.severity == severity)]


CALLBACK = """\
    import time
    import torch

    class Speed(Callback):
        def on_predict_batch_start(self, trainer, module, batch, i):
            self.t0 = time.perf_counter()

        def on_predict_batch_end(self, trainer, module, out, batch, i):
            self.times.append(time.perf_counter() - self.t0)

    model = Net().to(torch.device("cuda"))
"""


def test_callback_hooks_timing_a_batch_need_a_sync() -> None:
    assert ids_at(CALLBACK, "script.unsynced-timing") == [9]
    synced = CALLBACK.replace("        self.times.append", "        torch.cuda.synchronize()\n"
                              "        self.times.append")
    assert ids_at(synced, "script.unsynced-timing") == []


CONTEXT_TIMER = """\
    import contextlib
    import time
    import torch

    @contextlib.contextmanager
    def record_time(tag):
        start = time.time()
        yield
        writer.add_scalar(tag, time.time() - start)

    model = Agent().cuda()
    for it in range(10):
        with record_time("iter"):
            loss = model(next(batches))
            loss.backward()
"""


def test_context_manager_timer_reports_at_its_yield() -> None:
    assert ids_at(CONTEXT_TIMER, "script.unsynced-timing") == [8]
    synced = CONTEXT_TIMER.replace(
        "            loss.backward()\n",
        "            loss.backward()\n            torch.cuda.synchronize()\n")
    assert ids_at(synced, "script.unsynced-timing") == []


def test_wrapped_model_and_device_values_are_device_work() -> None:
    wrapped = """\
        import time
        import torch
        trt = torch2trt(model.eval().cuda(), [x])
        start = time.time()
        y = trt(images)
        print(time.time() - start)
    """
    assert ids_at(wrapped, "script.unsynced-timing") == [5]
    value = """\
        import time
        import jax
        factors = jax.jit(fit)(data)[0]
        start = time.time()
        total = factors.sum()
        print(time.time() - start)
    """
    assert ids_at(value, "script.unsynced-timing") == [5]
    assert ids_at(value.replace("factors.sum()", "factors.sum().block_until_ready()"),
                  "script.unsynced-timing") == []


def test_a_sync_guarded_by_one_backend_does_not_cover_cuda() -> None:
    source = """\
        import time
        import torch

        def run(self, device):
            start = time.time()
            for _ in range(10):
                self.mean.backward(retain_graph=True)
                if device.type == "mps":
                    torch.mps.synchronize()
            return time.time() - start
    """
    assert ids_at(source, "script.unsynced-timing") == [7]  # the timed call itself
    both = source.replace('if device.type == "mps":\n                    torch.mps.synchronize()',
                          "torch.cuda.synchronize()")
    assert ids_at(both, "script.unsynced-timing") == []


def test_torch_on_the_cpu_only_needs_no_sync() -> None:
    source = """\
        import time
        import torch
        model = torch.hub.load("pytorch/vision", "resnet18")
        x = torch.randn(8, 3, 224, 224)
        start = time.time()
        for _ in range(10):
            model(x)
        print(time.time() - start)
    """
    assert ids_at(source, "script.unsynced-timing") == []
    gpu = source.replace("224, 224)", "224, 224).cuda()")
    assert ids_at(gpu, "script.unsynced-timing") == [7]


def _notebook(tmp_path: Path, cells: list[str]) -> Path:
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                     "source": c} for c in cells], "metadata": {}, "nbformat": 4,
          "nbformat_minor": 5}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    return path


def test_notebook_timeit_magic_is_read_as_timing(tmp_path: Path) -> None:
    cells = ["import jax\nimport jax.numpy as jnp\nf = jax.jit(g)\nx = jnp.ones((500, 500))",
             "%timeit -n10 -r3 f(x)"]
    found = inspect_script(_notebook(tmp_path, cells)).findings
    assert [f.location.split(":", 1)[1] for f in found if f.id == "script.unsynced-timing"] == [
        "cell 2:1"]
    cells[1] = "%timeit f(x).block_until_ready()"
    found = inspect_script(_notebook(tmp_path, cells)).findings
    assert [f for f in found if f.id == "script.unsynced-timing"] == []


def test_jit_applied_inside_the_loop() -> None:
    source = """\
        import jax
        for batch in batches:
            grad_fn = jax.jit(jax.value_and_grad(loss_fn))
            loss, grads = grad_fn(params, batch)
    """
    assert ids_at(source, "script.jit-in-loop", "warning") == [3]
    hoisted = """\
        import jax
        grad_fn = jax.jit(jax.value_and_grad(loss_fn))
        for batch in batches:
            loss, grads = grad_fn(params, batch)
    """
    assert ids_at(hoisted, "script.jit-in-loop") == []
    per_model = """\
        import torch
        for name, m in models.items():
            compiled = torch.compile(m)
            bench(compiled)
    """
    assert ids_at(per_model, "script.jit-in-loop") == []


def test_forward_without_backward_or_no_grad() -> None:
    source = """\
        import torch
        model = Net().cuda()
        for x in loader:
            y = model(x)
            preds.append(y)
    """
    assert ids_at(source, "script.inference-grad") == [4]
    guarded = source.replace("y = model(x)", "with torch.no_grad():\n                y = model(x)")
    assert ids_at(guarded, "script.inference-grad") == []
    training = source.replace("preds.append(y)", "loss_fn(y).backward()")
    assert ids_at(training, "script.inference-grad") == []


def test_eval_pass_of_a_shared_epoch_function() -> None:
    source = """\
        import torch

        def run_epoch(model, loader, train):
            for x, t in loader:
                out = model(x)
                loss = crit(out, t)
                if train:
                    loss.backward()
                    opt.step()

        model = Net().cuda()
        run_epoch(model, train_loader, train=True)
        run_epoch(model, valid_loader, train=False)
    """
    assert ids_at(source, "script.inference-grad") == [5]
    assert ids_at(source.replace("train=False", "train=True"), "script.inference-grad") == []


def test_tfdata_shuffle_after_batch_and_cache_after_random_map() -> None:
    source = """\
        import tensorflow as tf

        def augment(x):
            return tf.image.random_flip_left_right(x)

        ds = tfds.load("mnist", split="train")
        ds = ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE).cache()
        ds = ds.batch(64).shuffle(1000).prefetch(tf.data.AUTOTUNE)
    """
    assert ids_at(source, "script.tfdata-order", "warning") == [7, 8]
    good = """\
        import tensorflow as tf

        def decode(x):
            return tf.cast(x, tf.float32) / 255.0

        ds = tfds.load("mnist", split="train")
        ds = ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE).cache()
        ds = ds.shuffle(1000).batch(64).prefetch(tf.data.AUTOTUNE)
    """
    assert ids_at(good, "script.tfdata-order", "warning") == []


def test_python_number_from_an_outer_loop_retraces() -> None:
    source = """\
        import tensorflow as tf

        @tf.function
        def train_step(x, w):
            return x * w

        for epoch in range(10):
            w = 0.1 * epoch
            for x in ds:
                train_step(x, w)
    """
    assert ids_at(source, "script.recompile-shapes") == [10]
    tensor = source.replace("w = 0.1 * epoch", "w = tf.constant(0.1 * epoch)")
    assert ids_at(tensor, "script.recompile-shapes") == []


def test_accelerate_accumulation_without_no_sync() -> None:
    source = """\
        from accelerate import Accelerator
        accelerator = Accelerator()
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for step, batch in enumerate(loader):
            loss = model(**batch).loss / accum
            accelerator.backward(loss)
            if step % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
    """
    assert ids_at(source, "script.ddp-no-sync") == [6]
    managed = source.replace("loss = model(**batch).loss / accum",
                             "with accelerator.accumulate(model):\n"
                             "                loss = model(**batch).loss")
    assert ids_at(managed, "script.ddp-no-sync") == []


def test_chained_unjitted_jax_ops_in_a_loop() -> None:
    source = """\
        from jax import random
        key = random.PRNGKey(0)
        for _ in range(10000):
            key, sub = random.split(key)
            val = random.normal(sub, (3,))
    """
    assert ids_at(source, "script.jax-host-op-in-loop") == [4]
    jitted = """\
        import jax
        from jax import random
        step = jax.jit(split_and_sample)
        key = random.PRNGKey(0)
        for _ in range(10000):
            key, val = step(key)
    """
    assert ids_at(jitted, "script.jax-host-op-in-loop") == []


def test_python_loop_unrolled_by_jit() -> None:
    source = """\
        import jax

        @jax.jit
        def series(z):
            for i in range(1, 100):
                z = z * 0.5 + i
            return z
    """
    assert ids_at(source, "script.python-loop-in-jit") == [5]
    assert ids_at(source.replace("range(1, 100)", "range(3)"), "script.python-loop-in-jit") == []
    static = """\
        import jax

        def simulate(w, n):
            for t in range(n):
                w = w * 1.01
            return w

        simulate = jax.jit(simulate, static_argnums=(1,))
    """
    assert ids_at(static, "script.python-loop-in-jit") == [4]


def test_sizes_from_a_literal_list_recompile() -> None:
    source = """\
        import jax
        import jax.numpy as jnp

        @jax.jit
        def f(v, idx):
            return v[idx] * 2

        for n in [5, 8, 10]:
            f(x, jnp.arange(n))
    """
    assert ids_at(source, "script.recompile-shapes") == [9]


def test_legacy_optimizer_reads_the_scripts_own_pin() -> None:
    body = """\
        import tensorflow as tf
        opt = tf.keras.optimizers.legacy.Adam(learning_rate=1e-3)
    """
    old = "# /// script\n# dependencies = [\"tensorflow==2.6.0\"]\n# ///\n" + textwrap.dedent(body)
    (f,) = [f for f in check_source(old) if f.id == "script.legacy-optimizer"]
    assert f.severity == "error" and "AttributeError" in f.observed and "2.6" in f.observed
    pinned = old.replace("2.6.0", "2.13.1")
    (f,) = [f for f in check_source(pinned) if f.id == "script.legacy-optimizer"]
    assert f.severity == "info" and "tensorflow==2.13.1" in f.observed
    (f,) = [f for f in check_source(textwrap.dedent(body)) if f.id == "script.legacy-optimizer"]
    assert f.severity == "error" and "Keras 3" in f.observed
