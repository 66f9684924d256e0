"""Script rules from issues 14 and 15: each with a true case and a near-miss that stays quiet."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from devicebench.env.finding import Finding
from devicebench.env.snapshot import DeviceInfo, EnvSnapshot, FrameworkProbe, HostInfo
from devicebench.script_check import RULES, check_script, check_source


def check(source: str, snapshot: EnvSnapshot | None = None) -> list[Finding]:
    return check_source(textwrap.dedent(source), filename="train.py", snapshot=snapshot)


def lines(source: str, fid: str, snapshot: EnvSnapshot | None = None) -> list[int]:
    return [int(f.location.rsplit(":", 1)[1]) for f in check(source, snapshot) if f.id == fid]


def line(source: str, text: str) -> int:
    return next(i for i, ln in enumerate(textwrap.dedent(source).splitlines(), 1) if text in ln)


def one(source: str, fid: str, snapshot: EnvSnapshot | None = None) -> Finding:
    (finding,) = [f for f in check(source, snapshot) if f.id == fid]
    return finding


def mac_snapshot() -> EnvSnapshot:
    gpu = DeviceInfo(name="/physical_device:GPU:0", kind="GPU")
    return EnvSnapshot(
        host=HostInfo(os="Darwin", machine="arm64", apple_chip="Apple M1 Ultra"),
        distributions={"tensorflow": "2.18.0", "tensorflow-metal": "1.2.0", "keras": "3.8.0"},
        frameworks={"tensorflow": FrameworkProbe(name="tensorflow", version="2.18.0",
                                                 physical_devices=[gpu])},
    )


def test_every_rule_has_a_complete_message() -> None:
    assert len(RULES) >= 25
    for r in RULES.values():
        assert r.message.title and r.message.why and r.message.fix, r.id
        assert r.id.startswith("script.")


# -- Keras ----------------------------------------------------------------------------

APP = """\
    import keras
    from tensorflow.keras.applications import MobileNetV2
    base = keras.applications.ResNet50(include_top=False, input_shape=(224, 224, 3))
    small = MobileNetV2(input_shape=(96, 96, 3), weights=None)
    emb = keras.layers.Embedding(input_dim=5000, output_dim=16)
    dense = keras.layers.Dense(8, input_dim=4)
"""


def test_input_shape_not_flagged_on_applications_or_embedding() -> None:
    assert lines(APP, "script.input-shape") == [line(APP, "Dense(8, input_dim")]


SOFTMAX1 = """\
    import keras
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="softmax")])
    ok = keras.Sequential([keras.layers.Dense(1, activation="sigmoid"),
                           keras.layers.Dense(3, activation="softmax")])
"""


def test_softmax_on_one_unit_is_error_sigmoid_and_many_units_not() -> None:
    f = one(SOFTMAX1, "script.softmax-one-unit")
    assert f.severity == "error" and f.location == "train.py:2" and "sigmoid" in f.fix


LOGITS = """\
    import keras
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(10, activation="softmax")])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
"""


def test_from_logits_after_softmax_output() -> None:
    f = one(LOGITS, "script.from-logits-softmax")
    assert f.location == "train.py:3" and "line 2" in f.observed and "softmax" in f.fix


@pytest.mark.parametrize("variant", [
    LOGITS.replace('activation="softmax"', ""),  # logits output: right
    LOGITS.replace("from_logits=True", "from_logits=False"),
    LOGITS.replace("Dense(10, activation=\"softmax\")])",  # softmax only in a hidden layer
                   "Dense(10, activation=\"softmax\"), keras.layers.Dense(3)])"),
])
def test_from_logits_near_misses(variant: str) -> None:
    assert lines(variant, "script.from-logits-softmax") == []


def test_functional_output_softmax_found() -> None:
    source = """\
        import keras
        inp = keras.Input((4,))
        out = keras.layers.Dense(3, activation="softmax")(inp)
        model = keras.Model(inputs=inp, outputs=out)
        loss = keras.losses.CategoricalCrossentropy(from_logits=True)
    """
    assert lines(source, "script.from-logits-softmax") == [5]


SMALL_FIT = """\
    import keras
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16),
                              keras.layers.Dense(1)])
    model.fit(x_train, y_train, epochs=5)
