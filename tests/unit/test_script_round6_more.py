"""The script check's sixth round (issue 24), continued: mechanisms written against
round6_dev and the seen sets -- wrappers, submodules, running throughput figures, MLX,
Flax, shapes -- each with a case that must stay silent."""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at


def test_fsdp_accumulation_without_no_sync() -> None:
    source = """\
        import torch
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        model = FSDP(build_model(), device_id=torch.cuda.current_device())
        for i, batch in enumerate(loader):
            loss = model(batch).loss / accum
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
    """
    assert ids_at(source, "script.ddp-no-sync") == [7]
    single = source.replace("FSDP(build_model(), device_id=torch.cuda.current_device())",
                            "build_model().cuda()")
    assert ids_at(single, "script.ddp-no-sync") == []


def test_host_tensor_copied_in_a_submodule_forward() -> None:
    source = """\
        import torch

        class Noise(torch.nn.Module):
            def forward(self):
                return torch.rand(128, 44100).cuda()

        class Voice(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.noise = Noise()

            def forward(self):
                return self.noise() * 0.5

        voice = Voice().cuda()
        for i in range(n_batches):
            store(voice().cpu())
    """
    assert ids_at(source, "script.per-step-copy") == [5]
    on_device = source.replace("torch.rand(128, 44100).cuda()",
                               'torch.rand(128, 44100, device="cuda")')
    assert ids_at(on_device, "script.per-step-copy") == []
    # a module without parameters records no graph: no inference-grad alarm either
    assert ids_at(source, "script.inference-grad") == []
    weighted = source.replace("                self.noise = Noise()",
                              "                self.noise = Noise()\n"
                              "                self.gain = torch.nn.Linear(4, 4)")
    assert ids_at(weighted, "script.inference-grad") == [18]


def test_mlx_optimizer_update_is_a_step() -> None:
    source = """\
        import mlx.core as mx
        import mlx.optimizers as optim

        def clip(grads, max_norm):
            total = mx.sqrt(sum(mx.sum(g * g) for g in grads))
            norm = total.item()
            return grads, norm

        optimizer = optim.AdamW(learning_rate=3e-4)
        for step, (x, y) in enumerate(batches):
            loss, grads = loss_and_grad(model, x, y)
            grads, norm = clip(grads, 1.0)
            optimizer.update(model, grads)
            mx.eval(model.parameters(), optimizer.state)
    """
    assert ids_at(source, "script.sync-in-step-loop") == [6]
    no_step = source.replace("            optimizer.update(model, grads)\n", "")
    assert ids_at(no_step, "script.sync-in-step-loop") == []


def test_throughput_averaged_over_the_compiling_iteration() -> None:
    source = """\
        import time
        import torch

        model = torch.compile(Net().cuda())
        batch_times = []
        for step, batch in enumerate(loader):
            start = time.perf_counter()
            loss = model(batch.cuda()).mean()
            loss.backward()
            torch.cuda.synchronize()
            batch_times.append(time.perf_counter() - start)
            if step % 50 == 0:
                print(len(batch_times) / sum(batch_times))
    """
    assert ids_at(source, "script.compile-in-timing") == [8]
    skipped = source.replace("            start = time.perf_counter()\n",
                             "            if step < warmup:\n"
                             "                model(batch.cuda())\n"
                             "                continue\n"
                             "            start = time.perf_counter()\n")
    assert ids_at(skipped, "script.compile-in-timing") == []
    per_step = source.replace("                print(len(batch_times) / sum(batch_times))",
                              "                print(batch_times[-1])")
    assert ids_at(per_step, "script.compile-in-timing") == []  # each step shown apart


def test_running_clock_over_a_jitted_step() -> None:
    source = """\
        import time
        import jax

        train_step = jax.jit(step)
        tic = time.time()
        for i, batch in enumerate(loader):
            state = train_step(state, batch)
            print(i / (time.time() - tic))
    """
    assert ids_at(source, "script.compile-in-timing") == [7]
    warm = source.replace("        tic = time.time()",
                          "        state = train_step(state, first)\n        tic = time.time()")
    assert ids_at(warm, "script.compile-in-timing") == []


def test_mlx_function_timed_on_its_first_call() -> None:
    source = """\
        import time
        import mlx.core as mx

        def run_batched(engine, prompts):
            return engine.generate_batch(prompts, max_tokens=32)

        engine = load_engine(name)
        start = time.perf_counter()
        run_batched(engine, prompts)
        elapsed = time.perf_counter() - start
    """
    assert ids_at(source, "script.cold-call-timed") == [9]
    warm = source.replace("        start = time.perf_counter()",
                          "        run_batched(engine, prompts)\n"
                          "        start = time.perf_counter()")
    assert ids_at(warm, "script.cold-call-timed") == []


