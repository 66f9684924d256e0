"""Round 19's rules (issue 24): corpus_round18's dev forms (script_check/round19_rules.py);
each form fires and stays silent on the fixed or a near form."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_SYNC = "script.sync-in-step-loop"

_ROPE = """\
    import torch

    def rope(freqs):
        return freqs.cos().repeat_interleave(2, dim=1)

    class Embed(torch.nn.Module):
        def forward(self, ids):
            return rope(ids)

    embed = Embed()
    for t in steps:
        out = embed(x)
"""


def test_repeat_interleave_followed_through_calls() -> None:
    assert 4 in ids_at(_ROPE, _SYNC)
    sized = _ROPE.replace("dim=1)", "dim=1, output_size=n)")
    assert 4 not in ids_at(sized, _SYNC)
    once = _ROPE.replace("    for t in steps:\n        out = embed(x)\n", "    out = embed(x)\n")
    assert 4 not in ids_at(once, _SYNC)


_NONZERO = """\
    import torch

    class Sched:
        def step(self, t):
            i = (self.timesteps == t).nonzero()
            return self.sigmas[i]

    sched = Sched()
    for t in ts:
        y = sched.step(t)
"""


def test_nonzero_in_a_method_a_loop_calls() -> None:
    assert 5 in ids_at(_NONZERO, _SYNC)
    assert 5 not in ids_at(_NONZERO.replace("    for t in ts:\n        y", "    y"), _SYNC)


_BENCH = """\
    import torch

    def bench(fn, ev):
        for i in range(n):
            torch.cuda.synchronize()
            ev[i].record()
            fn()
        torch.cuda.synchronize()
"""


def test_synchronize_in_an_event_timing_loop() -> None:
    assert 5 in ids_at(_BENCH, _SYNC)
    assert 8 not in ids_at(_BENCH, _SYNC)
    assert 5 not in ids_at(_BENCH.replace("ev[i].record()", "fn()"), _SYNC)


_UNIQUE = """\
    import torch

    def loss_fn(p, labels):
        out = []
        for c in labels.unique():
            fg = labels == c
            if fg.sum() == 0:
                continue
            out.append(p[:, c])
        return out

    for x, y in loader:
        loss = loss_fn(model(x), y)
"""


def test_loop_over_unique_its_index_and_reduction_branch() -> None:
    assert {5, 7, 9} <= set(ids_at(_UNIQUE, _SYNC))
    once = _UNIQUE.replace("    for x, y in loader:\n        loss", "    loss")
    assert not {5, 9} & set(ids_at(once, _SYNC))
    plain = _UNIQUE.replace("labels.unique()", "classes").replace("fg.sum() == 0", "n == 0")
    assert not {5, 7, 9} & set(ids_at(plain, _SYNC))


_SPLIT = """\
    import torch

    def loss(lp, mask, lens):
        chunks = zip(lp.split(lens), mask.split(lens))
        for a, m in chunks:
            total = a.sum()
        return total

    for b in loader:
        l = loss(model(b), b, lens)
"""


def test_loop_over_split_pieces() -> None:
    assert ids_at(_SPLIT, "script.per-sample-python-loop") == [5]
    plain = _SPLIT.replace("zip(lp.split(lens), mask.split(lens))", "zip(lp, mask)")
    assert ids_at(plain, "script.per-sample-python-loop") == []


_EMA = """\
    import torch

    def update(ema, model):
        for name, v in ema.items():
            v.mul_(d).add_(model[name], alpha=1 - d)
"""


def test_ema_mul_then_add_per_tensor() -> None:
    assert ids_at(_EMA, "script.ema-out-of-place") == [5]
    lerp = _EMA.replace("v.mul_(d).add_(model[name], alpha=1 - d)", "v.lerp_(model[name], 1 - d)")
    assert ids_at(lerp, "script.ema-out-of-place") == []


_SUMMARY = """\
    import tensorflow as tf

    class CB(tf.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            tf.summary.scalar("loss", logs["loss"], step=batch)
"""


def test_summary_in_a_batch_hook() -> None:
    assert ids_at(_SUMMARY, "script.summary-every-step") == [5]
    epoch = _SUMMARY.replace("on_train_batch_end", "on_epoch_end")
    assert ids_at(epoch, "script.summary-every-step") == []


_MAP = """\
    import tensorflow as tf

    def parse(r):
        return tf.io.parse_single_example(r, spec)

    ds = tf.data.TFRecordDataset(files)
    ds = ds.map(map_func=parse)
    ds = ds.padded_batch(32)
"""


def test_parse_map_by_keyword_before_batch() -> None:
    assert 7 in ids_at(_MAP, "script.unbatched-map")
    after = _MAP.replace("    ds = ds.padded_batch(32)\n", "")
    assert 7 not in ids_at(after, "script.unbatched-map")


_SCALER = """\
    import torch
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    policy = MixedPrecision(param_dtype=torch.bfloat16)
    scaler = ShardedGradScaler()
"""


def test_sharded_scaler_with_bf16_only() -> None:
    assert 5 in ids_at(_SCALER, "script.gradscaler-bf16")
    fp16 = _SCALER.replace("bfloat16", "float16")
    assert 5 not in ids_at(fp16, "script.gradscaler-bf16")


_LIST = """\
    import torch

    class Runner:
        def build(self, n):
            self.loc[:n] = torch.tensor([0] + self.lens[:n], device=self.device)

    runner = Runner()
    while busy():
        runner.build(k)
"""


def test_device_tensor_from_a_list_expression_per_iteration() -> None:
    assert 5 in ids_at(_LIST, "script.tensor-from-python-list")
    once = _LIST.replace("    while busy():\n        runner.build(k)\n", "    runner.build(k)\n")
    assert 5 not in ids_at(once, "script.tensor-from-python-list")


_NPIDX = """\
    import numpy as np
    import torch

    class Buffer:
        def batches(self, n):
            for _ in range(n):
                idx = np.random.choice(self.size, size=64)
                yield self.states[idx].to(self.device)
"""


def test_device_tensor_indexed_by_numpy_indices() -> None:
    assert ids_at(_NPIDX, "script.per-step-copy") == [8]
    dev = _NPIDX.replace("np.random.choice(self.size, size=64)",
                         "torch.randint(self.size, (64,), device=self.device)")
    assert ids_at(dev, "script.per-step-copy") == []


_PERPARAM = """\
    import torch

    class Opt(torch.optim.Optimizer):
        def __init__(self, params):
            self._step_c = torch.compile(self._step_one)

        def step(self):
            for group in self.param_groups:
                for p in group["params"]:
                    self._step_c(p, group)
"""


def test_compiled_function_called_per_parameter() -> None:
    assert ids_at(_PERPARAM, "script.recompile-shapes") == [10]
    plain = _PERPARAM.replace("torch.compile(self._step_one)", "self._step_one")
    assert ids_at(plain, "script.recompile-shapes") == []