"""


def test_default_batch_with_small_model() -> None:
    f = one(SMALL_FIT, "script.small-batch-default")
    assert f.location == "train.py:4" and "batch_size=256" in f.fix and "16 unit(s)" in f.observed


@pytest.mark.parametrize("variant", [
    SMALL_FIT.replace("epochs=5", "epochs=5, batch_size=512"),
    SMALL_FIT.replace("Dense(16)", "Dense(1024)"),  # not a small model
    SMALL_FIT.replace("x_train, y_train", "train_ds"),  # a batched dataset
])
def test_default_batch_near_misses(variant: str) -> None:
    assert lines(variant, "script.small-batch-default") == []


FLOAT64 = """\
    import keras
    import numpy as np
    (x_train, y_train), (x_test, y_test) = keras.datasets.mnist.load_data()
    x_train = x_train / 255.0
    x_test = x_test.astype("float32") / 255.0
    pixels = np.array(images) / 255
    scaled = tf.cast(image, tf.float32) / 255.0
"""


def test_float64_from_division_and_near_misses() -> None:
    found = check(FLOAT64)
    got = [int(f.location.rsplit(":", 1)[1]) for f in found if f.id == "script.float64-input"]
    assert got == [4, 6]
    assert 'x_train = x_train.astype("float32") / 255.0' in found[0].fix or any(
        'x_train.astype("float32")' in f.fix for f in found)


def test_float64_cast_later_is_fine() -> None:
    source = FLOAT64.replace('x_test = x_test.astype("float32") / 255.0',
                             'x_train = x_train.astype(np.float32)')
    assert 4 not in lines(source, "script.float64-input")


RNN = """\
    import keras
    model = keras.Sequential([keras.Input((50, 1)), keras.layers.LSTM(128)])
    tiny = keras.Sequential([keras.Input((50, 1)), keras.layers.SimpleRNN(1)])
"""


def test_rnn_on_apple_gpu_any_size() -> None:
    found = [f for f in check(RNN, mac_snapshot()) if f.id == "script.rnn-on-gpu"]
    assert [f.severity for f in found] == ["warning", "warning"]
    assert "tf.device('/CPU:0')" in found[0].fix and "Apple" in found[0].title


def test_rnn_without_snapshot_only_tiny_and_info() -> None:
    f = one(RNN, "script.rnn-on-gpu")
    assert f.location == "train.py:3" and f.severity == "info"


def test_rnn_on_linux_cpu_only_snapshot_large_not_flagged() -> None:
    snap = EnvSnapshot(host=HostInfo(os="Linux", machine="x86_64"))
    assert lines(RNN.replace("SimpleRNN(1)", "SimpleRNN(64)"), "script.rnn-on-gpu", snap) == []


KERAS3 = """\
    import tensorflow as tf
    from tensorflow.keras.layers.experimental.preprocessing import Rescaling
    model.fit_generator(gen, epochs=3)
    model.reset_states()
    opt = tf.keras.optimizers.Adam(lr=0.001)
    model.layers[0].reset_states()
    torch_opt = torch.optim.Adam(params, lr=0.001)
"""


def test_keras3_removed_apis() -> None:
    assert lines(KERAS3, "script.keras3-removed") == [2, 3, 4, 5]
    f = [f for f in check(KERAS3) if f.id == "script.keras3-removed"]
    assert "learning_rate=" in f[3].fix and "reset_state()" in f[2].fix
    assert all(x.severity == "error" for x in f)


def test_keras3_removed_ignored_without_keras() -> None:
    assert lines("import torch\nopt = torch.optim.SGD(p, lr=0.1)\nrnn.reset_states()\n",
                 "script.keras3-removed") == []


# -- TensorFlow custom loops ---------------------------------------------------------

EAGER = """\
    import tensorflow as tf

    # @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    for epoch in range(10):
        for x, y in dataset:
            loss = train_step(x, y)
