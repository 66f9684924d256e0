"""The script check's fourth round (issue 24): general mechanisms found missing on
round3_heldout (dev material now) and round4_dev, each with a case that must stay silent."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

TIMER_CLASS = """\
    import time
    import torch

    class Timer:
        def __init__(self, name):
            self.name = name

        def start(self):
            self.t0 = time.perf_counter()

        def stop(self):
            self.total = time.perf_counter() - self.t0

    model = Net().to(torch.device("cuda"))
    timer = Timer("forward")
    for x in loader:
        timer.start()
        out = model(x.cuda())
        loss = out.sum()
        timer.stop()
        loss.backward()
"""


def test_timer_class_start_stop_brackets_a_timed_region() -> None:
    assert ids_at(TIMER_CLASS, "script.unsynced-timing") == [18]  # its first device call
    synced = TIMER_CLASS.replace("        timer.stop()",
                                 "        torch.cuda.synchronize()\n        timer.stop()")
    assert ids_at(synced, "script.unsynced-timing") == []
    in_stop = TIMER_CLASS.replace("            self.total =",
                                  "            torch.cuda.synchronize()\n            self.total =")
    assert ids_at(in_stop, "script.unsynced-timing") == []  # the timer itself waits
    host_only = TIMER_CLASS.replace("out = model(x.cuda())", "out = x").replace(
        "loss = out.sum()", "loss = len(out)")
    assert ids_at(host_only, "script.unsynced-timing") == []  # no device work timed


def test_with_timer_class_times_its_block() -> None:
    source = """\
        import time
        import torch

        class TimeWriter:
            def __enter__(self):
                self.start = time.time()
                return self

            def __exit__(self, *exc):
                self.duration = time.time() - self.start

        model = Net().cuda()
        for x in loader:
            with TimeWriter():
                batch = next(it)
            with TimeWriter():
                loss = model(batch).sum()
                loss.backward()
    """
    assert ids_at(source, "script.unsynced-timing") == [17]  # not the data-loading block
    assert ids_at(source.replace("                self.duration",
                                 "                torch.cuda.synchronize()\n"
                                 "                self.duration"), "script.unsynced-timing") == []


def test_comprehension_calling_a_function_is_a_loop() -> None:
    source = """\
        import tensorflow as tf

        def get_timings(dim):
            @tf.function
            def step(y):
                return y * 2
            return step(tf.ones(dim))

        timings = [get_timings(d) for d in (10, 20, 50)]
    """
    assert ids_at(source, "script.jit-in-loop") == [5]  # the def of the made function
    once = source.replace("timings = [get_timings(d) for d in (10, 20, 50)]",
                          "timings = get_timings(10)")
    assert ids_at(once, "script.jit-in-loop") == []
    plain = source.replace("[get_timings(d) for d in (10, 20, 50)]", "[d * 2 for d in (1, 2)]")
    assert ids_at(plain, "script.jit-in-loop") == []


AUTOGRAD = """\
    import torch

    class Rule(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, offsets):
            ctx.save_for_backward(q, offsets)
            return q * 2

        @staticmethod
        def backward(ctx, do):
            q, offsets = ctx.saved_tensors
            n = offsets[-1].item()
            return do * n, None

    for q, offsets in loader:
        out = Rule.apply(q.cuda(), offsets.cuda())
        out.sum().backward()
        opt.step()
