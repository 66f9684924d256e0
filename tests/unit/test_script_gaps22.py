"""Round 22's step 0 (issue 24): corpus_round20's held-out misses written generally
(script_check/gap22_rules.py); each form fires and stays silent on the fixed or a near form.
"""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_SYNC, _COPY = "script.sync-in-step-loop", "script.per-step-copy"

_CLOSED = """\
    import numpy as np
    import jax
    import jax.numpy as jnp

    def make_maps(A, x0):
        basis = np.linalg.qr(A)[0]
        proj = basis.T

        def forward(x):
            return jnp.dot(proj, x - x0)

        return forward

    forward = make_maps(A, x0)
    for _ in range(100):
        y = forward(y)
"""


def test_numpy_array_closed_over_by_returned_jax_function() -> None:
    assert ids_at(_CLOSED, "script.jax-batch-on-host") == [10]
    fixed = _CLOSED.replace("proj = basis.T", "proj = jnp.asarray(basis.T)")
    assert ids_at(fixed, "script.jax-batch-on-host") == []


_BUFFER = """\
    import torch

    class Noiser:
        def add(self, x, t):
            table = self.table.to(device=x.device, dtype=x.dtype)
            return table[t] * x

    noiser = Noiser()
    for x, t in loader:
        y = noiser.add(x, t)
"""


def test_buffer_copied_to_the_device_per_call() -> None:
    assert ids_at(_BUFFER, _COPY) == [5]
    kept = _BUFFER.replace("table = self.table.to(", "self.table = self.table.to(").replace(
        "return table[t]", "return self.table[t]")
    assert ids_at(kept, _COPY) == []
    once = _BUFFER.replace("for x, t in loader:\n        y = noiser.add(x, t)",
                           "y = noiser.add(x, t)")
    assert ids_at(once, _COPY) == []


_INDEXED = """\
    import torch

    class Sampler:
        def __init__(self, betas, device):
            self.acp = torch.cumprod(1 - betas, 0).to(device)

        def step(self, out, t, x):
            prev = t - 10
            a = self.acp[t]
            b = self.acp[prev]
            return a * x + b * out

    def run(model, sampler, x, steps):
        for t in steps:
            x = sampler.step(model(x, t), t, x)
        return x
"""


def test_device_table_indexed_by_a_loop_tensor_element() -> None:
    assert ids_at(_INDEXED, _SYNC) == [9, 10]
    host = _INDEXED.replace("for t in steps:", "for t in range(50):")
    assert ids_at(host, _SYNC) == []


_GRAPHS = """\
    import torch

    model = torch.compile(Net().cuda())
    for mol in molecules:
        g = build_graph(mol, cutoff=5.0)
        e = model(g.pos, g.edge_index)
"""


def test_compiled_model_over_graphs_of_varying_edges() -> None:
    assert ids_at(_GRAPHS, "script.recompile-shapes") == [6]
    marked = _GRAPHS.replace("model = torch.compile(Net().cuda())",
                             "model = torch.compile(Net().cuda(), dynamic=True)")
    assert ids_at(marked, "script.recompile-shapes") == []


_IDS = """\
    import torch

    def leg_error(env, leg_cfg):
        robot = env.scene[leg_cfg.name]
        return robot.data.q[:, leg_cfg.joint_ids] - robot.data.q0[:, leg_cfg.joint_ids]

    for it in range(1000):
        env.step(policy(obs))
        obs = leg_error(env, cfg)
"""


def test_tensor_indexed_by_a_config_list_of_ids_per_step() -> None:
    assert ids_at(_IDS, _COPY) == [5]
    once = _IDS.replace("for it in range(1000):\n        env.step(policy(obs))\n        obs", "obs")
    assert ids_at(once, _COPY) == []


_VMAP = """\
    import jax

    fast_step = jax.vmap(physics_step, in_axes=(None, 0))
    for i in range(1000):
        state = fast_step(params, state)
"""


def test_vmap_wrapper_never_jitted_in_a_loop() -> None:
    assert ids_at(_VMAP, "script.hot-function-not-compiled") == [3]
    jitted = _VMAP.replace("jax.vmap(physics_step", "jax.jit(jax.vmap(physics_step").replace(
        "(None, 0))", "(None, 0)))")
    assert ids_at(jitted, "script.hot-function-not-compiled") == []


_ROWS = """\
    import torch

    def grad_of(y, x, v):
        return torch.autograd.grad(y, [x], grad_outputs=v, create_graph=True)[0]

    def rows(y, x):
        out = torch.zeros(y.shape[0], x.shape[0])
        for i in range(y.shape[0]):
            v = torch.zeros_like(y)
            v[i] = 1
            out[i] = grad_of(y, x, v)
        return out

    for epoch in range(10):
        loss = rows(net(x), x).sum()
"""


def test_jacobian_built_row_by_row_per_step() -> None:
    assert ids_at(_ROWS, "script.per-sample-python-loop") == [8]
    once = _ROWS.replace("for epoch in range(10):\n        loss", "loss")
    assert ids_at(once, "script.per-sample-python-loop") == []


_TRAINER = """\
    from transformers import Trainer

    def ratio(a, b):
        return a.sum().item() / b.sum().item()

    class MyTrainer(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False):
            out = model(**inputs)
            self.stats.append(ratio(out.logits, inputs["labels"]))
            n = self.accelerator.gather_for_metrics(out.loss).mean().item()
            return out.loss
"""


def test_item_in_trainer_step_code() -> None:
    assert ids_at(_TRAINER, _SYNC) == [4, 10]
    plain = _TRAINER.replace("class MyTrainer(Trainer):", "class MyTrainer:")
    assert ids_at(plain, _SYNC) == []
    gated = _TRAINER.replace("            n = self.accelerator",
                             "            if self.state.global_step % 50 == 0:\n"
                             "                n = self.accelerator")
    assert ids_at(gated, _SYNC) == [4]


_NORM = """\
    import torch

    def sample(model, x, steps, cap):
        for t in steps:
            out = model(x, t)
            size = torch.linalg.vector_norm(out)
            limit = size * cap
            if torch.linalg.vector_norm(x) > limit:
                out = out * 0.5
            x = x + out
        return x
"""


def test_if_on_a_device_norm_in_a_loop() -> None:
    assert ids_at(_NORM, _SYNC) == [8]
    host = _NORM.replace("size = torch.linalg.vector_norm(out)", "size = 1.0")
    assert ids_at(host, _SYNC) == []


_FREQS = """\
    import torch

    def embed(t, dim):
        f = torch.exp(torch.arange(dim, dtype=torch.float32) / dim).to(device=t.device)
        return t[:, None] * f

    class Net(torch.nn.Module):
        def forward(self, x, t):
            return self.body(x + embed(t, 64))

    net = Net().cuda()
    for x, t in loader:
        loss = train_step(net, x, t)
"""


def test_factory_built_on_cpu_then_moved_in_a_forward_helper() -> None:
    assert ids_at(_FREQS, "script.host-built-in-forward") == [4]
    fixed = _FREQS.replace("torch.arange(dim, dtype=torch.float32)",
                           "torch.arange(dim, dtype=torch.float32, device=t.device)")
    assert ids_at(fixed, "script.host-built-in-forward") == []