"""


def test_eager_custom_loop_names_commented_out_decorator() -> None:
    f = one(EAGER, "script.eager-custom-loop")
    assert f.location == "train.py:4" and "commented out" in f.observed
    assert "@tf.function" in f.fix and "train_step" in f.fix


def test_decorated_step_or_keras_train_step_not_flagged() -> None:
    assert lines(EAGER.replace("# @tf.function", "@tf.function(jit_compile=True)"),
                 "script.eager-custom-loop") == []
    method = """\
        import tensorflow as tf
        class M(tf.keras.Model):
            def train_step(self, data):
                with tf.GradientTape() as tape:
                    loss = self.compiled_loss(data[1], self(data[0]))
                return {}
    """
    assert lines(method, "script.eager-custom-loop") == []


def test_inline_tape_loop_flagged_at_with() -> None:
    source = """\
        import tensorflow as tf
        for x, y in dataset:
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x))
            grads = tape.gradient(loss, model.trainable_variables)
    """
    assert lines(source, "script.eager-custom-loop") == [3]


def test_run_functions_eagerly_turned_off_again_is_fine() -> None:
    source = """\
        import tensorflow as tf
        tf.config.run_functions_eagerly(True)
        debug_one_step()
        tf.config.run_functions_eagerly(False)
    """
    assert lines(source, "script.run-eagerly") == []
    assert lines(source.replace("(False)", "(True)"), "script.run-eagerly") == [2, 4]


GRAD_IN_TAPE = """\
    import tensorflow as tf
    with tf.GradientTape(persistent=True) as tape:
        loss = loss_fn(model(x))
        grads = tape.gradient(loss, model.trainable_variables)
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            y = f(x)
        dy = inner.gradient(y, x)
    d2y = outer.gradient(dy, x)
"""


def test_gradient_inside_tape_block_but_not_higher_order() -> None:
    assert lines(GRAD_IN_TAPE, "script.gradient-in-tape") == [4]


def test_gradient_inside_a_non_persistent_tape_costs_nothing() -> None:
    """Issue 24, class 20: a non-persistent tape stops recording at `gradient`."""
    plain = GRAD_IN_TAPE.replace("(persistent=True)", "()")
    assert lines(plain, "script.gradient-in-tape") == []


BN_EVAL = """\
    import tensorflow as tf
    model = tf.keras.Sequential([tf.keras.layers.Dense(8), tf.keras.layers.BatchNormalization()])
    def train_step(x):
        return model(x, training=True)
    def evaluate(x):
        return model(x, training=True)
    for xb in val_ds:
        preds = model(xb, training=True)
"""


def test_training_true_in_evaluation() -> None:
    assert lines(BN_EVAL, "script.training-true-in-eval") == [6, 8]


def test_training_true_without_batchnorm_is_mc_dropout_not_flagged() -> None:
    source = BN_EVAL.replace(", tf.keras.layers.BatchNormalization()", "")
    assert lines(source, "script.training-true-in-eval") == []


DEVICE_LOOP = """\
    import tensorflow as tf
    with tf.device('/GPU:0'):
        for x, y in dataset:
            train_step(x, y)
    with tf.device('/CPU:0'):
        model.fit(x, y)
    with tf.device('/GPU:0'):
        y = tf.matmul(a, b)
"""


def test_device_scope_around_loop_only_for_gpu_loops() -> None:
    f = one(DEVICE_LOOP, "script.device-scope-loop")
    assert f.location == "train.py:2" and f.severity == "info"


def test_memory_growth_after_importing_a_module_that_touches_the_gpu(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(
        "import tensorflow as tf\nBACKBONE = tf.keras.Sequential([tf.keras.layers.Dense(4)])\n")
    (tmp_path / "utils.py").write_text("import tensorflow as tf\ndef f():\n    return tf.ones(1)\n")
    script = tmp_path / "train.py"
    script.write_text(
        "import tensorflow as tf\nimport utils\nimport models\n"
        "for g in tf.config.list_physical_devices('GPU'):\n"
        "    tf.config.experimental.set_memory_growth(g, True)\n")
    (f,) = [f for f in check_script(script) if f.id == "script.memory-growth-late"]
    assert f.location.endswith(":5") and "models.py" in f.observed and "line 3" in f.observed
    script.write_text(script.read_text().replace("import models\n", ""))
    assert [f for f in check_script(script) if f.id == "script.memory-growth-late"] == []


# -- timing (PyTorch, JAX) -----------------------------------------------------------

TORCH_TIMING = """\
    import time
    import torch
    model = Net().cuda()
    x = torch.randn(64, 3, 224, 224).cuda()
    start = time.time()
    for _ in range(100):
        out = model(x)
    end = time.time()
