"""The script check's second round (issue 24): costs reached through the functions a loop
calls, each with the case that must stay silent."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at


def test_tf_function_defined_by_a_helper_the_loop_calls() -> None:
    source = """\
        import tensorflow as tf

        def train_epoch(model, it):
            @tf.function
            def step_fn(x):
                return model(x)
            for _ in range(10):
                step_fn(next(it))

        for epoch in range(5):
            train_epoch(model, it)
    """
    assert ids_at(source, "script.jit-in-loop") == [5]
    once = source.replace("        for epoch in range(5):\n            train_epoch(model, it)\n",
                          "        train_epoch(model, it)\n")
    assert ids_at(once, "script.jit-in-loop") == []


def test_sync_inside_a_model_class_forward_runs_every_step() -> None:
    source = """\
        import torch

        def mask(x):
            keep = torch.argsort(torch.rand(x.shape[0], device=x.device))
            idx = keep.cpu().numpy()
            return x[idx]

        class Net(torch.nn.Module):
            def forward(self, x):
                return self.lin(mask(x))

        model = Net().cuda()
        for x in loader:
            loss = model(x.cuda()).sum()
            loss.backward()
            opt.step()
    """
    assert ids_at(source, "script.sync-in-step-loop") == [5]
    on_device = source.replace("idx = keep.cpu().numpy()", "idx = keep")
    assert ids_at(on_device, "script.sync-in-step-loop") == []
    # a value converted as the helper returns it is the caller's choice, not flagged here
    returned = source.replace("idx = keep.cpu().numpy()\n            return x[idx]",
                              "return x[keep].cpu().numpy()")
    assert ids_at(returned, "script.sync-in-step-loop") == []


def test_item_in_the_update_branch_of_accumulation_is_per_step() -> None:
    source = """\
        import torch
        for step, batch in enumerate(loader):
            loss = model(batch.cuda()).mean()
            loss.backward()
            if step % accum == 0:
                opt.step()
                bar.set_postfix(loss=loss.item())
    """
    assert ids_at(source, "script.sync-in-step-loop") == [7]
    logging = source.replace("                opt.step()\n", "").replace(
        "            loss.backward()\n", "            loss.backward()\n            opt.step()\n")
    assert ids_at(logging, "script.sync-in-step-loop") == []  # a logging branch: every N


def test_host_made_tensor_copied_in_model_code() -> None:
    source = """\
        import torch

        def bases(b, d, device):
            return torch.rand((b, d)).to(device)

        model = Net().cuda()
        for x in loader:
            out = model(x.cuda()) @ bases(8, 16, "cuda")
            out.sum().backward()
            opt.step()
    """
    assert ids_at(source, "script.per-step-copy") == [4]
    made_there = source.replace("torch.rand((b, d)).to(device)",
                                "torch.rand((b, d), device=device)")
    assert ids_at(made_there, "script.per-step-copy") == []


def test_clock_helper_that_syncs_only_under_ddp() -> None:
    source = """\
        import time
        import torch

        def _get_time():
            if USE_PYTORCH_DDP:
                torch.cuda.synchronize()
            return time.time()

        for step in range(100):
            start = _get_time()
            params = update_params(params, next(batches))
            total += _get_time() - start
    """
    assert ids_at(source, "script.unsynced-timing") == [11]
    always = source.replace("            if USE_PYTORCH_DDP:\n                torch",
                            "            torch")
    assert ids_at(always, "script.unsynced-timing") == []


def test_timing_the_torch_compile_wrapper() -> None:
    source = """\
        import time
        import torch
        t0 = time.perf_counter()
        step = torch.compile(step, mode="max-autotune")
        print(f"compile took {time.perf_counter() - t0}")
        t0 = time.perf_counter()
        step(x)
        torch.cuda.synchronize()
        print(f"first call took {time.perf_counter() - t0}")
    """
    assert ids_at(source, "script.compile-time-at-wrap") == [4]


def test_device_chosen_by_a_string_test_on_its_name() -> None:
    source = """\
        import torch
        device_type = "cuda" if "cuda" in args.device else "cpu"
        model = Net().to(args.device)
    """
    assert ids_at(source, "script.device-choice-no-mps") == [2]
    three = source.replace('else "cpu"', 'else "mps" if args.device == "mps" else "cpu"')
    assert ids_at(three, "script.device-choice-no-mps") == []


def test_cuda_autocast_in_a_script_that_only_runs_on_mps_or_cpu() -> None:
    source = """\
        import torch
        device = torch.device("mps" if torch.backends.mps.is_available() else "cpu")
        for x in loader:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = model(x.to(device))
    """
    assert ids_at(source, "script.cuda-only-call") == [4]
    assert ids_at(source.replace('autocast("cuda"', 'autocast(device.type'),
                  "script.cuda-only-call") == []


def test_fsdp2_accumulation_through_a_ddp_only_helper() -> None:
    source = """\
        from torch.distributed.fsdp import fully_shard
        from torch.nn.parallel import DistributedDataParallel as DDP

        def sync_grad(model, enabled):
            if isinstance(model, DDP):
                return model.no_sync() if not enabled else nullcontext()
            return nullcontext()

        fully_shard(model)
        for i, batch in enumerate(loader):
            boundary = (i + 1) % accum == 0
            with sync_grad(model, boundary):
                model(batch).backward()
            if boundary:
                optimizer.step()
    """
    assert ids_at(source, "script.ddp-no-sync") == [12]
    deferred = source.replace("            with sync_grad(model, boundary):",
                              "            model.set_requires_gradient_sync(boundary)\n"
                              "            if True:")
    assert ids_at(deferred, "script.ddp-no-sync") == []


def test_unjitted_jax_loss_called_per_batch() -> None:
    source = """\
        import jax

        def loss(params, x):
            return jax.numpy.mean(jax.numpy.square(model_apply(params, x)))

        @jax.jit
        def step(params, x):
            return jax.grad(loss)(params, x)

        for epoch in range(10):
            for xb in batches:
                params = step(params, xb)
            val = [loss(params, xb) for xb in val_batches]
    """
    assert ids_at(source, "script.jax-host-op-in-loop") == [3]
    jitted = source.replace("        def loss(", "        @jax.jit\n        def loss(")
    assert ids_at(jitted, "script.jax-host-op-in-loop") == []


def test_keras_model_built_in_the_loop_then_predicting() -> None:
    source = """\
        import tensorflow as tf
        for trial in range(6):
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
            model.compile(loss="mse", optimizer="adam")
            model.fit(X, y, epochs=10, verbose=0)
            print(model.predict(X))
    """
    assert ids_at(source, "script.model-built-in-loop") == [6]
    once = source.replace("        for trial in range(6):\n", "        if True:\n")
    assert ids_at(once, "script.model-built-in-loop") == []
