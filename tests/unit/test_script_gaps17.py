"""Round 17's step 0 (issue 24): corpus_round15's held-out misses written generally
(script_check/gap17_rules.py, jax_rules._grad_compiled); each form fires and stays silent on
the fixed or a near form.
"""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_MONITOR = """\
    import torch

    class Monitor:
        def check(self):
            torch.cuda.synchronize()
            return torch.cuda.memory_reserved(0)

    monitor = Monitor()
    for batch in loader:
        loss = model(batch.cuda()).sum()
        loss.backward()
        optimizer.step()
        monitor.check()
"""


def test_barrier_in_a_helper_method_the_step_loop_calls() -> None:
    assert 5 in ids_at(_MONITOR, "script.sync-in-step-loop")
    gone = _MONITOR.replace("            torch.cuda.synchronize()\n", "")
    assert ids_at(gone, "script.sync-in-step-loop") == []
    no_step = _MONITOR.replace("        optimizer.step()\n", "").replace(
        "        loss.backward()\n", "")
    assert 5 not in ids_at(no_step, "script.sync-in-step-loop")
    timer = _MONITOR.replace("return torch.cuda.memory_reserved(0)", "return time.time()")
    assert 5 not in ids_at(timer, "script.sync-in-step-loop")


_HANDED = """\
    import torch

    class Backend:
        def prepare(self, batch):
            total = batch.prefix_lens.sum().item()
            self.buf = torch.empty(total, device="cuda")

        def split(self, inp, out):
            grid = inp["grid"]
            sizes = grid.prod(-1) // 4
            return out.split(sizes.tolist())

    backend = Backend()
    for batch in batches:
        backend.prepare(batch)
        backend.split(batch, model(batch))
"""


def test_host_reads_of_what_the_loop_hands_a_method() -> None:
    assert ids_at(_HANDED, "script.sync-in-step-loop") == [5, 11]
    lists = _HANDED.replace("batch.prefix_lens.sum().item()", "sum(batch.prefix_lens_cpu)") \
        .replace("sizes.tolist()", "inp['sizes_cpu']")
    assert ids_at(lists, "script.sync-in-step-loop") == []
    once = _HANDED.replace("    for batch in batches:\n        backend.prepare(batch)\n"
                           "        backend.split(batch, model(batch))\n",
                           "    backend.prepare(first)\n")
    assert ids_at(once, "script.sync-in-step-loop") == []


_INDEX = """\
    import torch

    class Encoder(torch.nn.Module):
        def forward(self, x):
            idx = torch.argsort(self.window_index(x))
            h = self.blocks(x)
            return h[idx.to(h.device), :]
"""


def test_blocking_copy_inside_an_index() -> None:
    assert ids_at(_INDEX, "script.blocking-h2d-copy") == [7]
    overlapped = _INDEX.replace("idx.to(h.device)", "idx.to(h.device, non_blocking=True)")
    assert ids_at(overlapped, "script.blocking-h2d-copy") == []


_LOSS = """\
    import torch

    class PairLoss(torch.nn.Module):
        def forward(self, feats, labels):
            sim = feats @ feats.t()
            out = []
            for i in range(feats.size(0)):
                out.append(sim[i][labels == labels[i]].sum())
            return torch.stack(out).mean()
"""


def test_per_sample_loop_indexing_values_computed_from_the_inputs() -> None:
    assert ids_at(_LOSS, "script.per-sample-python-loop") == [7]
    heads = _LOSS.replace("for i in range(feats.size(0)):", "for i in range(self.heads):")
    assert ids_at(heads, "script.per-sample-python-loop") == []


_PMAP = """\
    import jax

    pgrad = jax.pmap(jax.grad(loss_fn), axis_name="batch")

    def train_step(params, x, y):
        grads = pgrad(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)

    for x, y in batches:
        params = train_step(params, x, y)
"""


def test_update_outside_pmap_reported_at_the_update() -> None:
    assert ids_at(_PMAP, "script.jax-update-outside-jit") == [7]
    plain = _PMAP.replace("grads = pgrad(params, x, y)", "grads = jax.grad(loss_fn)(params, x, y)")
    assert 7 not in ids_at(plain, "script.jax-update-outside-jit")