"""


def test_torch_model_forward_timed_without_sync() -> None:
    f = one(TORCH_TIMING, "script.unsynced-timing")
    # at the costly call in the loop (the corpus convention), not the loop header
    assert f.location == "train.py:7" and "torch.cuda.synchronize()" in f.fix
    assert "torch.utils.benchmark" in f.fix


def test_torch_model_timing_with_sync_or_events_clean() -> None:
    synced = TORCH_TIMING.replace("    end =", "    torch.cuda.synchronize()\n    end =")
    assert lines(synced, "script.unsynced-timing") == []
    cpu_copy = TORCH_TIMING.replace("    end =", "    out.cpu()\n    end =")
    assert lines(cpu_copy, "script.unsynced-timing") == []


def test_single_forward_timed_without_sync() -> None:
    source = """\
        import time
        import torch
        model = torchvision.models.resnet18().to("cuda")
        t0 = time.perf_counter()
        y = model(x)
        t1 = time.perf_counter()
        z = model.fit(x)
    """
    assert lines(source, "script.unsynced-timing") == [5]


JIT_TIMING = """\
    import time
    import jax
    @jax.jit
    def f(x):
        return x @ x
    t0 = time.perf_counter()
    f(x).block_until_ready()
    t1 = time.perf_counter()
"""


def test_first_call_of_jitted_function_inside_timing() -> None:
    f = one(JIT_TIMING, "script.compile-in-timing")
    assert f.location == "train.py:7" and "f(...)` once before" in f.fix
    assert lines(JIT_TIMING, "script.unsynced-timing") == []


def test_warmed_up_jitted_function_not_flagged() -> None:
    warm = JIT_TIMING.replace("    t0 =", "    f(x).block_until_ready()\n    t0 =")
    assert lines(warm, "script.compile-in-timing") == []


# -- per-step host syncs ------------------------------------------------------------

SYNCS = """\
    import torch
    for epoch in range(3):
        for x, y in loader:
            out = model(x)
            loss = criterion(out, y)
            loss.backward()
            optimizer.step()
            preds = out.argmax(1).cpu()
            print(loss)
            if loss < best:
                best = 0
            n = len(out)
            if out is None:
                pass
        print(loss.item())
    final = loss.item()
"""


def test_per_step_host_syncs_cpu_print_and_branch() -> None:
    assert lines(SYNCS, "script.sync-in-step-loop") == [8, 9, 10]


def test_one_off_item_after_training_not_flagged() -> None:
    found = lines(SYNCS, "script.sync-in-step-loop")
    assert line(SYNCS, "print(loss.item())") not in found
    assert line(SYNCS, "final = loss.item()") not in found


def test_jax_float_of_loss_each_step() -> None:
    source = """\
        import jax
        @jax.jit
        def update(params, batch):
            return params, 0.0
        for batch in batches:
            params, loss = update(params, batch)
            losses.append(float(loss))
    """
    assert lines(source, "script.sync-in-step-loop") == [7]


# -- JAX ------------------------------------------------------------------------------

OPTAX = """\
    import jax
    import optax
    optimizer = optax.adam(1e-3)

    def loss_fn(params, x, y):
        return ((predict(params, x) - y) ** 2).mean()
    for step in range(1000):
        grads = jax.grad(loss_fn)(params, x, y)
        updates, opt_state = optimizer.update(grads, opt_state)
        params = optax.apply_updates(params, updates)
