"""Round 21's step 0 (issue 24): corpus_round19's held-out misses written generally
(script_check/gap21_rules.py, and the OneCycleLR form in gap19_rules); each form fires and
stays silent on the fixed or a near form.
"""

from __future__ import annotations

from tests.unit.test_script_program_analysis import ids_at

_SYNC, _COPY = "script.sync-in-step-loop", "script.per-step-copy"

_OFFSET = """\
    import torch

    class Graph:
        def convert(self, column, row):
            out = {}
            for etype, etype_id in self.edge_types.items():
                src, _, dst = etype.split(":")
                start = self.offsets[self.type_ids[src]]
                out[etype] = row[column == etype_id] - start
            return out
"""


def test_device_tensor_indexed_by_a_python_id_per_item() -> None:
    assert ids_at(_OFFSET, _SYNC) == [8]
    host = _OFFSET.replace("row[column == etype_id] - start", "start + 1")
    assert ids_at(host, _SYNC) == []
    fixed = _OFFSET.replace("self.offsets[self.type_ids[src]]", "self.offsets_list[0]")
    assert ids_at(fixed, _SYNC) == []


_CACHE = """\
    import torch

    class Attention(torch.nn.Module):
        def forward(self, q, k, cache):
            end = int(cache["end"])
            start = cache["start"].item()
            cache["k"][:, end:end + k.shape[1]] = k
            return q @ cache["k"][:, start:end].T
"""


def test_cache_counters_read_in_forward() -> None:
    assert ids_at(_CACHE, _SYNC) == [5, 6]
    kept = _CACHE.replace('int(cache["end"])', "self.end").replace(
        'cache["start"].item()', "self.start")
    assert ids_at(kept, _SYNC) == []


_SCHEDULE = """\
    import torch

    def denoise(model, scheduler, x, device):
        for t in scheduler.timesteps:
            sigmas = scheduler.sigmas.to(torch.float64).to(device)
            x = scheduler.step(model(x, t), t, x, sigmas=sigmas)
        return x
"""


def test_loop_invariant_cast_and_copy_per_step() -> None:
    assert ids_at(_SCHEDULE, _COPY) == [5]
    varying = _SCHEDULE.replace("scheduler.sigmas.to", "t.to")
    assert ids_at(varying, _COPY) == []
    hoisted = _SCHEDULE.replace("        for t in", "        sigmas = scheduler.sigmas.to("
                                "torch.float64).to(device)\n        for t in", 1).replace(
        "            sigmas = scheduler.sigmas.to(torch.float64).to(device)\n", "")
    assert ids_at(hoisted, _COPY) == []


_FRAMES = """\
    import torch

    def save(video):
        frames = []
        for frame in decode(video):
            frames.append(frame.cpu().numpy())
        return frames
"""


def test_one_host_copy_per_item() -> None:
    assert ids_at(_FRAMES, _SYNC) == [6]
    once = _FRAMES.replace("frame.cpu().numpy()", "frame").replace(
        "return frames", "return torch.stack(frames).cpu().numpy()")
    assert ids_at(once, _SYNC) == []


_ESTIMATOR = """\
    import tensorflow as tf

    class Model:
        def get_estimator(self):
            return tf.estimator.Estimator(model_fn=self.model_fn)

        def infer(self, xs):
            est = self.get_estimator()
            return list(est.predict(input_fn=lambda: make(xs)))
"""


def test_estimator_built_per_predict() -> None:
    assert ids_at(_ESTIMATOR, "script.graph-built-per-call") == [9]
    cached = _ESTIMATOR.replace("est = self.get_estimator()", "est = self.estimator")
    assert ids_at(cached, "script.graph-built-per-call") == []


_DATASET = """\
    import imageio
    import torch
    from torch.utils.data import Dataset

    class Images(Dataset):
        def __getitem__(self, i):
            image = imageio.imread(self.paths[i])
            return torch.from_numpy(image).float()
"""


def test_decoded_image_made_float_in_the_data_set() -> None:
    assert ids_at(_DATASET, "script.cast-before-copy") == [8]
    uint8 = _DATASET.replace("torch.from_numpy(image).float()", "torch.from_numpy(image)")
    assert ids_at(uint8, "script.cast-before-copy") == []
    array = _DATASET.replace("imageio.imread(self.paths[i])", "self.arrays[i]")
    assert ids_at(array, "script.cast-before-copy") == []


_RESET = """\
    import torch

    class Env:
        def step(self, action):
            done = self.compute(action)
            reset_ids = done.nonzero().squeeze(-1)
            self.length_buf[reset_ids] = 0
            return done

    for _ in range(steps):
        env.step(policy(obs))
"""


def test_scalar_assigned_through_an_index_tensor() -> None:
    assert ids_at(_RESET, _SYNC) == [6, 7]  # (6: round 19's nonzero)
    fill = _RESET.replace("self.length_buf[reset_ids] = 0",
                          "self.length_buf.index_fill_(0, reset_ids, 0)")
    assert ids_at(fill, _SYNC) == [6]
    python = _RESET.replace("done.nonzero().squeeze(-1)", "[0, 1]")
    assert ids_at(python, _SYNC) == []


