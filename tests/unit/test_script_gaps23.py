"""Round 23's step 0 (issue 24): corpus_round21's held-out misses written generally
(script_check/gap23_rules.py); each form fires and stays silent on the fixed or a near form.
"""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_SYNC = "script.sync-in-step-loop"

_RUNNER = """\
    import torch

    class ModelRunner:
        def execute_model(self, batch):
            ids = self.sampler(self.model(batch))
            return ids.tolist()

        def report(self, batch):
            ids = self.sampler(self.model(batch))
            return ids.tolist()
"""


def test_host_read_in_a_method_a_driver_calls_per_step() -> None:
    # no loop in the file calls execute_model: its name says a driver does, per step
    assert ids_at(_RUNNER, _SYNC) == [6]
    host = _RUNNER.replace("ids = self.sampler(self.model(batch))\n            return ids."
                           "tolist()\n\n        def report",
                           "ids = torch.tensor(batch)\n            return ids.tolist()\n\n"
                           "        def report", 1)
    assert ids_at(host, _SYNC) == []


_SCHED = """\
    import torch

    class SchedulerMixin:
        def prepare_sync_batch(self, info):
            n = info[:, 0].cpu()
            top = info[:, 1].max().item()
            return n, top, self.helper(info)

        def helper(self, info):
            return int(info.sum().item())

        def dump(self, info):
            return info.tolist()
"""


def test_reads_in_a_batch_method_and_its_callee() -> None:
    assert ids_at(_SCHED, _SYNC) == [5, 6, 10]
    logged = _SCHED.replace("return int(info.sum().item())",
                            "if self.global_step % self.logging_steps == 0:\n"
                            "                return int(info.sum().item())")
    assert ids_at(logged, _SYNC) == [5, 6]


_FREE = """\
    import torch

    def gather(values, lengths):
        return torch.split_with_sizes(values, lengths.tolist())

    for batch in batches:
        out = gather(batch.values, batch.lengths)
"""


def test_read_in_a_function_a_loop_calls() -> None:
    assert ids_at(_FREE, _SYNC) == [4]
    once = _FREE.replace("for batch in batches:\n        out = gather", "out = gather")
    assert ids_at(once, _SYNC) == []


_WORKER = """\
    import gc
    from contextlib import contextmanager
    import torch

    class PolicyWorker:
        @contextmanager
        def use_reference_model(self):
            self.swap_in()
            torch.cuda.empty_cache()
            yield

        def get_reference_policy_logprobs(self, data):
            with self.use_reference_model():
                return self.get_logprobs(data)

        def prepare_for_training(self):
            torch.cuda.empty_cache()

        def update_weights_from_ipc_handles(self, handles):
            self.model.load_weights(handles)
            torch.cuda.synchronize()

        def shutdown(self):
            torch.cuda.empty_cache()
"""


def test_cache_release_and_barrier_in_rl_worker_step_methods() -> None:
    assert ids_at(_WORKER, "script.empty-cache-in-loop") == [9, 17]
    assert ids_at(_WORKER, _SYNC) == [21]
    gated = _WORKER.replace("        def prepare_for_training(self):\n            torch.cuda."
                            "empty_cache()",
                            "        def prepare_for_training(self):\n            if self."
                            "empty_unused_memory_level >= 1:\n                torch.cuda."
                            "empty_cache()")
    assert ids_at(gated, "script.empty-cache-in-loop") == [9]
    timed = _WORKER.replace("torch.cuda.synchronize()",
                            "torch.cuda.synchronize()\n            t = time.perf_counter()")
    assert ids_at(timed, _SYNC) == []


_CLIP = """\
    import torch

    def clip(params, max_norm):
        return torch.nn.utils.clip_grad_norm_(params, max_norm, error_if_nonfinite=True)

    for batch in loader:
        loss = model(batch).sum()
        loss.backward()
        clip(model.parameters(), 1.0)
        opt.step()
"""


def test_nonfinite_check_of_grad_clipping_per_step() -> None:
    assert ids_at(_CLIP, _SYNC) == [4]
    off = _CLIP.replace(", error_if_nonfinite=True", "")
    assert ids_at(off, _SYNC) == []


_NESTED = """\
    from functools import partial
    import jax
    import jax.numpy as jnp

    @partial(jax.jit, static_argnums=(0,))
    def weights(L):
        z = jnp.ones(L)

        def body(arg):
            p = 1.0
            for j in range(1, L + 1):
                p = p * arg / j
            return p

        return jax.lax.while_loop(lambda a: a.max() > 1, body, z)
"""


def test_range_recursion_unrolled_in_a_function_nested_in_jit() -> None:
    assert ids_at(_NESTED, "script.python-loop-in-jit") == [11]
    fixed = _NESTED.replace("for j in range(1, L + 1):", "for j in range(1, 4):")
    assert ids_at(fixed, "script.python-loop-in-jit") == []