"""


def test_jax_grad_and_optax_update_outside_jit() -> None:
    assert lines(OPTAX, "script.jax-grad-outside-jit") == [8]
    assert lines(OPTAX, "script.jax-update-outside-jit") == [9, 10]
    assert "@jax.jit" in one(OPTAX, "script.jax-grad-outside-jit").fix
    # a jitted loss does not help: grad's linearise/transpose still runs per call outside
    # jit (jax-ml/jax#1498: 57 s vs 0.75 s per epoch)
    jitted_loss = OPTAX.replace("\n    def loss_fn", "    @jax.jit\n    def loss_fn")
    assert lines(jitted_loss, "script.jax-grad-outside-jit") == [8]


def test_jax_step_under_jit_is_clean() -> None:
    source = """\
        import jax
        import optax
        optimizer = optax.adam(1e-3)
        @jax.jit
        def train_step(params, opt_state, x, y):
            grads = jax.grad(loss_fn)(params, x, y)
            updates, opt_state = optimizer.update(grads, opt_state)
            return optax.apply_updates(params, updates), opt_state
        for step in range(1000):
            params, opt_state = train_step(params, opt_state, x, y)
    """
    found = check(source)
    assert [f.id for f in found if f.id.startswith("script.jax")] == []


def test_unjitted_update_function_called_from_loop() -> None:
    source = """\
        from jax import grad, jit
        import jax
        def update(i, opt_state, batch):
            params = get_params(opt_state)
            return opt_update(i, jax.grad(loss)(params, batch), opt_state)
        for i in range(100):
            opt_state = update(i, opt_state, next(batches))
    """
    f = one(source, "script.jax-grad-outside-jit")  # at the def: the function to compile
    assert f.location == "train.py:3" and "`update`" in f.observed
    assert lines(source.replace("        def update", "        @jit\n        def update"),
                 "script.jax-grad-outside-jit") == []


def test_per_scalar_loop_over_jitted_function() -> None:
    source = """\
        import jax
        f = jax.jit(lambda x: x ** 2)
        ys = [f(x) for x in xs]
        out = []
        for x in xs:
            out.append(f(x))
        batched = jax.vmap(f)(xs)
        for batch in batches:
            params = f(params)
    """
    assert lines(source, "script.jax-scalar-loop") == [3, 6]


# -- PyTorch input pipelines and model size -----------------------------------------

LOADER = """\
    import torch
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset, TensorDataset
    class Faces(Dataset):
        def __getitem__(self, i):
            return self.transform(Image.open(self.paths[i]))
    train = Faces()
    loader = DataLoader(train, batch_size=64, shuffle=True)
    fast = DataLoader(train, batch_size=64, num_workers=8)
    mem = DataLoader(TensorDataset(X, Y), batch_size=64)
    kw = DataLoader(train, **loader_kwargs)
    device = torch.device("cuda")
"""


def test_dataloader_with_per_item_work_and_no_workers() -> None:
    f = one(LOADER, "script.dataloader-workers")
    assert f.location == "train.py:8" and "num_workers=4" in f.fix
    assert "Image.open" in f.observed


def test_dataloader_on_cpu_only_script_not_flagged() -> None:
    assert lines(LOADER.replace('torch.device("cuda")', 'torch.device("cpu")'),
                 "script.dataloader-workers") == []


COPIES = """\
    import torch
    X = torch.from_numpy(data)
    Xd = X.to("cuda")
    for epoch in range(10):
        for i in range(0, len(X), 64):
            xb = X[i:i + 64].to("cuda")
            xd = Xd[i:i + 64]
            xf = X[i:i + 64].to(torch.float32)
            loss = model(xb).sum()
            loss.backward()
            opt.step()
        for xb, yb in loader:
            xb = xb.to("cuda")
"""


def test_per_step_copy_of_in_memory_data() -> None:
    assert lines(COPIES, "script.per-step-copy") == [6]  # not the dtype change on line 8


LIST_BATCH = """\
    import torch
    for step in range(100):
        batch = [dataset[j] for j in range(step * 32, step * 32 + 32)]
        xb = torch.tensor(batch)
        ys = []
        for j in idx:
            ys.append(labels[j])
        yb = torch.tensor(ys)
        opt.zero_grad()
        loss = model(xb).sum()
        loss.backward()
        opt.step()
    table = torch.tensor([1, 2, 3])
"""


def test_batches_from_python_lists_each_step() -> None:
    assert lines(LIST_BATCH, "script.list-batches") == [4, 8]


TINY = """\
    import torch
    import torch.nn as nn
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(10, 32)
            self.fc2 = nn.Linear(32, 1)
    model = Net().to("mps")
