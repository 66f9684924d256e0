"""Round 18's step 0 (issue 24): corpus_round16's held-out misses written generally
(script_check/gap18_rules.py); each form fires and stays silent on the fixed or a near form.
"""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_COMPILED = """\
    import torch

    class Embeddings(torch.nn.Module):
        def forward(self, ids):
            if self.cache is not None and ids.is_inference():
                self.cache = None
            print(ids.shape)
            if ids.sum() > 0:
                ids = ids + 1
            return self.emb(ids)

    model = torch.compile(BigModel().cuda())
    for batch in loader:
        model(batch).sum().backward()
"""


def test_graph_breaks_in_a_compiled_models_parts() -> None:
    assert ids_at(_COMPILED, "script.graph-break-item") == [5, 7, 8]
    fixed = (_COMPILED.replace(" and ids.is_inference()", "")
             .replace("            print(ids.shape)\n", "")
             .replace("if ids.sum() > 0:", "if self.shift:"))
    assert ids_at(fixed, "script.graph-break-item") == []
    eager = _COMPILED.replace("torch.compile(BigModel().cuda())", "BigModel().cuda()")
    assert ids_at(eager, "script.graph-break-item") == []


def test_graph_break_in_a_compiled_function() -> None:
    src = """\
        import torch

        @torch.compile
        def loss_fn(x, y):
            if torch.is_inference(x):
                return x
            return ((x - y) ** 2).mean()
    """
    assert ids_at(src, "script.graph-break-item") == [5]
    assert ids_at(src.replace("        @torch.compile\n", ""), "script.graph-break-item") == []


_HOST = """\
    import jax
    import numpy as np

    data = [np.load(f) for f in files]

    @jax.jit
    def loglik(params, events):
        return sum(model(params, e) for e in events)

    for step in range(n):
        params = propose(params)
        ll = loglik(params, data)
"""


def test_host_arrays_handed_to_a_jitted_function_every_iteration() -> None:
    assert ids_at(_HOST, "script.jax-batch-on-host") == [12]
    placed = _HOST.replace("    for step", "    data = jax.device_put(data)\n    for step")
    assert ids_at(placed, "script.jax-batch-on-host") == []
    per_step = _HOST.replace("        ll = loglik", "        data = np.load(next_file())\n"
                                                 "        ll = loglik")
    assert ids_at(per_step, "script.jax-batch-on-host") == []


_INLINE = """\
    import jax

    def step_fn(state, dt):
        return state + dt

    def integrate(state, n):
        def body(carry, _):
            nxt = jax.jit(step_fn)(carry, 0.1)
            return nxt, nxt
        return jax.lax.scan(body, state, None, length=n)

    @jax.jit
    def run(state):
        return integrate(state, 720)
"""


def test_inline_jit_inside_traced_code() -> None:
    assert ids_at(_INLINE, "script.jit-in-loop") == [8]
    assert ids_at(_INLINE.replace("jax.jit(step_fn)(carry, 0.1)", "step_fn(carry, 0.1)"),
                  "script.jit-in-loop") == []
    untraced = """\
        import jax

        def evaluate(x):
            return jax.jit(model)(x)
    """
    assert ids_at(untraced, "script.jit-in-loop") == []


def test_lightning_strategy_string_with_find_unused() -> None:
    src = """\
        from pytorch_lightning import Trainer

        trainer = Trainer(accelerator="gpu", devices=8,
                          strategy="ddp_find_unused_parameters_true")
    """
    assert ids_at(src, "script.ddp-find-unused-parameters") == [3]
    assert ids_at(src.replace("_find_unused_parameters_true", ""),
                  "script.ddp-find-unused-parameters") == []


_NESTED_TF = """\
    import tensorflow as tf

    def reshape_all(example, desc):
        @tf.function
        def _reshape(t, shape):
            return tf.reshape(t, shape)

        for name, d in desc.items():
            example[name] = _reshape(example[name], d["shape"])
        return example

    for problem, files in problems.items():
        ds = tf.data.TFRecordDataset(files).map(lambda ex: reshape_all(ex, descs[problem]))
"""


