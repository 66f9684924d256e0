"""Round 24's rules (issue 24): corpus_round23's dev forms (script_check/round24_rules.py);
each form fires and stays silent on the fixed or a near form."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_TIMING = "script.unsynced-timing"

_RECEIVED = """\
    import time
    import torch

    def fps(loader, model):
        model.eval()
        total = 0.0
        for image in loader:
            image = image.cuda()
            start = time.time()
            out = model(image)
            total += time.time() - start
        return total
"""


def test_timed_received_module() -> None:
    assert 10 in ids_at(_RECEIVED, _TIMING, "info")
    fixed = _RECEIVED.replace("            out = model(image)\n",
                              "            out = model(image)\n"
                              "            torch.cuda.synchronize()\n")
    assert 10 not in ids_at(fixed, _TIMING)
    not_module = _RECEIVED.replace("        model.eval()\n", "")
    assert 10 not in ids_at(not_module, _TIMING)


_WARMUP = """\
    import jax
    import jax.numpy as jnp

    def bench(state):
        @jax.jit
        def f(x):
            return jnp.sin(x)

        x = jnp.zeros((1000,))
        f(x)
        while state:
            jax.block_until_ready(f(x))
"""


def test_unblocked_warmup_before_timed_loop() -> None:
    assert 10 in ids_at(_WARMUP, _TIMING, "info")
    fixed = _WARMUP.replace("        f(x)\n", "        jax.block_until_ready(f(x))\n")
    assert 10 not in ids_at(fixed, _TIMING)


_CALL_TIMER = """\
    import time
    from contextlib import contextmanager

    import jax

    class Timer:
        def __init__(self):
            self.totals = {}

        @contextmanager
        def __call__(self, name):
            start = time.perf_counter()
            yield
            self.totals[name] = time.perf_counter() - start

    class Driver:
        def __init__(self, step):
            self.step = jax.jit(step)
            self.timer = Timer()

        def run(self, x):
            with self.timer("step"):
                y = self.step(x)
            return y
"""


def test_call_timer_instance_around_jax() -> None:
    assert 23 in ids_at(_CALL_TIMER, _TIMING, "info")
    fixed = _CALL_TIMER.replace("y = self.step(x)", "y = jax.block_until_ready(self.step(x))")
    assert 23 not in ids_at(fixed, _TIMING)


_PREDICT = """\
    import numpy as np
    import tensorflow as tf

    def encode(data, encoder):
        flat = np.reshape(data, (-1, data.shape[-1]))
        return encoder.predict(flat)

    def train(batches, autoencoder):
        for batch in batches:
            x = tf.concat([batch["a"], batch["b"]], axis=-1)
            z = encode(x, autoencoder.encoder)
"""


def test_predict_in_loop_callee() -> None:
    assert 6 in ids_at(_PREDICT, "script.keras-call-per-sample", "info")
    fixed = _PREDICT.replace("encoder.predict(flat)", "encoder(flat, training=False)")
    assert 6 not in ids_at(fixed, "script.keras-call-per-sample")
    once = _PREDICT.replace("z = encode(x, autoencoder.encoder)", "pass") + \
        "\n    z = encode(data, enc)\n"
    assert 6 not in ids_at(once, "script.keras-call-per-sample")


_PER_ROW = """\
    import torch

    layer = torch.nn.Linear(256, 256)
    xs = torch.randn(10000, 256)
    for x in xs:
        y = layer(x)
"""


def test_module_call_per_row() -> None:
    assert 6 in ids_at(_PER_ROW, "script.per-sample-python-loop", "info")
    fixed = _PER_ROW.replace("for x in xs:\n        y = layer(x)", "ys = layer(xs)")
    assert ids_at(fixed, "script.per-sample-python-loop") == []


_TINY = """\
    import cunumeric as np

    nx, ny = 41, 41

    def step(u):
        for _ in range(100):
            u[1:-1] = u[1:-1] * 0.5
        return u

    u = np.zeros((ny, nx))
    u = step(u)
"""


def test_tiny_gpu_array() -> None:
    assert 10 in ids_at(_TINY, "script.gpu-tiny-op", "info")
    big = _TINY.replace("nx, ny = 41, 41", "nx, ny = 2048, 2048")
    assert 10 not in ids_at(big, "script.gpu-tiny-op")
    numpy = _TINY.replace("import cunumeric as np", "import numpy as np")
    assert 10 not in ids_at(numpy, "script.gpu-tiny-op")