"""


def test_tiny_torch_model_on_accelerator() -> None:
    f = one(TINY, "script.tiny-model-on-gpu")
    assert f.location == "train.py:8" and "385" in f.observed and "MPS" in f.title


@pytest.mark.parametrize("variant", [
    TINY.replace('.to("mps")', ""),  # stays on the CPU
    TINY.replace("nn.Linear(32, 1)", "nn.Linear(32, 4096)").replace("nn.Linear(10, 32)",
                                                                      "nn.Linear(4096, 32)"
                                                                      ).replace(
        "self.fc2", "self.fc3 = nn.Linear(4096, 4096)\n            self.fc2"),
    TINY.replace("nn.Linear(10, 32)", "nn.Linear(n_in, 32)"),  # unknown size
])
def test_tiny_model_near_misses(variant: str) -> None:
    assert lines(variant, "script.tiny-model-on-gpu") == []


# -- notebooks ----------------------------------------------------------------------

def _notebook(tmp_path: Path, cells: list[tuple[str, str]]) -> Path:
    import json

    nb = {"cells": [{"cell_type": kind, "metadata": {}, "source": src.splitlines(True),
                     **({"outputs": [], "execution_count": None} if kind == "code" else {})}
                    for kind, src in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "train.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def test_notebook_read_cell_by_cell_and_findings_name_the_cell(tmp_path: Path) -> None:
    from devicebench.script_check import inspect_script

    path = _notebook(tmp_path, [
        ("markdown", "# Train\nSome text"),
        ("code", "!pip install tensorflow\n%matplotlib inline\nimport tensorflow as tf"),
        ("code", "%%bash\necho hi"),
        ("code", "x = 1\nopt = tf.keras.optimizers.legacy.Adam()"),
        ("code", "model.compile(run_eagerly=True)"),
    ])
    report = inspect_script(path)
    assert report.kind == "notebook" and report.code_cells == 4
    got = {f.id: f.location for f in report.findings}
    assert got["script.legacy-optimizer"] == f"{path}:cell 4:2"  # import from cell 2 counts
    assert got["script.run-eagerly"] == f"{path}:cell 5:1"
    assert report.to_dict()["findings"] == 2


def test_notebook_line_references_name_cells(tmp_path: Path) -> None:
    path = _notebook(tmp_path, [
        ("code", "import tensorflow as tf\nx = tf.constant(1.0)"),
        ("code", "tf.config.experimental.set_memory_growth(gpu, True)"),
    ])
    (f,) = [f for f in check_script(path) if f.id == "script.memory-growth-late"]
    assert f.location.endswith("cell 2:1") and "cell 1 line 2" in f.observed


def test_notebook_cell_that_is_not_python_is_skipped_not_fatal(tmp_path: Path) -> None:
    from devicebench.script_check import inspect_script

    path = _notebook(tmp_path, [("code", "def f(:\n  pass"),
                                ("code", "model.compile(run_eagerly=True)")])
    report = inspect_script(path)
    assert report.skipped_cells == (1,) and [f.location for f in report.findings] == [
        f"{path}:cell 2:1"]


def test_broken_notebook_json_is_one_clear_error(tmp_path: Path) -> None:
    from devicebench.errors import InputError

    path = tmp_path / "nb.ipynb"
    path.write_text('{"cells": ')
    with pytest.raises(InputError, match="not valid Jupyter JSON"):
        check_script(path)


def test_from_logits_relates_to_the_model_in_its_own_function() -> None:
    source = """\
        import keras
        def classifier():
            out = keras.layers.Dense(3, activation="softmax")
            return keras.Sequential([keras.Input((4,)), out])
        def regressor():
            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
            model.compile("adam", keras.losses.CategoricalCrossentropy(from_logits=True))
            auc = keras.metrics.AUC(from_logits=True)
    """
    assert lines(source, "script.from-logits-softmax") == []


def test_float64_tuple_assignment_cast_later_is_fine() -> None:
    source = """\
        import tensorflow as tf
        (x_train, y_train), (x_test, y_test) = tf.keras.datasets.mnist.load_data()
        x_train, x_test = x_train / 255.0, x_test / 255.0
        x_train = x_train[..., tf.newaxis].astype("float32")
    """
    assert lines(source, "script.float64-input") == [3]  # x_test stays float64
    both = source + '    x_test = x_test[..., tf.newaxis].astype("float32")\n'
    assert lines(both, "script.float64-input") == []


PER_SAMPLE = """\
    import numpy as np
    from keras.models import Sequential
    class Agent:
        def act(self, state):
            return np.argmax(self.model.predict(state)[0])
        def replay(self, minibatch):
            for state, target in minibatch:
                self.model.fit(state, target, epochs=1, verbose=0)
    for episode in range(100):
        state = np.reshape(env.reset(), [1, 4])
        action = agent.act(state)
    for epoch in range(10):
        model.fit(x_train, y_train, epochs=1)
    preds = model.predict(x_test)