_MASK = """\
    import tensorflow as tf
    from tensorflow import keras

    class Observable(keras.layers.Layer):
        def call(self, x):
            return tf.boolean_mask(x, self.mask, axis=1)
"""


def test_boolean_mask_in_a_keras_layer() -> None:
    assert ids_at(_MASK, _SYNC) == [6]
    static = _MASK.replace("tf.boolean_mask(x, self.mask, axis=1)", "x * self.mask")
    assert ids_at(static, _SYNC) == []


_RESET_DYNAMO = """\
    import torch

    class Worker:
        def set_weights(self, state):
            self.module.load_state_dict(state)
            torch._dynamo.reset()

    for it in range(1000):
        worker.set_weights(learner.get_state())
"""


def test_dynamo_reset_per_iteration() -> None:
    assert ids_at(_RESET_DYNAMO, "script.jit-in-loop") == [6]
    once = _RESET_DYNAMO.replace("for it in range(1000):\n    ", "")
    assert ids_at(once, "script.jit-in-loop") == []


_MINIBATCH = """\
    import torch

    class Learner:
        def convert(self, batch):
            return {k: torch.as_tensor(v).to(self.device) for k, v in batch.items()}

        def update(self, batch, size, num_iters):
            for mb in CyclicIterator(batch, size, num_iters):
                t = self.convert(mb)
                self.optimizer.step()
"""


def test_minibatch_copied_per_pass_over_the_same_batch() -> None:
    assert ids_at(_MINIBATCH, _COPY) == [9]
    loader = _MINIBATCH.replace("CyclicIterator(batch, size, num_iters)", "loader")
    assert ids_at(loader, _COPY) == []


_ALL = """\
    import torch

    class Runner:
        def can_run(self, batch):
            if batch.lens is not None and not torch.all(batch.lens > 0):
                return False
            return True

    while scheduler.busy():
        if runner.can_run(batch):
            step(batch)
"""


def test_tensor_reduction_in_a_python_if_per_batch() -> None:
    assert ids_at(_ALL, _SYNC) == [5]
    mirror = _ALL.replace("torch.all(batch.lens > 0)", "min(batch.lens_cpu) > 0")
    assert ids_at(mirror, _SYNC) == []


_BIAS = """\
    import torch

    def build_bias(reqs, vocab, device):
        bias = torch.zeros(len(reqs), vocab, device=device)
        for i, req in enumerate(reqs):
            for key, value in req.bias.items():
                bias[i, int(key)] = value
        return bias

    while scheduler.busy():
        logits = model(batch) + build_bias(batch.reqs, vocab, "cuda")
"""


def test_device_tensor_written_element_by_element() -> None:
    assert ids_at(_BIAS, "script.per-sample-python-loop") == [7]
    host = _BIAS.replace(", device=device)", ")")
    assert ids_at(host, "script.per-sample-python-loop") == []
    numpy = _BIAS.replace("torch.zeros(len(reqs), vocab, device=device)",
                          "np.zeros((len(reqs), vocab))").replace(
        "        return bias", "        bias = torch.tensor(bias, device=device)\n"
                             "        return bias")
    assert ids_at(numpy, "script.per-sample-python-loop") == []
    once = _BIAS.replace("while scheduler.busy():", "if scheduler.busy():")
    assert ids_at(once, "script.per-sample-python-loop") == []


_PERMUTED = """\
    import torch

    def to_numpy(images):
        return images.cpu().permute(0, 2, 3, 1).float().numpy()

    for prompt in prompts:
        frames = to_numpy(pipe(prompt))
"""


def test_cast_after_the_copy_with_views_between() -> None:
    assert ids_at(_PERMUTED, "script.cast-before-copy") == [4]
    device = _PERMUTED.replace(".cpu().permute(0, 2, 3, 1).float()",
                               ".permute(0, 2, 3, 1).float().cpu()")
    assert ids_at(device, "script.cast-before-copy") == []


_ONECYCLE = """\
    import torch

    lr = torch.tensor(0.001)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=100)

    @torch.compile()
    def opt_step():
        optimizer.step()
        scheduler.step()

    for x in loader:
        model(x).sum().backward()
        opt_step()
"""


def test_compiled_step_with_cycled_float_betas() -> None:
    assert ids_at(_ONECYCLE, "script.recompile-shapes") == [14]
    off = _ONECYCLE.replace("total_steps=100)", "total_steps=100, cycle_momentum=False)")
    assert ids_at(off, "script.recompile-shapes") == []
    tensors = _ONECYCLE.replace("lr=lr)\n", "lr=lr, betas=(torch.tensor(0.9), "
                                "torch.tensor(0.999)))\n", 1)
    assert ids_at(tensors, "script.recompile-shapes") == []
