"""Round 21's rules (issue 24): corpus_round20's dev forms (script_check/round21_rules.py);
each form fires and stays silent on the fixed or a near form."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_SYNC = "script.sync-in-step-loop"

_UNUSED_JIT = """\
    import jax

    kernel = make_kernel()
    state = kernel.init(x0)
    step = jax.jit(kernel.step)
    for i in range(100):
        state, _ = kernel.step(key, state)
"""


def test_jit_wrapper_left_unused_while_the_loop_calls_the_original() -> None:
    assert ids_at(_UNUSED_JIT, "script.hot-function-not-compiled") == [7]
    fixed = _UNUSED_JIT.replace("state, _ = kernel.step(", "state, _ = step(")
    assert ids_at(fixed, "script.hot-function-not-compiled") == []


_TIMESTEP_INDEX = """\
    import torch

    class Scheduler:
        def step(self, out, timestep, sample):
            prev = timestep - 1
            a = self.alphas[timestep]
            b = self.alphas[prev] if prev >= 0 else self.one
            return a * out + b * sample

    sched.set_timesteps(4, device="cuda")
    for t in sched.timesteps:
        x = sched.step(unet(x, t), t, x)
"""


def test_attribute_indexed_by_an_element_of_a_device_tensor_a_loop_walks() -> None:
    assert {6, 7} <= set(ids_at(_TIMESTEP_INDEX, _SYNC))
    cpu = _TIMESTEP_INDEX.replace('device="cuda"', 'device="cpu"')
    assert not {6, 7} & set(ids_at(cpu, _SYNC))


_SEARCH = """\
    import torch

    class Sched:
        def index_for(self, t, ts):
            return (ts == t).nonzero()[0].item()

        def noise(self, x, timestep):
            idx = [self.index_for(t, self.ts) for t in timestep]
            return self.sigmas[idx] * x

    for x, y in loader:
        loss = model(sched.noise(x, y)).mean()
"""


def test_comprehension_calling_a_syncing_helper_in_per_batch_code() -> None:
    assert 8 in ids_at(_SEARCH, _SYNC)
    plain = _SEARCH.replace("(ts == t).nonzero()[0].item()", "ts.index(t)")
    assert 8 not in ids_at(plain, _SYNC)


_STATIC_FIELD = """\
    import equinox as eqx

    class Model(eqx.Module):
        w: list
        it: int

    @eqx.filter_jit
    def make_step(m, x):
        return eqx.tree_at(lambda s: s.it, m, m.it + 1)

    for i in range(100):
        m = make_step(m, x)
"""


def test_filter_jit_rewriting_a_python_scalar_field() -> None:
    assert ids_at(_STATIC_FIELD, "script.recompile-shapes") == [12]
    array = _STATIC_FIELD.replace("it: int", "it: jax.Array")
    assert ids_at(array, "script.recompile-shapes") == []


_SEGMENTS = """\
    import torch

    def seg_loss(losses, loss_mask, bounds):
        for i in range(bounds.shape[0] - 1):
            s = slice(bounds[i], bounds[i + 1])
            c = losses[0, s][loss_mask[0, s]]

    for b in loader:
        seg_loss(model(b), b["mask"], b["bounds"])
"""


def test_slices_and_masks_of_received_tensors_in_a_loop() -> None:
    assert {5, 6} <= set(ids_at(_SEGMENTS, _SYNC))
    once = _SEGMENTS.replace("for b in loader:\n        seg_loss", "seg_loss")
    assert not {5, 6} & set(ids_at(once, _SYNC))


_BRANCH = """\
    import torch

    def sample(model, x, sigmas):
        for i in range(len(sigmas) - 1):
            d = model(x, sigmas[i])
            if sigmas[i + 1] == 0:
                x = d
        return x

    sigmas = make_sigmas(30, device="cuda")
    out = sample(net, x0, sigmas)
"""


def test_branch_on_an_element_of_a_device_tensor_passed_in() -> None:
    assert 6 in ids_at(_BRANCH, _SYNC)
    cpu = _BRANCH.replace('device="cuda"', 'device="cpu"')
    assert 6 not in ids_at(cpu, _SYNC)


_CALLBACK = """\
    import functools
    import jax

    def on_eval(n, params, env):
        reset = jax.jit(env.reset)
        state = reset(key)

    train(env=env, policy_params_fn=functools.partial(on_eval, env=env))
"""


def test_jit_built_inside_a_callback() -> None:
    assert ids_at(_CALLBACK, "script.jit-in-loop") == [5]
    once = _CALLBACK.replace("policy_params_fn=functools.partial(on_eval, env=env)",
                             "steps=10")
    assert ids_at(once, "script.jit-in-loop") == []


_TOKENIZE_MAP = """\
    from datasets import load_dataset
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained("m")
    ds = load_dataset("d", split="train")

    def tok(example, processor):
        return processor.apply_chat_template(example["messages"])

    ds = ds.map(tok, fn_kwargs={"processor": processor})
"""


def test_tokenizer_mapped_one_example_at_a_time() -> None:
    assert ids_at(_TOKENIZE_MAP, "script.unbatched-map") == [10]
    batched = _TOKENIZE_MAP.replace('fn_kwargs={"processor": processor})',
                                    'fn_kwargs={"processor": processor}, batched=True)')
    assert ids_at(batched, "script.unbatched-map") == []
