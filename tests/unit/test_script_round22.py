"""Round 22's rules (issue 24): corpus_round21's dev forms (script_check/round22_rules.py);
each form fires and stays silent on the fixed or a near form."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_SYNC = "script.sync-in-step-loop"
_H2D = "script.blocking-h2d-copy"

_LOADER_COPY = """\
    import torch

    def bench(device, model, data_loader):
        model = model.to(device)
        for data, _ in data_loader:
            data = data.to(device)
            model(data)
"""


def test_blocking_copy_of_each_loader_batch() -> None:
    assert 6 in ids_at(_LOADER_COPY, _H2D)
    fixed = _LOADER_COPY.replace("data.to(device)", "data.to(device, non_blocking=True)")
    assert 6 not in ids_at(fixed, _H2D)


_QUEUED_LISTS = """\
    import jax
    import jax.numpy as jnp

    def prepare(obs, acts):
        return jnp.asarray(obs), jnp.asarray(acts)

    def actor(q):
        obs, acts = [], []
        for _ in range(8):
            o, a = env_step()
            obs.append(o)
            acts.append(a)
        q.put((obs, acts))

    def learner(q):
        prep = jax.jit(prepare)
        while True:
            obs, acts = q.get()
            b = prep(obs, acts)
"""


def test_jitted_function_fed_queued_lists_of_arrays() -> None:
    assert ids_at(_QUEUED_LISTS, "script.per-step-copy") == [19]
    stacked = _QUEUED_LISTS.replace("q.put((obs, acts))", "q.put(stack(obs, acts))")
    assert ids_at(stacked, "script.per-step-copy") == []


_SIDE_STREAM = """\
    import torch

    class Opt:
        def average(self, t):
            torch.cuda.synchronize()
            with torch.cuda.stream(self.s):
                reduce(t)
"""


def test_device_barrier_before_a_side_stream() -> None:
    assert 5 in ids_at(_SIDE_STREAM, _SYNC)
    fixed = _SIDE_STREAM.replace("torch.cuda.synchronize()",
                                 "self.s.wait_stream(torch.cuda.current_stream())")
    assert ids_at(fixed, _SYNC) == []


_PER_ITEM_BARRIER = """\
    import torch

    class Conn:
        def one(self, obj):
            copy(obj)
            self.stream.synchronize()

        def many(self, objs):
            for obj in objs:
                self.one(obj)
"""


def test_barrier_in_a_method_called_per_item() -> None:
    assert 6 in ids_at(_PER_ITEM_BARRIER, _SYNC)
    once = _PER_ITEM_BARRIER.replace("            for obj in objs:\n                self.one(obj)",
                                     "            self.one(objs)")
    assert 6 not in ids_at(once, _SYNC)


_PIN_PARAM = """\
    import torch
    from torch.utils.data import DataLoader

    def prepare(ds, pin_memory=False):
        return DataLoader(ds, batch_size=8, pin_memory=pin_memory)

    def main(ds, pin_memory=False):
        for x in prepare(ds, pin_memory=pin_memory):
            x.to("cuda")
"""


def test_pin_memory_parameter_left_false_by_every_caller() -> None:
    assert 5 in ids_at(_PIN_PARAM, "script.dataloader-no-pin-memory")
    on = _PIN_PARAM.replace("prepare(ds, pin_memory=pin_memory)", "prepare(ds, pin_memory=True)")
    assert 5 not in ids_at(on, "script.dataloader-no-pin-memory")


_LIST_TENSOR = """\
    import torch

    class Worker:
        def step(self, batch):
            out = self.model(batch)
            lens = [len(r) for r in batch.reqs]
            t = torch.tensor(lens, dtype=torch.int32, device="cuda")
            return out, t

    w = Worker()
    while True:
        w.step(next_batch())
"""


def test_device_tensor_from_a_python_list_per_batch() -> None:
    assert 7 in ids_at(_LIST_TENSOR, _H2D)
    host = _LIST_TENSOR.replace('device="cuda"', 'device="cpu"')
    assert 7 not in ids_at(host, _H2D)


_MICRO = """\
    import torch

    class FSDPEngine:
        def fwd_bwd(self, data, n):
            for mb in data.split(n):
                loss = self.module(mb).mean()
                loss.backward()

    engine = FSDPEngine()
    for batch in batches:
        engine.fwd_bwd(batch, 4)
        opt.step()
"""


def test_backward_per_micro_batch_without_no_sync() -> None:
    assert ids_at(_MICRO, "script.ddp-no-sync") == [7]
    synced = _MICRO.replace("                loss = self.module(mb).mean()\n"
                            "                loss.backward()",
                            "                with self.module.no_sync():\n"
                            "                    loss = self.module(mb).mean()\n"
                            "                    loss.backward()")
    assert 8 not in ids_at(synced, "script.ddp-no-sync")  # (older rules ask for the last one
    # to sync; this form is about the backward)


_BARE_COMPILE = """\
    import torch

    @torch.compile
    def sample(probs, n):
        return probs.argmax(dim=1)

    class Sampler(torch.nn.Module):
        def run(self, target, draft):
            b, k, v = draft.shape
            probs = (target - draft).reshape(b * k, v)
            return sample(probs, 1)

    s = Sampler()
    for target, draft in steps():
        s.run(target, draft)
"""


def test_bare_compile_fed_batch_shaped_tensors() -> None:
    assert 11 in ids_at(_BARE_COMPILE, "script.recompile-shapes")
    dynamic = _BARE_COMPILE.replace("@torch.compile\n", "@torch.compile(dynamic=True)\n")
    assert 11 not in ids_at(dynamic, "script.recompile-shapes")
