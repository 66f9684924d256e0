"""Round 20's rules (issue 24): corpus_round19's dev forms (script_check/round20_rules.py);
each form fires and stays silent on the fixed or a near form."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_SYNC = "script.sync-in-step-loop"
_COPY = "script.per-step-copy"
_JNP = "script.jnp-in-data-loader"

_PING = """\
    import torch

    def generate(ctx, model, n):
        while n > 0:
            ids = tok(ctx)
            out = model(ids.to(model.device))
            pred = out.to(ids.device)
            ctx = torch.cat([ctx, pred])
            n -= 1
"""


def test_device_ping_pong_in_a_loop() -> None:
    assert {6, 7} <= set(ids_at(_PING, _COPY))
    one_way = _PING.replace("out.to(ids.device)", "out")
    assert not {6, 7} & set(ids_at(one_way, _COPY))


_ARANGE = """\
    import torch

    class Batch:
        @property
        def blocks(self):
            for csc in self.subgraphs:
                ids = torch.arange(0, csc.indptr[-1], device=csc.indptr.device)
            return ids

    for mb in loader:
        b = mb.blocks
"""


def test_factory_sized_by_a_device_element() -> None:
    assert 7 in ids_at(_ARANGE, _SYNC)
    assert 7 not in ids_at(_ARANGE.replace("csc.indptr[-1]", "len(csc.indices)"), _SYNC)


_ITEM = """\
    import torch

    def mapping(cu):
        for i in range(cu.shape[0] - 1):
            start = int(cu[i].item())

    class Layer(torch.nn.Module):
        def forward(self, x, cu):
            return mapping(cu)
"""


def test_item_in_a_loop_of_forward_code() -> None:
    assert 5 in ids_at(_ITEM, _SYNC)
    assert 5 not in ids_at(_ITEM.replace("int(cu[i].item())", "cu[i]"), _SYNC)


_FRAMES = """\
    import numpy as np
    import torch

    class Post:
        def forward(self, batch):
            videos = batch.output.cpu().float()
            for video in videos:
                for frame in video.permute(1, 2, 0):
                    out.append((frame.numpy() * 255).astype(np.uint8))

    for r in requests:
        b = Post().forward(r)
"""


def test_host_cast_after_copy_and_per_frame_numpy() -> None:
    assert 6 in ids_at(_FRAMES, "script.cast-before-copy")
    assert 9 in ids_at(_FRAMES, "script.per-sample-python-loop")
    fixed = _FRAMES.replace(".cpu().float()", ".mul(255).to(torch.uint8).cpu()").replace(
        "(frame.numpy() * 255)", "frame.numpy()")
    assert 6 not in ids_at(fixed, "script.cast-before-copy")
    assert 9 not in ids_at(fixed, "script.per-sample-python-loop")


_BUFFER = """\
    import torch

    def to_device(t, device):
        return {k: v.to(device) for k, v in t.items()}

    for step in range(n):
        for t in queue.get():
            t = to_device(t, device=dev)
            replay_buffer.add(**t)
"""


def test_moved_only_to_be_buffered() -> None:
    assert 8 in ids_at(_BUFFER, _COPY)
    used = _BUFFER.replace("replay_buffer.add(**t)", "loss = model(**t)")
    assert 8 not in ids_at(used, _COPY)


_JIT = """\
    import jax

    def maybe_jit(fn, **kw):
        return jax.jit(fn, **kw)

    def collect(n, init):
        def loop_fn(c):
            return c + init
        return maybe_jit(loop_fn, donate_argnums=0)(init)

    for seed in range(runs):
        out = collect(3, x)
"""


def test_jit_wrapper_of_a_closure() -> None:
    assert 9 in ids_at(_JIT, "script.jit-in-loop")
    once = _JIT.replace("    for seed in range(runs):\n        out", "    out")
    assert 9 not in ids_at(once, "script.jit-in-loop")


_TIMER = """\
    import time
    import torch

    class Timer:
        def __enter__(self):
            self.t = time.perf_counter()
        def __exit__(self, *e):
            log.append(time.perf_counter() - self.t)

    model = model.to("cuda")
    for batch in loader:
        with Timer():
            loss = model(batch)
"""


def test_cpu_timer_class_without_sync() -> None:
    assert 8 in ids_at(_TIMER, "script.unsynced-timing")
    synced = _TIMER.replace("            log.append", "            torch.cuda.synchronize()\n"
                            "            log.append")
    assert 9 not in ids_at(synced, "script.unsynced-timing", "info")
    host_block = _TIMER.replace("            loss = model(batch)\n",
                                "            loss = model(batch)\n"
                                "        with Timer():\n            b = next(it)\n")
    assert 8 not in ids_at(host_block, "script.unsynced-timing")  # round 4 says which block


_COLLATE = """\
    import jax
    import jax.numpy as jnp
    import numpy as np

    def shift(ids):
        return jnp.roll(ids, 1, axis=-1)

    class DataCollator:
        def __call__(self, examples):
            labels = np.asarray(examples)
            return shift(labels)

    def data_loader(rng, dataset, bs):
        idx = jax.random.permutation(rng, len(dataset))
        for i in range(len(dataset) // bs):
            sel = idx[bs * i: bs * (i + 1)]
            yield dataset[sel]
"""


def test_jnp_on_the_data_path() -> None:
    assert {11, 17} <= set(ids_at(_COLLATE, _JNP))
    host = _COLLATE.replace("jnp.roll", "np.roll").replace(
        "jax.random.permutation(rng, len(dataset))", "np.random.permutation(len(dataset))")
    assert not {11, 17} & set(ids_at(host, _JNP))


_UNDONE = """\
    import numpy as np
    import torch

    class Validator:
        def match(self, pred):
            correct = np.zeros((4, 10))
            return torch.tensor(correct, device=pred.device)

        def update(self, preds):
            for p in preds:
                tp = self.match(p).cpu().numpy()

        def __call__(self, loader):
            for batch in loader:
                self.update(model(batch))
"""


def test_tensor_copied_back_by_its_caller() -> None:
    assert 7 in ids_at(_UNDONE, _COPY)
    kept = _UNDONE.replace("self.match(p).cpu().numpy()", "self.match(p)")
    assert 7 not in ids_at(kept, _COPY)