def test_flax_model_called_unjitted_in_a_loop() -> None:
    source = """\
        import jax
        from transformers import FlaxWav2Vec2ForCTC

        model = FlaxWav2Vec2ForCTC.from_pretrained("facebook/wav2vec2-base-960h")
        for batch in batches:
            logits = model(batch).logits
    """
    assert ids_at(source, "script.jax-host-op-in-loop") == [6]
    jitted = source.replace("        for batch in batches:\n            logits = model(batch)",
                            "        fwd = jax.jit(model.__call__)\n"
                            "        for batch in batches:\n            logits = fwd(batch)")
    assert ids_at(jitted, "script.jax-host-op-in-loop") == []


def test_explicit_zero_workers_is_noted() -> None:
    source = """\
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        device = torch.device("cuda")
        loader = DataLoader(image_folder, batch_size=16, shuffle=True, num_workers=0)
        tensors = DataLoader(TensorDataset(x, y), batch_size=16, num_workers=0)
        for a, b in loader:
            model(a.to(device)).sum().backward()
    """
    assert ids_at(source, "script.dataloader-workers", "info") == [5]  # not the tensors
    unset = source.replace(", num_workers=0)", ")")
    assert ids_at(unset, "script.dataloader-workers") == []


def test_random_resize_makes_sizes_vary_for_cudnn() -> None:
    source = """\
        import random
        import torch
        import torch.nn.functional as F

        torch.backends.cudnn.benchmark = True
        scales = [(1333, 640), (1333, 800)]
        for img, target in loader:
            scale = random.choice(scales)
            img = F.interpolate(img, size=(scale[1], scale[0]))
            loss = model(img.cuda(), target).sum()
            loss.backward()
    """
    assert ids_at(source, "script.cudnn-benchmark-varying") == [5]
    fixed = source.replace("size=(scale[1], scale[0])", "size=(800, 1333)")
    assert ids_at(fixed, "script.cudnn-benchmark-varying") == []


def test_data_dependent_sizes_recompile_a_jitted_function() -> None:
    source = """\
        import jax

        energy_and_forces = jax.jit(jax.value_and_grad(energy))
        for step in range(n_steps):
            senders, receivers = neighbor_list(positions, r_max)
            energy, grad = energy_and_forces(positions, senders, receivers)
            positions = positions - 0.01 * grad
    """
    assert ids_at(source, "script.recompile-shapes") == [6]
    padded = source.replace("neighbor_list(positions, r_max)",
                            "pad_to_bucket(positions, r_max, 64)")
    assert ids_at(padded, "script.recompile-shapes") == []


def test_cuda_training_without_any_mixed_precision_is_noted() -> None:
    source = """\
        import torch

        device = torch.device("cuda")
        model = Net().to(device)
        for batch, target in loader:
            loss = loss_fn(model(batch.to(device)), target.to(device))
            loss.backward()
            optimizer.step()
    """
    assert ids_at(source, "script.no-autocast", "info") == [6]
    amp = source.replace("            loss = loss_fn(",
                         "            with torch.autocast('cuda', dtype=torch.bfloat16):\n"
                         "                loss = loss_fn(")
    assert ids_at(amp, "script.no-autocast") == []
    cpu = source.replace('torch.device("cuda")', 'torch.device("cpu")')
    assert ids_at(cpu, "script.no-autocast") == []  # float32 is the CPU's fast path here


def test_key_split_beside_an_unjitted_step_is_said_once() -> None:
    source = """\
        import jax

        def step_fn(params, rng, batch):
            loss, grads = jax.value_and_grad(loss_fn)(params, rng, batch)
            return update(params, grads), loss

        for it in range(n):
            rng, sub = jax.random.split(rng)
            params, loss = step_fn(params, sub, next(batches))
    """
    assert ids_at(source, "script.jax-grad-outside-jit") == [3]
    assert ids_at(source, "script.jax-host-op-in-loop") == []  # the step is the cost
    alone = source.replace("            params, loss = step_fn(params, sub, next(batches))\n",
                           "            noise = jax.random.normal(sub, (3,))\n")
    assert ids_at(alone, "script.jax-host-op-in-loop") == [8]  # a chain of bare ops


def test_forward_looping_over_the_batch() -> None:
    source = """\
        import mlx.core as mx
        import mlx.nn as nn

        class AttFP(nn.Module):
            def __call__(self, atoms, degrees):
                batch_size = atoms.shape[0]
                neighbors = [atoms[i][degrees[i]] for i in range(batch_size)]
                layers = [layer(atoms) for layer in self.layers]
                heads = [atoms[:, h] for h in range(4)]
                return mx.stack(neighbors, axis=0)
    """
    assert ids_at(source, "script.per-sample-python-loop") == [7]  # not layers, not heads


def test_mlx_model_with_dropout_evaluated_in_training_mode() -> None:
    source = """\
        import mlx.core as mx
        import mlx.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.dropout = nn.Dropout(0.2)

        model = Net()
        for epoch in range(epochs):
            train(model)
            for batch in test_batches:
                mx.eval(model(batch))
    """
    assert ids_at(source, "script.training-true-in-eval") == [13]
    evaluated = source.replace("            for batch in test_batches:",
                               "            model.eval()\n            for batch in test_batches:")
    assert ids_at(evaluated, "script.training-true-in-eval") == []
