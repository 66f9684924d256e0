"""Unit tests of issue 24's script rules: shapes across steps, placement, DDP, tf.data,
the Keras a script is written for."""

from __future__ import annotations

from tests.unit.test_script_rules import lines, one

VARYING = """\
    import numpy as np
    import torch
    step = torch.compile(model)
    for it in range(100):
        n = np.random.randint(100, 200)
        x = torch.randn(n, 32)
        y = step(x)
"""


def test_compiled_call_with_a_new_size_each_step() -> None:
    assert lines(VARYING, "script.recompile-shapes") == [7]
    fixed = VARYING.replace("torch.randn(n, 32)", "torch.randn(128, 32)")
    assert lines(fixed, "script.recompile-shapes") == []


def test_python_int_into_torch_compile_recompiles_but_not_into_jax_jit() -> None:
    src = ("import torch\n@torch.compile\ndef f(x, i):\n    return x[i]\n"
           "for i in range(9):\n    f(x, i)\n")
    assert lines(src, "script.recompile-shapes") == [6]
    jax = src.replace("import torch", "import jax").replace("@torch.compile", "@jax.jit")
    assert lines(jax, "script.recompile-shapes") == []


def test_dataloader_without_drop_last_into_a_compiled_model() -> None:
    src = ("import torch\nfrom torch.utils.data import DataLoader\nmodel = torch.compile(net)\n"
           "dl = DataLoader(ds, batch_size=8)\nfor x, y in dl:\n    model(x)\n")
    assert lines(src, "script.ragged-last-batch") == [4]
    assert lines(src.replace("batch_size=8", "batch_size=8, drop_last=True"),
                 "script.ragged-last-batch") == []
    eager = src.replace("torch.compile(net)", "net")
    assert lines(eager, "script.ragged-last-batch") == []


def test_autocast_needs_a_device_type() -> None:
    src = 'import torch\ndevice = torch.device("cuda:0")\nwith torch.autocast(device):\n    pass\n'
    assert one(src, "script.autocast-device-string").severity == "error"
    ok = src.replace("torch.autocast(device)", "torch.autocast(device.type)")
    assert lines(ok, "script.autocast-device-string") == []
    rank = ('import torch\ndevice = f"cuda:{rank}"\n'
            "with torch.autocast(device_type=device):\n    x\n")
    assert lines(rank, "script.autocast-device-string") == [3]


def test_cuda_call_unguarded_only_matters_when_the_script_runs_elsewhere() -> None:
    src = ('import torch\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\n'
           "torch.cuda.empty_cache()\n")
    assert lines(src, "script.cuda-only-call") == [3]
    guarded = src.replace("torch.cuda.empty_cache()",
                          "if device == 'cuda':\n    torch.cuda.empty_cache()")
    assert lines(guarded, "script.cuda-only-call") == []
    cuda_only = 'import torch\ndevice = "cuda"\ntorch.cuda.empty_cache()\n'
    assert lines(cuda_only, "script.cuda-only-call") == []


DDP = """\
    import torch
    model = torch.nn.parallel.DistributedDataParallel(net)
    for batch in loader:
        for i in range(4):
            model(batch[i]).sum().backward()
        opt.step()
"""


def test_ddp_accumulation_without_no_sync() -> None:
    assert lines(DDP, "script.ddp-no-sync") == [5]
    every_step = DDP.replace("        opt.step()", "            opt.step()")
    assert lines(every_step, "script.ddp-no-sync") == []


def test_no_sync_on_another_micro_step_than_the_optimizer_step() -> None:
    src = ("import contextlib\nfor i, b in enumerate(dl):\n"
           "    c = model.no_sync if i % k != 0 else contextlib.nullcontext\n"
           "    with c():\n        model(b).backward()\n"
           "    if (i + 1) % k == 0:\n        opt.step()\n")
    assert one(src, "script.ddp-no-sync").severity == "error"
    assert lines(src.replace("i % k != 0", "(i + 1) % k != 0"), "script.ddp-no-sync") == []


def test_tf_data_order() -> None:
    src = ("import tensorflow as tf\nds = tf.data.Dataset.range(9)\nds = ds.repeat()\n"
           "ds = ds.shuffle(9).batch(3).prefetch(2)\n")
    assert lines(src, "script.tfdata-order") == [3]
    good = src.replace("ds = ds.repeat()\nds = ds.shuffle(9)",
                       "ds = ds.shuffle(9).repeat()\nds = ds")
    assert lines(good, "script.tfdata-order") == []