"""


def test_keras_predict_and_fit_per_sample() -> None:
    assert lines(PER_SAMPLE, "script.keras-call-per-sample") == [5, 8]
    assert "model(x, training=False)" in check(PER_SAMPLE)[0].fix or any(
        "model(x, training=False)" in f.fix for f in check(PER_SAMPLE))


def test_rl_environment_step_is_not_a_training_step() -> None:
    source = """\
        for t in range(500):
            action = agent.act(state)
            next_state, reward, done, _ = env.step(action)
            if done:
                break
            lr = scheduler.get_last_lr()
            print(lr)
    """
    assert lines(source, "script.sync-in-step-loop") == []


CANONICAL = {
    "torch": """\
        import torch
        import torch.nn.functional as F
        from torchvision import datasets, transforms
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        tf = transforms.Compose([transforms.ToTensor()])
        train = datasets.MNIST("data", train=True, download=True, transform=tf)
        loader = torch.utils.data.DataLoader(train, batch_size=64, num_workers=4,
                                             pin_memory=True)
        model = Net().to(device)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for epoch in range(10):
            model.train()
            total = torch.zeros((), device=device)
            for step, (x, y) in enumerate(loader):
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                opt.zero_grad(set_to_none=True)
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                total += loss.detach()
                if step % 100 == 0:
                    print(f"step {step} loss {loss.item():.4f}")
            print("epoch", epoch, (total / len(loader)).item())
        torch.save(model.state_dict(), "model.pt")
    """,
    "jax": """\
        import jax
        import jax.numpy as jnp
        import optax
        optimizer = optax.adam(1e-3)
        @jax.jit
        def train_step(params, opt_state, x, y):
            loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss
        losses = []
        for step in range(1000):
            params, opt_state, loss = train_step(params, opt_state, xs[step], ys[step])
            losses.append(loss)
        print(jnp.stack(losses).mean())
        batched = jax.vmap(predict, in_axes=(None, 0))(params, test_x)
    """,
    "tf": """\
        import tensorflow as tf
        gpus = tf.config.list_physical_devices("GPU")
        for gpu in gpus:
            tf.config.experimental.set_memory_growth(gpu, True)
        model = tf.keras.Sequential([tf.keras.Input((784,)), tf.keras.layers.Dense(256),
                                     tf.keras.layers.BatchNormalization(),
                                     tf.keras.layers.Dense(10)])
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        @tf.function
        def train_step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        @tf.function
        def eval_step(x):
            return model(x, training=False)
        for epoch in range(5):
            for x, y in train_ds:
                loss = train_step(x, y)
            tf.print("epoch", epoch, loss)
    """,
}


@pytest.mark.parametrize("name", sorted(CANONICAL))
def test_canonical_training_loops_have_no_warning(name: str) -> None:
    found = [f"{f.id}:{f.location}" for f in check(CANONICAL[name]) if f.severity != "info"]
    assert found == []


def test_reset_states_on_rnn_layers_is_fine_on_models_and_metrics_not() -> None:
    source = """\
        import keras
        class Gen(keras.Model):
            def reset(self):
                self.lstm.reset_states()
        acc = keras.metrics.SparseCategoricalAccuracy()
        acc.reset_states()
        rnn = keras.layers.LSTM(8, stateful=True)
        rnn.reset_states()
        decoder.reset_states()
    """
    assert lines(source, "script.keras3-removed") == [6]