def test_tf_function_defined_in_a_function_called_per_map_or_loop() -> None:
    assert ids_at(_NESTED_TF, "script.jit-in-loop") == [5]
    once = _NESTED_TF.split("    for problem")[0] + "    out = reshape_all(ex0, desc0)\n"
    assert ids_at(once, "script.jit-in-loop") == []
    factory = """\
        import tensorflow as tf

        def make_step(model):
            @tf.function
            def step(x):
                return model(x)
            return step

        step = make_step(model)
        for epoch in range(3):
            step(x)
    """
    assert ids_at(factory, "script.jit-in-loop") == []  # returned, not called: built once


_PARSE = """\
    import tensorflow as tf

    def parse(record):
        parsed = tf.io.parse_single_example(record, FEATURES)
        return parsed["image"], parsed["label"]

    def create(files, batch_size=32):
        ds = tf.data.TFRecordDataset(files)
        ds = ds.map(parse)
        ds = ds.batch(batch_size)
        return ds
"""


def test_single_example_parse_mapped_before_batch() -> None:
    assert ids_at(_PARSE, "script.unbatched-map") == [9]
    chained = _PARSE.replace("        ds = ds.map(parse)\n        ds = ds.batch(batch_size)\n",
                             "        ds = ds.map(parse).batch(batch_size)\n")
    assert ids_at(chained, "script.unbatched-map") == [9]
    batched_first = _PARSE.replace(
        "        ds = ds.map(parse)\n        ds = ds.batch(batch_size)\n",
        "        ds = ds.batch(batch_size)\n        ds = ds.map(parse)\n")
    assert ids_at(batched_first, "script.unbatched-map") == []
    augment = _PARSE.replace("tf.io.parse_single_example(record, FEATURES)",
                             "augment(record)")
    assert ids_at(augment, "script.unbatched-map") == []


_MASK_HELPER = """\
    import torch

    def merge(input_ids, embeds, mm, placeholder):
        is_mm = input_ids == placeholder
        embeds[is_mm] = mm.to(embeds.dtype)
        return embeds

    class Model(torch.nn.Module):
        def forward(self, input_ids, pixels):
            embeds = self.embed(input_ids)
            return self.lm(merge(input_ids, embeds, self.vision(pixels), self.token_id))

    model = Model().cuda()
    for ids, px in requests:
        out = model(ids.cuda(), px.cuda())
"""


def test_boolean_mask_assignment_in_a_helper_every_forward_runs() -> None:
    assert ids_at(_MASK_HELPER, "script.sync-in-step-loop") == [5]
    fixed = _MASK_HELPER.replace("embeds[is_mm] = mm.to(embeds.dtype)",
                                 "embeds = torch.where(is_mm[..., None], mm, embeds)")
    assert ids_at(fixed, "script.sync-in-step-loop") == []
    unused = _MASK_HELPER.replace("self.lm(merge(input_ids, embeds, self.vision(pixels), "
                                  "self.token_id))", "self.lm(embeds)")
    assert ids_at(unused, "script.sync-in-step-loop") == []


_ACCUM = """\
    import jax
    import jax.numpy as jnp

    @jax.jit
    def train_step(params, batch):
        grads = jax.tree_util.tree_map(jnp.zeros_like, params)
        for i in range(ACCUM_STEPS):
            micro = jax.tree_util.tree_map(lambda x: x[i], batch)
            g = jax.grad(loss_fn)(params, micro)
            grads = jax.tree_util.tree_map(jnp.add, grads, g)
        return grads
"""


def test_gradient_accumulation_loop_inside_jit() -> None:
    assert ids_at(_ACCUM, "script.python-loop-in-jit") == [7]
    no_grad = _ACCUM.replace("jax.grad(loss_fn)(params, micro)", "loss_fn(params, micro)")
    assert ids_at(no_grad, "script.python-loop-in-jit") == []
    eager = _ACCUM.replace("    @jax.jit\n", "")
    assert ids_at(eager, "script.python-loop-in-jit") == []
