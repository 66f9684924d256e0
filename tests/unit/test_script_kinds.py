"""The script check's seventh round (issue 24): the shared program analysis of
``script_check.kinds`` (what runs repeatedly, what a name holds, what a loop carries) and the
rules written on it, each with a case that must stay silent."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at


def test_list_of_arrays_converted_in_a_function_the_loop_calls() -> None:
    source = """\
        import numpy as np
        import torch

        def constraints(cs, X):
            rows = [c.w @ X.T - c.b for c in cs]
            return torch.tensor(rows, dtype=torch.double)

        for it in range(100):
            ok = constraints(cs, np.random.rand(1000, 4))
    """
    assert ids_at(source, "script.tensor-from-python-list", "warning") == [6]
    once = source.replace("for it in range(100):\n    ", "if True:\n    ")
    assert ids_at(once, "script.tensor-from-python-list") == []  # runs once: no finding
    literal = source.replace("torch.tensor(rows, ", "torch.tensor([1.0, 2.0], ")
    assert ids_at(literal, "script.tensor-from-python-list") == []  # constants: cheap
    stacked = source.replace("torch.tensor(rows, ", "torch.tensor(np.stack(rows), ")
    assert ids_at(stacked, "script.tensor-from-python-list") == []


def test_list_grown_in_getitem_and_numbers_are_info() -> None:
    source = """\
        import tensorflow as tf

        class Sampler(tf.keras.utils.Sequence):
            def __getitem__(self, idx):
                xs, ys = [], []
                for j in self.index[idx]:
                    xs.append(self.x[j])
                    ys.append(float(self.y[j]))
                x = tf.convert_to_tensor(xs)
                return x, tf.convert_to_tensor(ys)
    """
    assert ids_at(source, "script.tensor-from-python-list", "warning") == [9]
    assert ids_at(source, "script.tensor-from-python-list", "info") == [10]
    plain = source.replace("def __getitem__", "def build")
    assert ids_at(plain, "script.tensor-from-python-list") == []  # not per item


def test_eval_loop_collecting_outputs_is_not_a_per_step_sync() -> None:
    source = """\
        import torch

        def evaluate(model, loader):
            model.eval()
            probs = []
            with torch.no_grad():
                for x in loader:
                    out = model(x.cuda())
                    probs.extend(out.softmax(1).cpu().numpy())
                    print(out.max().item())
            return probs
    """
    assert ids_at(source, "script.sync-in-step-loop") == [10]  # the print, not the collect


def test_mlx_step_called_per_iteration_without_compile() -> None:
    source = """\
        import mlx.core as mx
        import mlx.nn as nn

        loss_and_grad = nn.value_and_grad(model, loss_fn)

        def step(batch):
            loss, grads = loss_and_grad(model, *batch)
            optimizer.update(model, grads)
            return loss

        for batch in batches:
            loss = step(batch)
            mx.eval(model.state, optimizer.state, loss)
    """
    assert ids_at(source, "script.mlx-not-compiled", "info") == [6]
    compiled = source.replace("def step(batch):", "@mx.compile\n        def step(batch):")
    assert ids_at(compiled, "script.mlx-not-compiled") == []
    wrapped = source + "        step = mx.compile(step)\n"
    assert ids_at(wrapped, "script.mlx-not-compiled") == []


def test_mlx_loop_evaluating_only_part_of_what_it_changes() -> None:
    source = """\
        import mlx.core as mx
        import mlx.nn as nn

        loss_and_grad = nn.value_and_grad(model, loss_fn)
        for step in range(1000):
            loss, grads = loss_and_grad(model, *next(batches))
            optimizer.update(model, grads)
            mx.eval(loss)
    """
    assert ids_at(source, "script.mlx-no-eval") == [8]
    full = source.replace("mx.eval(loss)", "mx.eval(model.parameters(), optimizer.state, loss)")
    assert ids_at(full, "script.mlx-no-eval") == []


def test_mlx_accumulation_evaluated_only_after_the_loop() -> None:
    source = """\
        import mlx.core as mx

        def evaluate(model, batches):
            total = 0
            n = 0
            for batch in batches:
                loss = loss_fn(model, batch)
                total += loss
                n += 1
            mx.eval(total)
            return total.item() / n
    """
    assert ids_at(source, "script.mlx-no-eval") == [8]  # not the counter `n += 1`
    each = source.replace("                n += 1\n", "                mx.eval(total)\n")
    assert ids_at(each, "script.mlx-no-eval") == []
    layers = """\
        import mlx.core as mx

        def forward(self, x):
            for layer in self.layers:
                x = x + layer(x)
            return x
    """
    assert ids_at(layers, "script.mlx-no-eval") == []  # a forward pass, not a data loop


def test_device_values_followed_into_the_functions_a_step_loop_calls() -> None:
    source = """\
        import jax

        def write_metrics(writer, metrics, step):
            for name, value in metrics.items():
                writer.add_scalar(name, float(jax.device_get(value)), step)

        def log_loss(loss, step):
            print(step, float(loss))

        for step in range(1000):
            state, metrics = p_train_step(state, next(batches))
            loss = loss_fn(state)
            write_metrics(writer, metrics, step)
            log_loss(loss, step)
            if step % 100 == 0:
                write_metrics(writer, metrics, step)
    """
    assert ids_at(source, "script.sync-in-step-loop") == [5, 8]
    every = "            write_metrics(writer, metrics, step)\n            log_loss(loss, step)\n"
    periodic = source.replace(every, "")
    assert ids_at(periodic, "script.sync-in-step-loop") == []  # only every 100 steps


def test_step_function_returning_python_numbers_is_info() -> None:
    source = """\
        import torch

        def train_step(model, optimizer, batch):
            optimizer.zero_grad()
            loss = model(batch).mean()
            loss.backward()
            optimizer.step()
            return {"loss": loss.item()}

        def to_float(x):
            return x.item()

        for batch in loader:
            metrics = train_step(model, optimizer, batch.cuda())
    """
    assert ids_at(source, "script.sync-in-step-loop", "info") == [8]
    assert ids_at(source, "script.sync-in-step-loop", "warning") == []


def test_logging_a_device_value_every_step() -> None:
    source = """\
        import jax
        import wandb

        @jax.jit
        def train_step(params, batch):
            return params, loss_fn(params, batch)

        for batch in batches:
            params, loss = train_step(params, batch)
            wandb.log({"loss": loss})
    """
    assert ids_at(source, "script.sync-in-step-loop") == [10]
    host = source.replace('wandb.log({"loss": loss})', 'wandb.log({"epoch": epoch})')
    assert ids_at(host, "script.sync-in-step-loop") == []


def test_equinox_step_outside_jit_is_reported_at_its_def() -> None:
    source = """\
        import equinox as eqx
        import jax

        def train_step(model, opt_state, x, y):
            loss, grads = eqx.filter_value_and_grad(loss_fn)(model, x, y)
            updates, opt_state = optimizer.update(grads, opt_state, model)
            return eqx.apply_updates(model, updates), opt_state, loss

        for step in range(1000):
            x, y = next(batches)
            model, opt_state, loss = train_step(model, opt_state, x, y)
    """
    assert ids_at(source, "script.jax-grad-outside-jit") == [4]
    assert ids_at(source, "script.jax-host-op-in-loop") == []
    jitted = source.replace("def train_step", "@eqx.filter_jit\n        def train_step")
    assert ids_at(jitted, "script.jax-grad-outside-jit") == []


def test_host_tensor_made_in_an_optimizer_step_and_in_a_block_of_a_sequential() -> None:
    source = """\
        import torch

        class SignSGD(torch.optim.Optimizer):
            def step(self):
                for group in self.param_groups:
                    for p in group["params"]:
                        votes = torch.zeros(p.size()).cuda()
                        p.add_(torch.sign(votes + p.grad), alpha=-group["lr"])

        class Block(torch.nn.Module):
            def forward(self, x):
                mask = torch.tril(torch.ones(x.shape[1], x.shape[1])).to(x.device)
                return x.masked_fill(mask == 0, 0.0)

        model = torch.nn.Sequential(*[Block() for _ in range(4)]).cuda()
        optimizer = SignSGD(model.parameters(), dict(lr=0.1))
        for x in loader:
            model(x.cuda()).sum().backward()
            optimizer.step()
    """
    assert ids_at(source, "script.per-step-copy") == [7, 12]
    on_device = source.replace("torch.zeros(p.size()).cuda()", "torch.zeros_like(p)").replace(
        "torch.ones(x.shape[1], x.shape[1])", "torch.ones(x.shape[1], x.shape[1], device=x.device)")
    assert ids_at(on_device, "script.per-step-copy") == []


def test_gc_collect_every_step() -> None:
    source = """\
        import gc
        import torch

        for step, batch in enumerate(loader):
            model(batch.cuda()).loss.backward()
            optimizer.step()
            gc.collect()
            if step % 500 == 0:
                gc.collect()
    """
    assert ids_at(source, "script.empty-cache-in-loop") == [7]  # not the periodic one


def test_python_number_from_an_iterable_of_unknown_kind_retraces_info() -> None:
    source = """\
        import tensorflow as tf

        @tf.function
        def sample_step(model, x, alpha):
            return x + alpha * model(x)

        def sample(model, sigmas, x):
            for i, sigma in enumerate(sigmas):
                alpha = 2e-5 * (sigma / sigmas[-1]) ** 2
                for t in range(100):
                    x = sample_step(model, x, alpha)
            return x
    """
    assert ids_at(source, "script.recompile-shapes", "info") == [11]
    tensor = source.replace("alpha = 2e-5 * (sigma / sigmas[-1]) ** 2",
                            "alpha = tf.constant(2e-5) * sigma")
    assert ids_at(tensor, "script.recompile-shapes") == []


def test_array_built_from_each_item_changes_length() -> None:
    source = """\
        import jax
        import numpy as np

        @jax.jit
        def likelihood(mu, opp):
            return (mu - opp).sum()

        for player, games in games_by_player.items():
            opp = np.array([rating[o] for o, _ in games])
            v = likelihood(mu, opp)
    """
    assert ids_at(source, "script.recompile-shapes") == [10]
    fixed = source.replace("[rating[o] for o, _ in games]", "[rating[o] for o in all_players]")
    assert ids_at(fixed, "script.recompile-shapes") == []


def test_device_values_reach_a_callback_and_a_loss_helper() -> None:
    source = """\
        import jax
        import torch

        class Progbar:
            def on_batch_end(self, step, logs):
                values = {k: float(v) for k, v in logs.items()}
                print(" ".join(f"{k}: {v:.4f}" for k, v in values.items()))

        def masked_loss(hidden, labels):
            mask = labels != -100
            n = mask.sum()
            if n == 0:
                return hidden.sum() * 0.0
            b, t = hidden.shape
            steps = int(t // 2)
            return (hidden[mask] ** 2).sum() / n

        @jax.jit
        def train_step(state, x):
            return state, {"loss": x.sum()}

        bar = Progbar()
        for step, (x, y) in enumerate(loader):
            state, logs = train_step(state, x)
            bar.on_batch_end(step, logs)
            loss = masked_loss(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
    """
    # float() of the logged device values and `if` on a device count: syncs; the printed
    # Python floats, the shape's ints and the keys are host values
    assert ids_at(source, "script.sync-in-step-loop") == [6, 12]


def test_flax_module_applied_unjitted_in_a_loop() -> None:
    source = """\
        import flax.linen as nn
        import jax

        layer = nn.Dense(256)
        params = layer.init(jax.random.PRNGKey(0), x)
        for trial in range(100):
            out = layer.apply(params, x).block_until_ready()
    """
    assert ids_at(source, "script.jax-host-op-in-loop") == [7]
    loop = "for trial in range(100):"
    jitted = source.replace(loop, "apply = jax.jit(layer.apply)\n        " + loop).replace(
        "layer.apply(params, x).block", "apply(params, x).block")
    assert ids_at(jitted, "script.jax-host-op-in-loop") == []


def test_lightning_trainer_without_benchmark_after_setting_the_flag() -> None:
    source = """\
        import pytorch_lightning as pl
        import torch

        torch.backends.cudnn.benchmark = True
        trainer = pl.Trainer(max_epochs=10, gpus=1)
        trainer.fit(model, loader)
    """
    assert ids_at(source, "script.cudnn-benchmark-overridden", "info") == [5]
    passed = source.replace("gpus=1)", "gpus=1, benchmark=True)")
    assert ids_at(passed, "script.cudnn-benchmark-overridden") == []
    never = source.replace("torch.backends.cudnn.benchmark = True", "torch.manual_seed(0)")
    assert ids_at(never, "script.cudnn-benchmark-overridden") == []


def test_dataloader_subclass_moving_batches_in_its_iterator() -> None:
    source = """\
        import torch
        from torch.utils.data import DataLoader

        def send_to_device(batch, device):
            return {k: v.to(device) for k, v in batch.items()}

        class DeviceLoader(DataLoader):
            def __init__(self, dataset, device, **kwargs):
                super().__init__(dataset, pin_memory=True, **kwargs)
                self.device = device

            def __iter__(self):
                for batch in super().__iter__():
                    yield send_to_device(batch, self.device)

        loader = DeviceLoader(dataset, torch.device("cuda"), batch_size=16)
        for batch in loader:
            model(**batch).loss.backward()
            optimizer.step()
    """
    assert ids_at(source, "script.blocking-h2d-copy") == [5]
    async_copy = source.replace("v.to(device)", "v.to(device, non_blocking=True)")
    assert ids_at(async_copy, "script.blocking-h2d-copy") == []


def test_predict_two_calls_below_a_loop_and_a_sync_in_a_gradient_hook() -> None:
    source = """\
        import numpy as np
        import tensorflow as tf

        def calc(params):
            return model.predict(np.asarray([params]))

        def log_likelihood(params):
            return -0.5 * (calc(params) ** 2).sum()

        for i in range(10000):
            logl = log_likelihood(prior.sample())
    """
    assert ids_at(source, "script.keras-call-per-sample") == [5]
    hook = """\
        import torch

        def check(grad):
            if torch.isnan(grad).any().item():
                raise RuntimeError("nan")

        def make_hook(bucket):
            def hook(*unused):
                check(bucket.grad)
            return hook

        for p in model.parameters():
            p.register_post_accumulate_grad_hook(make_hook(p))
        for x in loader:
            model(x.cuda()).sum().backward()
            optimizer.step()
    """
    assert ids_at(hook, "script.sync-in-step-loop") == [4]
    no_backward = hook.replace("model(x.cuda()).sum().backward()", "model(x.cuda())")
    assert ids_at(no_backward, "script.sync-in-step-loop") == []



def test_ddp_backward_in_a_replay_loop_the_stepping_loop_calls() -> None:
    source = """\
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(Net().cuda(), device_ids=[rank])

        def replay(model, chunks):
            for chunk in chunks:
                model(chunk).sum().backward()

        for batch in loader:
            replay(model, batch.split(8))
            optimizer.step()
            optimizer.zero_grad()
    """
    assert ids_at(source, "script.ddp-no-sync") == [8]
    each = source.replace("model(chunk).sum().backward()",
                          "model(chunk).sum().backward()\n                optimizer.step()")
    assert ids_at(each, "script.ddp-no-sync") == []  # a step per backward: nothing to skip


def test_value_returned_by_a_device_helper_is_a_device_value() -> None:
    source = """\
        import torch

        def forward(model, x):
            out = model(x.cuda())
            return out.softmax(-1)

        def host_stats(x):
            return len(x)

        for x, y in loader:
            probs = forward(model, x)
            n = host_stats(x)
            loss = criterion(probs, y.cuda())
            loss.backward()
            optimizer.step()
            print(probs)
            print(n)
    """
    assert ids_at(source, "script.sync-in-step-loop") == [16]  # the device value only


def test_non_blocking_copies_on_an_mps_only_script_are_info() -> None:
    source = """\
        import torch

        device = torch.device("mps")
        for batch in loader:
            batch = batch.to(device, non_blocking=True)
            model(batch).sum().backward()
            optimizer.step()
    """
    assert ids_at(source, "script.mps-non-blocking-copy", "info") == [5]
    cuda = source.replace('torch.device("mps")', 'torch.device("cuda" if ok else "mps")')
    assert ids_at(cuda, "script.mps-non-blocking-copy") == []


def test_compile_behind_a_flag_that_defaults_off() -> None:
    source = """\
        import mlx.core as mx
        import mlx.nn as nn

        class Trainer:
            def __init__(self, model, loss_fn, compile_training=False):
                self.loss_and_grad = nn.value_and_grad(model, loss_fn)
                if compile_training:
                    self.loss_and_grad = mx.compile(self.loss_and_grad)
    """
    assert ids_at(source, "script.mlx-not-compiled", "info") == [6]
    on = source.replace("compile_training=False", "compile_training=True")
    assert ids_at(on, "script.mlx-not-compiled") == []


def test_numpy_state_passed_to_a_jitted_function_on_every_call() -> None:
    source = """\
        import jax
        import jax.numpy as jnp
        import numpy as np

        @jax.jit
        def _predict(posterior, X):
            return X @ posterior["beta"]

        class Model:
            def __init__(self, samples):
                self.posterior = {k: np.asarray(v) for k, v in samples.items()}

            def predict_on_batch(self, X):
                return _predict(self.posterior, jnp.asarray(X))

        model = Model(samples)
        outs = [model.predict_on_batch(X) for X in np.array_split(X_test, 100)]
    """
    assert ids_at(source, "script.per-step-copy") == [14]
    on_device = source.replace("np.asarray(v) for k", "jnp.asarray(v) for k")
    assert ids_at(on_device, "script.per-step-copy") == []


def test_mlx_evaluating_a_result_evaluates_what_it_was_computed_from() -> None:
    # ml-explore/mlx-lm's generate_step (PR #1084, seen since round 9): the token history
    # feeds the logits processors, which feed `y`; `mx.async_eval(y)` materialises it.
    source = """\
        import mlx.core as mx

        def generate(model, y, processors, n):
            tokens = y
            for _ in range(n):
                logits = model(y)
                tokens = mx.concat([tokens, y])
                for p in processors:
                    logits = p(tokens, logits)
                y = mx.argmax(logits, axis=-1)
                mx.async_eval(y)
                yield y
    """
    assert ids_at(source, "script.mlx-no-eval") == []
    # A history that feeds nothing evaluated still grows one graph over the loop.
    apart = source.replace("logits = p(tokens, logits)", "logits = p(logits)")
    assert ids_at(apart, "script.mlx-no-eval") == [11]
