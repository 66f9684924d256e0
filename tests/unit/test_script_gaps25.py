"""Round 25's step 0 (issue 24): corpus_round23's held-out misses written generally
(script_check/gap25_rules.py); each form fires and stays silent on the fixed or a near form."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_TIMING = "script.unsynced-timing"

_PARAM_ON_DEVICE = """\
    import time
    import torch

    def bench(model, loader, device):
        total = 0.0
        for data in loader:
            data = data.to(device)
            t0 = time.perf_counter()
            model(data)
            total += time.perf_counter() - t0
        return total
"""


def test_timed_param_on_device_input() -> None:
    assert 9 in ids_at(_PARAM_ON_DEVICE, _TIMING, "info")
    fixed = _PARAM_ON_DEVICE.replace("            model(data)\n",
                                     "            model(data)\n"
                                     "            torch.cuda.synchronize()\n")
    assert 9 not in ids_at(fixed, _TIMING)


_CUPY_TIMER = """\
    import time
    import cupy as cp

    class Timer:
        def start(self):
            self._t = time.perf_counter_ns() / 1000.0

        def stop(self):
            return time.perf_counter_ns() / 1000.0 - self._t

    def run(a, b, timer):
        timer.start()
        for _ in range(10):
            cp.dot(a, b)
        return timer.stop()
"""


def test_class_timer_around_cupy() -> None:
    assert 14 in ids_at(_CUPY_TIMER, _TIMING, "info")
    fixed = _CUPY_TIMER.replace("        return timer.stop()",
                                "        cp.cuda.Device().synchronize()\n"
                                "        return timer.stop()")
    assert 14 not in ids_at(fixed, _TIMING)


_TICK = """\
    import time
    import jax

    class StepTimer:
        def tick(self):
            now = time.perf_counter()
            self.last = now

    def train(params, step, n):
        step = jax.jit(step)
        timer = StepTimer()
        for _ in range(n):
            params = step(params)
            timer.tick()
"""


def test_tick_timer_around_a_jitted_step() -> None:
    assert 13 in ids_at(_TICK, _TIMING, "info")
    fixed = _TICK.replace("params = step(params)",
                          "params = jax.block_until_ready(step(params))")
    assert 13 not in ids_at(fixed, _TIMING)


_COLD_GEN = """\
    import time
    import mlx.core as mx

    def gen(prompt, model):
        y = prompt
        while True:
            y = model(y)
            yield y

    def generate(model, prompt):
        tic = time.time()
        for n, tok in enumerate(gen(prompt, model)):
            if n == 0:
                first = time.time() - tic
"""


def test_cold_generator_timed() -> None:
    assert 12 in ids_at(_COLD_GEN, "script.cold-call-timed", "info")
    warm = _COLD_GEN.replace("        tic = time.time()\n",
                             "        next(gen(prompt, model))\n        tic = time.time()\n")
    assert 12 not in ids_at(warm, "script.cold-call-timed")


_ONE_ROW = """\
    import numpy as np
    from tensorflow import keras

    model = keras.Sequential([keras.layers.Dense(1)])
    x = np.random.rand(1, 10).astype("float32")
    preds = []
    for _ in range(1000):
        preds.append(model.predict(x))
"""


def test_predict_one_row_in_loop() -> None:
    assert 8 in ids_at(_ONE_ROW, "script.keras-call-per-sample", "info")
    batch = _ONE_ROW.replace("np.random.rand(1, 10)", "np.random.rand(1000, 10)")
    assert 8 not in ids_at(batch, "script.keras-call-per-sample")


_EVENTS = """\
    import torch

    def main(model, x):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        model(x.cuda())
        end.record()
        print(start.elapsed_time(end))
"""


def test_event_elapsed_before_sync() -> None:
    assert 9 in ids_at(_EVENTS, _TIMING, "info")
    fixed = _EVENTS.replace("        end.record()\n", "        end.record()\n"
                            "        end.synchronize()\n")
    assert 10 not in ids_at(fixed, _TIMING) and 9 not in ids_at(fixed, _TIMING)


_MARK_STEP = """\
    import time
    import torch
    import torch_xla.core.xla_model as xm

    def run():
        pass

    start = time.time()
    for _ in range(10):
        run()
        xm.mark_step()
    end = time.time()
"""


def test_mark_step_timed() -> None:
    assert 11 in ids_at(_MARK_STEP, _TIMING, "info")
    fixed = _MARK_STEP.replace("    end = time.time()", "    xm.wait_device_ops()\n"
                               "    end = time.time()")
    assert 11 not in ids_at(fixed, _TIMING)


_CAPPED = """\
    import keras

    def main(points, n_free, max_workers=3):
        workers = get_num_processes(min_free_cpu_cores=n_free, n_max_processes=max_workers)
        gen = CubeGenerator(points, workers=workers, use_multiprocessing=True)
"""


def test_worker_count_capped_by_small_default() -> None:
    assert 4 in ids_at(_CAPPED, "script.dataloader-workers", "info")
    roomy = _CAPPED.replace("max_workers=3", "max_workers=None")
    assert 4 not in ids_at(roomy, "script.dataloader-workers")