"""


def test_backward_runs_custom_autograd_function_backward() -> None:
    assert ids_at(AUTOGRAD, "script.sync-in-step-loop") == [12]
    never_applied = AUTOGRAD.replace("out = Rule.apply(q.cuda(), offsets.cuda())",
                                     "out = q.cuda() * 2")
    assert ids_at(never_applied, "script.sync-in-step-loop") == []
    not_autograd = AUTOGRAD.replace("class Rule(torch.autograd.Function):", "class Rule:")
    assert ids_at(not_autograd, "script.sync-in-step-loop") == []


PIN = """\
    import torch
    from torch.utils.data import DataLoader

    def make_loader(ds):
        return DataLoader(ds, batch_size=8, num_workers=2)

    device = torch.device("cuda")
    for batch in make_loader(dataset):
        x = batch["latents"].to(device)
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
"""


def test_dataloader_without_pin_memory_is_reported_at_its_line() -> None:
    assert ids_at(PIN, "script.dataloader-no-pin-memory", "info") == [5]
    assert ids_at(PIN, "script.blocking-h2d-copy", "info") == [9]  # a part of the batch
    pinned = PIN.replace("num_workers=2)", "num_workers=2, pin_memory=True)")
    assert ids_at(pinned, "script.dataloader-no-pin-memory") == []
    cpu = PIN.replace('torch.device("cuda")', 'torch.device("cpu")')
    assert ids_at(cpu, "script.dataloader-no-pin-memory") == []
    not_copied = PIN.replace('x = batch["latents"].to(device)', 'x = batch["latents"]')
    assert ids_at(not_copied, "script.dataloader-no-pin-memory") == []


def test_single_row_slice_is_one_sample() -> None:
    source = """\
        import numpy as np
        import tensorflow as tf

        model = tf.keras.Sequential([tf.keras.layers.Dense(2)])
        while not done:
            a = np.argmax(model.predict(np.identity(5)[s:s + 1]))
            s, done = env.step(a)
    """
    assert ids_at(source, "script.keras-call-per-sample", "warning") == [6]
    rows = source.replace("[s:s + 1]", "[s:s + 64]")
    assert ids_at(rows, "script.keras-call-per-sample", "warning") == []


def test_a_part_of_a_per_iteration_value_is_per_iteration() -> None:
    source = """\
        import tensorflow as tf

        model = tf.keras.models.load_model("m.h5")
        for i in range(len(gen)):
            local = gen[i]
            out = model.predict(local[0])
    """
    assert ids_at(source, "script.keras-call-per-sample", "info") == [6]
    once = source.replace("local = gen[i]", "pass").replace(
        "out = model.predict(local[0])", "out = model.predict(data[0])")
    assert ids_at(once, "script.keras-call-per-sample") == []  # the same data each time


def test_cuda_guard_by_short_circuit_and() -> None:
    source = """\
        import torch
        device = "cuda" if torch.cuda.is_available() else "cpu"
        bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    """
    assert ids_at(source, "script.cuda-only-call") == []
    unguarded = source.replace("torch.cuda.is_available() and torch", "torch")
    assert ids_at(unguarded, "script.cuda-only-call") == [3]


def test_string_test_on_the_device_name_sends_mps_to_the_cpu() -> None:
    source = """\
        import torch
        device = "mps"
        device_type = "cuda" if "cuda" in device else "cpu"
    """
    assert ids_at(source, "script.device-choice-no-mps") == [3]
    fixed = source.replace('"cuda" if "cuda" in device else "cpu"',
                           '"cuda" if "cuda" in device else "mps" if "mps" in device else "cpu"')
    assert ids_at(fixed, "script.device-choice-no-mps") == []


def test_cuda_amp_on_a_device_only_ever_mps() -> None:
    source = """\
        import torch
        from torch.cuda.amp import GradScaler
        device = "mps"
        model = Net().to(device)
        scaler = GradScaler(enabled=True)
    """
    assert ids_at(source, "script.cuda-only-call") == [5]
    assert ids_at(source.replace('device = "mps"', 'device = "cuda:0"'),
                  "script.cuda-only-call") == []
    guarded = source.replace("scaler = GradScaler(enabled=True)",
                             "if device == 'cuda': scaler = GradScaler(enabled=True)")
    assert ids_at(guarded, "script.cuda-only-call") == []


def test_registered_buffer_tested_in_python_syncs() -> None:
    source = """\
        import torch
        import torch.nn as nn

        class Meter(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("num_batch", torch.tensor(0))
                self.limit = 10

            def update(self):
                self.num_batch += 1
                if self.num_batch <= self.limit:
                    return 1
                return 2

        meter = Meter().to("cuda")
        for x in loader:
            model(x).sum().backward()
            opt.step()
            meter.update()
    """
    assert ids_at(source, "script.sync-in-step-loop") == [12]
    plain = source.replace('self.register_buffer("num_batch", torch.tensor(0))',
                           "self.num_batch = 0")
    assert ids_at(plain, "script.sync-in-step-loop") == []


def test_host_round_trip_in_a_loop() -> None:
    source = """\
        import torch

        device = torch.device("cuda")
        for _ in range(256):
            probas = torch.softmax(model(ids)[:, -1], dim=-1)
            nxt = torch.multinomial(probas.cpu(), num_samples=1).to(device)
            ids = torch.cat([ids, nxt], dim=1)
    """
    assert ids_at(source, "script.sync-in-step-loop") == [6]
    on_device = source.replace("probas.cpu()", "probas").replace(".to(device)", "")
    assert ids_at(on_device, "script.sync-in-step-loop") == []


def test_empty_cache_in_the_training_loop() -> None:
    source = """\
        import torch

        def training_step(model, batch):
            loss = model(batch).sum()
            torch.cuda.empty_cache()
            loss.backward()

        for step, batch in enumerate(loader):
            training_step(model, batch)
            optimizer.step()
            if step % 500 == 0:
                torch.cuda.empty_cache()
    """
    assert ids_at(source, "script.empty-cache-in-loop", "warning") == [5]
    assert ids_at(source, "script.empty-cache-in-loop", "info") == [12]  # every 500 steps
    after = """\
        import torch

        for step, batch in enumerate(loader):
            model(batch).sum().backward()
            optimizer.step()
        torch.cuda.empty_cache()
    """
    assert ids_at(after, "script.empty-cache-in-loop") == []


def test_mlx_lazy_input_first_evaluated_in_the_timed_region() -> None:
    source = """\
        import time
        import mlx.core as mx

        for _ in range(100):
            preds = mx.random.randint(0, 1, (2,))
            start = time.time()
            val = preds.argmax().item()
            times.append(time.time() - start)
    """
    assert ids_at(source, "script.lazy-input-timed") == [5]
    evaluated = source.replace("            start = time.time()",
                               "            mx.eval(preds)\n            start = time.time()")
    assert ids_at(evaluated, "script.lazy-input-timed") == []


def test_autocast_only_for_cuda_in_a_script_that_runs_on_mps() -> None:
    source = """\
        from contextlib import nullcontext
        import torch

        def autocast(device, dtype=None):
            if device.type == "cuda":
                return torch.autocast(device_type="cuda", dtype=dtype)
            return nullcontext()

        device = torch.device("mps")
    """
    assert ids_at(source, "script.amp-off-on-mps") == [7]
    every_gpu = source.replace('if device.type == "cuda":', 'if device.type in ("cuda", "mps"):')
    assert ids_at(every_gpu, "script.amp-off-on-mps") == []
    no_mps = source.replace('torch.device("mps")', 'torch.device("cuda")')
    assert ids_at(no_mps, "script.amp-off-on-mps") == []