LEGACY = """\
    # /// script
    # dependencies = ["tensorflow==2.15.1"]
    # ///
    import tensorflow as tf
    opt = tf.keras.optimizers.legacy.Adam()
    model.fit_generator(gen)
"""


def test_a_script_pinned_to_keras_2_gets_no_keras_3_errors() -> None:
    assert one(LEGACY, "script.keras3-removed").severity == "info"
    unpinned = LEGACY.replace('"tensorflow==2.15.1"', '"tensorflow>=2.16"')
    f = one(unpinned, "script.keras3-removed")
    assert f.severity == "error" and "Keras 3" in f.observed
    legacy_env = LEGACY.replace('"tensorflow==2.15.1"', '"numpy"').replace(
        "import tensorflow as tf", "import os\n    os.environ['TF_USE_LEGACY_KERAS'] = '1'\n"
        "    import tensorflow as tf")
    assert one(legacy_env, "script.keras3-removed").severity == "info"


def test_cudnn_benchmark_only_warns_when_sizes_vary() -> None:
    src = ("import torch\nimport random\ntorch.backends.cudnn.benchmark = True\n"
           "for i in range(9):\n    h = random.randint(400, 600)\n"
           "    y = net(torch.randn(1, 3, h, h))\n")
    assert lines(src, "script.cudnn-benchmark-varying") == [3]
    fixed = src.replace("torch.randn(1, 3, h, h)", "torch.randn(1, 3, 512, 512)")
    assert lines(fixed, "script.cudnn-benchmark-varying") == []


def test_array_grown_in_a_loop() -> None:
    src = "import torch\nacc = torch.zeros(0, 3)\nfor b in data:\n    acc = torch.cat((acc, b))\n"
    assert lines(src, "script.growing-tensor") == [4]
    listed = "import torch\nparts = []\nfor b in data:\n    parts.append(b)\n"
    assert lines(listed, "script.growing-tensor") == []


def test_model_never_moved_while_cuda_is_timed() -> None:
    src = ('import torch\nimport torchvision\nmodel = torchvision.models.resnet18()\n'
           "e = torch.cuda.Event(enable_timing=True)\ne.record()\nmodel(x)\n")
    assert lines(src, "script.model-not-on-device") == [3]
    moved = src.replace("model(x)", "model = model.cuda()\nmodel(x)")
    assert lines(moved, "script.model-not-on-device") == []


def test_device_choice_without_mps() -> None:
    src = ('import torch\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\n')
    assert one(src, "script.device-choice-no-mps").severity == "info"
    three = src.replace('else "cpu"', 'else "mps" if torch.backends.mps.is_available() '
                        'else "cpu"')
    assert lines(three, "script.device-choice-no-mps") == []


def test_keras2_addon_on_keras3_but_not_when_pinned() -> None:
    src = ("import tensorflow as tf\nimport tensorflow_hub as hub\n"
           "layer = hub.KerasLayer(url)\n")
    assert one(src, "script.keras2-only-addon").severity == "error"
    pinned = "# /// script\n# dependencies = ['tensorflow==2.15.0']\n# ///\n" + src
    assert lines(pinned, "script.keras2-only-addon") == []


def test_one_cold_call_timed() -> None:
    src = ("import time\nimport torch\nmodel = Net().cuda()\nt = time.perf_counter()\n"
           "model(x)\ntorch.cuda.synchronize()\nprint(time.perf_counter() - t)\n")
    f = one(src, "script.cold-call-timed")
    assert "no_grad" in f.why
    warm = src.replace("t = time.perf_counter()", "model(x)\nt = time.perf_counter()")
    assert lines(warm, "script.cold-call-timed") == []


def test_eager_step_as_a_method_of_a_plain_class() -> None:
    src = ("import tensorflow as tf\nclass Trainer:\n    def step(self, x):\n"
           "        with tf.GradientTape() as tape:\n            loss = f(x)\n"
           "        return tape.gradient(loss, v)\n"
           "t = Trainer()\nfor x in ds:\n    t.step(x)\n")
    assert lines(src, "script.eager-custom-loop") == [3]
    keras = src.replace("class Trainer:", "class Trainer(tf.keras.Model):").replace(
        "def step", "def train_step").replace("t.step(x)", "t.train_step(x)")
    assert lines(keras, "script.eager-custom-loop") == []


def test_sync_inside_a_function_the_loop_calls() -> None:
    src = ("import torch\ndef log(loss):\n    print(loss.item())\n"
           "for x in dl:\n    loss = model(x)\n    loss.backward()\n    opt.step()\n"
           "    log(loss)\n")
    f = one(src, "script.sync-in-step-loop")
    assert f.location.endswith(":3") and "loss.detach()" in f.fix
