"""The script check's ninth round (issue 24, corpus_round8): rule families, each with a
case that must stay silent -- attributes a framework does not have (from the shipped names
snapshot), per-item framework calls in data-sized loops, hot functions left uncompiled."""

from __future__ import annotations

import json
import textwrap

from devicebench.script_check.name_rules import closest, framework_names, missing_attribute
from tests.unit.test_script_program_analysis import ids_at


def test_names_snapshot_records_versions_and_modules() -> None:
    versions, modules = framework_names()
    assert set(versions) >= {"torch", "tensorflow", "jax"}
    assert all(v[:1].isdigit() for v in versions.values())
    assert "benchmark" in modules["torch.backends.cudnn"]
    assert "set_memory_growth" in modules["tensorflow.config.experimental"]


def test_misspelt_flag_assigned_is_a_warning_with_the_near_name() -> None:
    source = """\
        import torch

        torch.backends.cudnn.benckmark = True
        torch.backends.cudnn.benchmark = True
    """
    assert ids_at(source, "script.attribute-does-not-exist", "warning") == [3]
    assert closest("torch.backends.cudnn", "benckmark") == "benchmark"
    aliased = """\
        import torch.backends.cudnn as cudnn
        from torch.backends import cudnn as c2

        cudnn.benchmarks = True
        c2.deterministic = True
    """
    assert ids_at(aliased, "script.attribute-does-not-exist", "warning") == [4]


def test_reads_of_missing_names_are_info_and_open_modules_are_not_judged() -> None:
    source = """\
        import tensorflow as tf

        gpus = tf.config.experimental.list_physical_device("GPU")
        ok = tf.config.experimental.list_physical_devices("GPU")
    """
    assert ids_at(source, "script.attribute-does-not-exist", "info") == [3]
    assert missing_attribute("jax.numpy.not_a_function") is None  # jax.numpy has __getattr__
    assert missing_attribute("jax.numpy.not_a_function", store=True) is not None
    # a framework the script does not import is not judged, whatever the name
    assert ids_at("tf = object()\ntf.config.foo = 1\n", "script.attribute-does-not-exist") == []
    # a local object that happens to share a module's last name is not the module
    local = "import torch\ncudnn = object()\ncudnn.benckmark = True\n"
    assert ids_at(local, "script.attribute-does-not-exist") == []


def test_snapshot_file_is_what_the_generator_writes() -> None:
    from pathlib import Path

    import devicebench.script_check.name_rules as nr

    raw = json.loads(Path(nr._DATA).read_text())
    assert set(raw) == {"frameworks", "modules", "open"}
    assert all(m.split(".")[0] in raw["frameworks"] for m in raw["modules"])


def test_model_call_per_row_of_an_array_and_the_batched_loop_is_silent() -> None:
    source = """\
        import numpy as np
        import torch

        x = np.load("x.npy")
        model = Net().cuda()
        for i in range(len(x)):
            out = model(torch.from_numpy(x[i]).cuda())
    """
    assert ids_at(source, "script.per-item-call", "warning") == [7]
    batched = """\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, batch_size=256)
        model = Net().cuda()
        for i in range(len(loader)):
            out = model(next(it).cuda())
        for xb in loader:
            out = model(xb.cuda())
    """
    assert ids_at(batched, "script.per-item-call") == []  # batches, not items
    steps = """\
        import torch

        model = Net().cuda()
        for step in range(1000):
            out = model(torch.randn(64, 10).cuda())
    """
    assert ids_at(steps, "script.per-item-call") == []  # a step loop: not data-sized


def test_predict_per_video_frame_in_a_method_the_loop_calls() -> None:
    source = """\
        import cv2

        class Detector:
            def detect(self, img):
                return self.net.predict(img[None])

        det = Detector()
        cap = cv2.VideoCapture("v.mp4")
        while True:
            ok, frame = cap.read()
            if not ok:
                break
            faces = det.detect(frame)
    """
    assert ids_at(source, "script.per-item-call", "warning") == [5]
    once = source.replace("cap.read()", "read_all()")
    assert ids_at(once, "script.per-item-call") == []  # not a capture: nothing per frame


def test_device_array_indexed_by_the_loop_variable() -> None:
    source = """\
        import jax.numpy as jnp
        import numpy as np

        traj = jnp.cumsum(jnp.ones(1000))
        values = [traj[i] for i in range(1000)]
        host = np.asarray(traj)
        fast = [host[i] for i in range(1000)]
        first = traj[0]
    """
    assert ids_at(source, "script.per-item-call", "warning") == [5]


def test_jax_op_chain_called_per_step_uncompiled_and_jitted_is_silent() -> None:
    source = """\
        import jax
        import jax.numpy as jnp

        def loss(w, x, y):
            h = jnp.tanh(x @ w)
            p = jax.nn.softmax(h)
            return -jnp.mean(jnp.log(jnp.take_along_axis(p, y, axis=-1)))

        for step in range(1000):
            value = loss(w, xs[step], ys[step])
    """
    assert ids_at(source, "script.hot-function-not-compiled", "warning") == [4]
    source = textwrap.dedent(source)
    jitted = source.replace("def loss", "@jax.jit\ndef loss")
    assert ids_at(jitted, "script.hot-function-not-compiled") == []
    wrapped = source + "loss = jax.jit(loss)\n"
    assert ids_at(wrapped, "script.hot-function-not-compiled") == []
    once = source.replace("for step in range(1000):\n    ", "if True:\n    ")
    assert ids_at(once, "script.hot-function-not-compiled") == []  # called once


def test_mlx_sampler_per_token_is_info_and_a_short_helper_is_silent() -> None:
    source = """\
        import mlx.core as mx

        def sample(logits, temp):
            probs = mx.softmax(logits / temp, axis=-1)
            order = mx.argsort(probs, axis=-1)
            cum = mx.cumsum(mx.take_along_axis(probs, order, axis=-1), axis=-1)
            return mx.random.categorical(mx.log(cum))

        def scale(x):
            return mx.exp(x)

        while True:
            y = sample(model(y), 0.7)
            z = scale(y)
            mx.eval(y, z)
    """
    assert ids_at(source, "script.hot-function-not-compiled", "info") == [3]
    source = textwrap.dedent(source)
    # `scale` (one op) stays silent; a helper only another function calls is not reported
    nested = source.replace("y = sample(model(y), 0.7)", "y = step(y)") + (
        "def step(y):\n    return sample(model(y), 0.7)\n")
    assert ids_at(nested, "script.hot-function-not-compiled") == []


# -- rules written against round8_dev (each with a case that must stay silent) -------------


def test_blocks_run_from_a_loop_over_a_container_reach_their_forward() -> None:
    source = """\
        import torch

        class Block(torch.nn.Module):
            def forward(self, x):
                return x + torch.zeros(x.shape).cuda()

        model = torch.nn.Sequential(*[Block() for _ in range(4)]).cuda()
        for xb in loader:
            h = xb.cuda()
            for layer in model:
                h = layer(h)
            h.sum().backward()
    """
    assert ids_at(source, "script.per-step-copy", "warning") == [5]
    ints = textwrap.dedent(source).replace("for layer in model:\n        h = layer(h)",
                                           "for layer in [1, 2]:\n        h = h * layer")
    assert ints != textwrap.dedent(source)
    assert ids_at(ints, "script.per-step-copy") == []  # no block runs: nothing copied


def test_item_per_batch_in_an_evaluation_function_decorated_no_grad() -> None:
    source = """\
        import torch

        @torch.no_grad()
        def evaluate(model, batches):
            total = 0.0
            for x, y in batches:
                total += ((model(x.cuda()) - y.cuda()) ** 2).sum().cpu().item()
            return total
    """
    assert ids_at(source, "script.sync-in-step-loop", "warning") == [7]
    once = source.replace("total += ((model(x.cuda()) - y.cuda()) ** 2).sum().cpu().item()",
                          "total += ((model(x.cuda()) - y.cuda()) ** 2).sum()") + (
        "    # read once\n")
    assert ids_at(once, "script.sync-in-step-loop") == []


def test_boolean_mask_indexing_and_truth_tests_in_code_run_per_step() -> None:
    source = """\
        import numpy as np
        import torch

        class Net(torch.nn.Module):
            def forward(self, x, types):
                out = torch.zeros_like(x)
                for t in range(4):
                    m = types == t
                    out[m] += self.lin(x[m])
                if out.isnan().any():
                    out = torch.nan_to_num(out)
                return out

        def prep(a):
            keep = np.asarray(a) > 0
            return np.asarray(a)[keep]
    """
    assert ids_at(source, "script.sync-in-step-loop", "warning") == [9]  # in a loop: warning
    assert ids_at(source, "script.sync-in-step-loop", "info") == [10]  # once per forward
    # `prep` (NumPy data, and no loop runs it) stays silent


def test_compiled_function_given_a_new_lambda_each_call() -> None:
    source = """\
        import tensorflow as tf

        @tf.function
        def gradient(func, x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = func(x)
            return tape.gradient(y, x)

        def perturb(model, x, t):
            loss = lambda z: model(z) / t
            return gradient(loss, x)
    """
    assert ids_at(source, "script.recompile-shapes", "warning") == [12]
    once = textwrap.dedent(source).replace(
        "def perturb(model, x, t):\n    loss = lambda z: model(z) / t\n"
        "    return gradient(loss, x)",
        "LOSS = lambda z: z * 2  # noqa: E731\nout = gradient(LOSS, tf.ones(3))")
    assert "LOSS" in once
    assert ids_at(once, "script.recompile-shapes") == []  # defined once, at module level


def test_nnx_jit_step_called_per_iteration_is_info() -> None:
    source = """\
        from flax import nnx

        @nnx.jit
        def train_step(model, optimizer, batch):
            grads = nnx.grad(loss_fn)(model, batch)
            optimizer.update(grads)

        for batch in batches:
            train_step(model, optimizer, batch)
    """
    assert ids_at(source, "script.nnx-jit-overhead", "info") == [4]  # its def
    once = textwrap.dedent(source).replace("for batch in batches:\n    train_step", "train_step")
    assert once != textwrap.dedent(source)
    assert ids_at(once, "script.nnx-jit-overhead") == []  # called once: no per-step cost


def test_per_parameter_update_loop_in_an_optimizer_step() -> None:
    source = """\
        import torch

        class MyOpt(torch.optim.Optimizer):
            @torch.no_grad()
            def step(self):
                for group in self.param_groups:
                    for p in group["params"]:
                        p.add_(p.grad, alpha=-group["lr"])
    """
    assert ids_at(source, "script.foreach-not-used", "info") == [7]
    reads = source.replace('p.add_(p.grad, alpha=-group["lr"])', "norms.append(p.grad.norm())")
    assert ids_at(reads, "script.foreach-not-used") == []  # no in-place update per tensor


def test_adam_without_fused_for_a_gpu_model_and_cpu_scripts_are_silent() -> None:
    source = """\
        import torch

        model = Net().cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    """
    assert ids_at(source, "script.optimizer-not-fused", "info") == [4]
    fused = source.replace("lr=1e-3)", "lr=1e-3, fused=True)")
    assert ids_at(fused, "script.optimizer-not-fused") == []
    cpu = source.replace("Net().cuda()", "Net()")
    assert ids_at(cpu, "script.optimizer-not-fused") == []
