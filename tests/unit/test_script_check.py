"""Script check: seed scripts flagged at the right lines, each pitfall and its negative."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from devicebench.env.finding import Finding
from devicebench.env.snapshot import (
    DeviceInfo,
    EnvSnapshot,
    FrameworkProbe,
    HostInfo,
    NvidiaGpu,
    NvidiaSmi,
)
from devicebench.errors import InputError
from devicebench.script_check import check_script, check_source

SCRIPTS = Path(__file__).resolve().parents[1] / "fixtures" / "scripts"
SEED000 = SCRIPTS / "seed000_rnn.py"
SEED003 = SCRIPTS / "seed003_microbench.py"
CLEAN = SCRIPTS / "clean_synced_bench.py"


def line_of(path: Path, text: str, nth: int = 0) -> int:
    """1-based number of the ``nth`` line of ``path`` containing ``text``."""
    hits = [i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if text in line]
    assert len(hits) > nth, f"{text!r} not found {nth + 1} time(s) in {path}"
    return hits[nth]


def src_line(source: str, text: str) -> int:
    return next(i for i, line in enumerate(textwrap.dedent(source).splitlines(), 1)
                if text in line)


def check(source: str, snapshot: EnvSnapshot | None = None) -> list[Finding]:
    return check_source(textwrap.dedent(source), filename="train.py", snapshot=snapshot)


def by_id(findings: list[Finding], fid: str) -> list[Finding]:
    return [f for f in findings if f.id == fid]


def lines(findings: list[Finding], fid: str) -> list[int]:
    return [int(f.location.rsplit(":", 1)[1]) for f in by_id(findings, fid)]


def cpu_snapshot(cpu_flags: list[str] | None = None, **dists: str) -> EnvSnapshot:
    tf = FrameworkProbe(name="tensorflow", version="2.21.0",
                        physical_devices=[DeviceInfo(name="/physical_device:CPU:0", kind="CPU")])
    return EnvSnapshot(
        host=HostInfo(os="Linux", machine="x86_64", cpu_flags=cpu_flags or ["avx2", "fma"]),
        distributions={"tensorflow": "2.21.0", "keras": "3.15.1", **dists},
        frameworks={"tensorflow": tf},
    )


def gpu_snapshot() -> EnvSnapshot:
    gpu = DeviceInfo(name="/physical_device:GPU:0", kind="GPU", description="NVIDIA H100",
                     compute_capability="9.0")
    tf = FrameworkProbe(name="tensorflow", version="2.21.0", physical_devices=[gpu])
    return EnvSnapshot(
        host=HostInfo(os="Linux", machine="x86_64"),
        distributions={"tensorflow": "2.21.0", "keras": "3.15.1"},
        nvidia_smi=NvidiaSmi(driver_version="570.86", cuda_version="12.8",
                             gpus=[NvidiaGpu(name="NVIDIA H100", compute_capability="9.0")]),
        frameworks={"tensorflow": tf},
    )


# -- seed scripts -----------------------------------------------------------------

def test_seed000_legacy_optimizer_flagged_at_its_line() -> None:
    findings = check_script(SEED000)
    (legacy,) = by_id(findings, "script.legacy-optimizer")
    expected = line_of(SEED000, "tf.keras.optimizers.legacy.Adam(")
    assert legacy.location == f"{SEED000}:{expected}"
    assert legacy.severity == "error"
    assert "Keras 3" in legacy.observed
    assert "keras.optimizers.Adam(learning_rate=" in legacy.fix
    assert "optimizers.legacy.Adam" in legacy.observed  # the code snippet


def test_seed000_input_shape_flagged_at_its_line() -> None:
    (finding,) = by_id(check_script(SEED000), "script.input-shape")
    assert finding.location.endswith(f":{line_of(SEED000, 'input_shape=[None, 1]')}")
    assert finding.severity == "warning"
    assert "keras.Input(shape=[None, 1])" in finding.fix
    assert "SimpleRNN" in finding.fix


def test_seed000_with_keras3_snapshot_is_error_naming_the_version() -> None:
    (legacy,) = by_id(check_script(SEED000, cpu_snapshot()), "script.legacy-optimizer")
    assert legacy.severity == "error"
    assert "keras 3.15.1" in legacy.observed


def test_seed003_unsynced_timing_loops_flagged() -> None:
    findings = check_script(SEED003)
    expected = [line_of(SEED003, "for i in range(n):", k) + 1 for k in (0, 1)]  # the timed call
    assert lines(findings, "script.unsynced-timing") == expected
    first = by_id(findings, "script.unsynced-timing")[0]
    assert first.severity == "warning"
    assert "cpu()" in first.observed and "tf.multiply" in first.observed
    assert "devicebench ops" in first.fix and ".numpy()" in first.fix


def test_seed003_gpu_device_around_tiny_constant() -> None:
    findings = check_script(SEED003)
    assert lines(findings, "script.gpu-tiny-op") == [line_of(SEED003, "'/device:GPU:0'")]


def test_clean_synced_benchmark_has_no_findings() -> None:
    assert check_script(CLEAN) == []


def test_findings_are_sorted_by_line() -> None:
    numbers = [int(f.location.rsplit(":", 1)[1]) for f in check_script(SEED003)]
    assert numbers == sorted(numbers)


# -- legacy optimizer variants -------------------------------------------------------

@pytest.mark.parametrize("source, name", [
    ("from tensorflow.keras.optimizers.legacy import SGD\n", "SGD"),
    ("import keras\nopt = keras.optimizers.legacy.RMSprop(0.1)\n", "RMSprop"),
    ("from tensorflow import keras\nopt = keras.optimizers.legacy.Adagrad()\n", "Adagrad"),
    ("import tensorflow.keras.optimizers.legacy as legacy_opts\n", "Adam"),
])
def test_legacy_optimizer_variants(source: str, name: str) -> None:
    (finding,) = by_id(check(source), "script.legacy-optimizer")
    assert f"keras.optimizers.{name}(" in finding.fix
    assert finding.location == f"train.py:{source.count(chr(10))}"


@pytest.mark.parametrize("source", [
    "import keras\nopt = keras.optimizers.Adam(learning_rate=0.005)\n",
    "from tf_keras.optimizers.legacy import Adam\n",
    "legacy = 1\nx = legacy.Adam\n",
])
def test_modern_optimizer_or_tf_keras_not_flagged(source: str) -> None:
    assert by_id(check(source), "script.legacy-optimizer") == []


def test_legacy_optimizer_info_with_tf_keras_and_flag() -> None:
    snap = cpu_snapshot(**{"tf-keras": "2.19.0"})
    snap.env_vars["TF_USE_LEGACY_KERAS"] = "1"
    (via_tf,) = by_id(check("import tensorflow as tf\ntf.keras.optimizers.legacy.Adam()\n", snap),
                      "script.legacy-optimizer")
    assert via_tf.severity == "info"
    assert "TF_USE_LEGACY_KERAS=1" in via_tf.observed
    # plain `keras` is Keras 3 whatever TF_USE_LEGACY_KERAS says
    (direct,) = by_id(check("import keras\nkeras.optimizers.legacy.Adam()\n", snap),
                      "script.legacy-optimizer")
    assert direct.severity == "error"


def test_legacy_optimizer_info_under_keras2() -> None:
    snap = cpu_snapshot(keras="2.15.0")
    (finding,) = by_id(check("import tensorflow as tf\ntf.keras.optimizers.legacy.Adam()\n",
                             snap), "script.legacy-optimizer")
    assert finding.severity == "info"
    assert "2.15.0" in finding.observed


# -- input_shape, run_eagerly ---------------------------------------------------------

def test_input_shape_on_imported_layer_and_keras_input_clean() -> None:
    source = """\
        from tensorflow.keras import layers
        import keras
        a = layers.Dense(10, input_shape=(4,))
        b = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(10)])
        c = layers.Dense(3, input_dim=8)
    """
    findings = check(source)
    assert lines(findings, "script.input-shape") == [src_line(source, "input_shape"),
                                                     src_line(source, "input_dim")]
    assert "keras.Input(shape=(8,))" in by_id(findings, "script.input-shape")[1].fix


def test_input_shape_on_star_imported_layer() -> None:
    source = "from tensorflow.keras.layers import *\nlayer = Dense(1, input_shape=(2,))\n"
    assert lines(check(source), "script.input-shape") == [2]


def test_input_shape_is_info_under_keras2() -> None:
    (finding,) = by_id(check("import keras\nkeras.layers.Dense(1, input_shape=(2,))\n",
                             cpu_snapshot(keras="2.15.0")), "script.input-shape")
    assert finding.severity == "info"


def test_run_eagerly_true_flagged_false_not() -> None:
    source = """\
        model.compile(optimizer="adam", loss="mse", run_eagerly=True)
        model.compile(optimizer="adam", loss="mse", run_eagerly=False)
        tf.config.run_functions_eagerly(True)
    """
    findings = check(source)
    assert lines(findings, "script.run-eagerly") == [1, 3]
    assert by_id(findings, "script.run-eagerly")[0].severity == "warning"


# -- per-step sync ---------------------------------------------------------------------

def test_numpy_in_custom_tf_training_loop() -> None:
    source = """\
        import tensorflow as tf
        for x, y in dataset:
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            history.append(loss.numpy())
    """
    findings = check(source)
    assert lines(findings, "script.sync-in-step-loop") == [src_line(source, "loss.numpy()")]
    assert "line 2" in by_id(findings, "script.sync-in-step-loop")[0].observed


def test_item_and_float_in_torch_loop() -> None:
    source = """\
        for epoch in range(10):
            for batch in loader:
                optimizer.zero_grad()
                loss = criterion(model(batch))
                loss.backward()
                optimizer.step()
                running += loss.item()
                last = float(loss)
                lr = float(epoch)
            print(running.item())
    """
    findings = check(source)
    assert lines(findings, "script.sync-in-step-loop") == [src_line(source, "loss.item()"),
                                                           src_line(source, "float(loss)")]


def test_periodic_or_stepless_sync_not_flagged() -> None:
    source = """\
        for step, batch in enumerate(data):
            loss = train_step(batch)
            if step % 100 == 0:
                print(float(loss), loss.numpy())
        for x in values:
            total += x.numpy()
    """
    assert by_id(check(source), "script.sync-in-step-loop") == []


def test_step_found_through_user_function() -> None:
    source = """\
        def one_batch(x):
            loss = compute(x)
            optimizer.apply_gradients(grads_of(loss))
            return loss
        for x in data:
            loss = one_batch(x)
            print(loss.numpy())
    """
    assert lines(check(source), "script.sync-in-step-loop") == [src_line(source, "print(")]


# -- timing loops ----------------------------------------------------------------------

def test_jax_timing_loop_with_and_without_block_until_ready() -> None:
    unsynced = """\
        import time
        import jax
        import jax.numpy as jnp
        import numpy as np
        t0 = time.perf_counter()
        for _ in range(1000):
            y = jnp.dot(x, x)
        t1 = time.perf_counter()
    """
    (finding,) = by_id(check(unsynced), "script.unsynced-timing")
    assert finding.location == f"train.py:{src_line(unsynced, 'y = jnp.dot')}"
    assert "jax.block_until_ready" in finding.fix
    for sync in ("y.block_until_ready()", "jax.block_until_ready(y)", "np.asarray(y)"):
        synced = unsynced.replace("        t1 =", f"        {sync}\n        t1 =")
        assert by_id(check(synced), "script.unsynced-timing") == [], sync


def test_torch_timing_loop_with_cuda_synchronize_is_clean() -> None:
    source = """\
        import time
        import torch
        start = time.time()
        for _ in range(100):
            z = torch.matmul(a, b)
        torch.cuda.synchronize()
        elapsed = time.time() - start
    """
    assert by_id(check(source), "script.unsynced-timing") == []
    unsynced = source.replace("        torch.cuda.synchronize()\n", "")
    (finding,) = by_id(check(unsynced), "script.unsynced-timing")
    assert "torch.cuda.synchronize()" in finding.fix


def test_timing_numpy_loop_or_untimed_loop_not_flagged() -> None:
    source = """\
        import time
        import numpy as np
        import tensorflow as tf
        start = time.time()
        for _ in range(100):
            np.dot(a, a)
        end = time.time()
        for _ in range(100):
            tf.multiply(a, 2)
    """
    assert by_id(check(source), "script.unsynced-timing") == []


def test_timeit_of_tensor_op_flagged() -> None:
    source = "import timeit\nimport tensorflow as tf\ntimeit.timeit(lambda: tf.add(a, 1))\n"
    assert lines(check(source), "script.unsynced-timing") == [3]


# -- tf.device around tiny constants ---------------------------------------------------

def test_gpu_device_around_tiny_constant_only() -> None:
    source = """\
        import tensorflow as tf
        with tf.device('/GPU:0'):
            y = tf.constant([1.0, 2.0]) * 2
        with tf.device('/CPU:0'):
            y = tf.constant([1.0, 2.0]) * 2
        with tf.device('/GPU:0'):
            y = tf.matmul(tf.random.normal((4096, 4096)), big)
    """
    assert lines(check(source), "script.gpu-tiny-op") == [2]


def test_gpu_device_small_means_small() -> None:
    big_literal = "[" + ", ".join(["1.0"] * 5000) + "]"
    source = textwrap.dedent(f"""\
        import tensorflow as tf
        small = tf.ones((64, 64))
        large = tf.ones((1000, 1000))
        huge = tf.constant({big_literal})
        with tf.device('gpu'):
            tf.multiply(small, 2)
        with tf.device('gpu'):
            tf.multiply(large, 2)
        with tf.device('gpu'):
            tf.multiply(huge, 2)
    """)
    assert lines(check(source), "script.gpu-tiny-op") == [5]


# -- mixed_float16 ---------------------------------------------------------------------

MIXED = "import keras\nkeras.mixed_precision.set_global_policy('mixed_float16')\n"


def test_mixed_float16_without_snapshot_is_generic_warning() -> None:
    (finding,) = by_id(check(MIXED), "script.mixed-float16")
    assert finding.severity == "warning"
    assert finding.location == "train.py:2"
    assert "CPU-only" not in finding.observed and finding.related == ()


def test_mixed_float16_on_cpu_only_machine() -> None:
    (finding,) = by_id(check(MIXED, cpu_snapshot()), "script.mixed-float16")
    assert "CPU-only" in finding.observed
    assert finding.related == ("env.no-gpu",)
    assert "float32" in finding.fix and "lacks AVX512-BF16" in finding.fix


def test_mixed_float16_on_cpu_with_bf16_suggests_bfloat16() -> None:
    snap = cpu_snapshot(cpu_flags=["avx512f", "avx512_bf16", "amx_bf16"])
    (finding,) = by_id(check(MIXED, snap), "script.mixed-float16")
    assert "mixed_bfloat16" in finding.fix and "avx512_bf16" in finding.fix


def test_mixed_float16_on_gpu_machine_is_not_called_cpu_only() -> None:
    (finding,) = by_id(check(MIXED, gpu_snapshot()), "script.mixed-float16")
    assert "CPU-only" not in finding.observed and finding.related == ()
    assert finding.severity == "info" and "H100" in finding.observed


def test_mixed_float16_on_mac_without_metal_is_not_called_cpu_only() -> None:
    snap = cpu_snapshot()
    snap.host = HostInfo(os="Darwin", machine="arm64", apple_chip="Apple M1 Ultra")
    (finding,) = by_id(check(MIXED, snap), "script.mixed-float16")
    assert "CPU-only" not in finding.observed and finding.related == ()
    assert "no framework sees a GPU" in finding.observed


def test_policy_object_and_bfloat16() -> None:
    source = """\
        import tensorflow as tf
        policy = tf.keras.mixed_precision.Policy('mixed_float16')
        tf.keras.mixed_precision.set_global_policy('mixed_bfloat16')
    """
    assert lines(check(source), "script.mixed-float16") == [2]


# -- set_memory_growth ordering --------------------------------------------------------

def test_memory_growth_after_op_is_error() -> None:
    source = """\
        import tensorflow as tf
        x = tf.constant(1.0)
        for gpu in tf.config.list_physical_devices('GPU'):
            tf.config.experimental.set_memory_growth(gpu, True)
    """
    (finding,) = by_id(check(source), "script.memory-growth-late")
    assert finding.severity == "error"
    assert finding.location == f"train.py:{src_line(source, 'set_memory_growth')}"
    assert "line 2" in finding.observed
    assert "Physical devices cannot be modified" in finding.why


def test_memory_growth_first_is_clean() -> None:
    source = """\
        import tensorflow as tf
        (x, y), _ = tf.keras.datasets.mnist.load_data()
        tf.random.set_seed(0)
        gpus = tf.config.list_physical_devices('GPU')
        if gpus:
            try:
                for gpu in gpus:
                    tf.config.experimental.set_memory_growth(gpu, True)
            except RuntimeError as e:
                print(e)
        tf.random.set_seed(0)
        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    """
    assert by_id(check(source), "script.memory-growth-late") == []


def test_memory_growth_after_logical_devices_or_model_in_function() -> None:
    source = """\
        import tensorflow as tf
        def setup():
            model = build_model()
            tf.config.experimental.set_memory_growth(gpu, True)
        def build_model():
            return tf.keras.Sequential([tf.keras.layers.Dense(1)])
        print(tf.config.list_logical_devices())
        tf.config.experimental.set_memory_growth(gpu, True)
    """
    assert lines(check(source), "script.memory-growth-late") == [4, 8]


def test_memory_growth_after_tf_keras_model() -> None:
    source = """\
        import tensorflow as tf
        import tf_keras
        model = tf_keras.Sequential([tf_keras.layers.Dense(1)])
        tf.config.experimental.set_memory_growth(gpu, True)
    """
    assert lines(check(source), "script.memory-growth-late") == [4]


# -- never executes, bad input ---------------------------------------------------------

def test_script_is_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    script = tmp_path / "train.py"
    script.write_text(f"open({str(marker)!r}, 'w').write('x')\nraise SystemExit(3)\n")
    assert check_script(script) == []
    assert not marker.exists()


def test_declared_encoding_is_honoured(tmp_path: Path) -> None:
    script = tmp_path / "latin.py"
    script.write_bytes(b"# -*- coding: latin-1 -*-\nname = '\xe9'\n"
                       b"model.compile(run_eagerly=True)\n")
    assert lines(check_script(script), "script.run-eagerly") == [3]


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.py"
    with pytest.raises(InputError, match="not found") as err:
        check_script(path)
    assert str(path) in str(err.value)


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="directory") as err:
        check_script(tmp_path)
    assert str(tmp_path) in str(err.value) and "fix:" in str(err.value)


def test_syntax_error_names_path_and_line(tmp_path: Path) -> None:
    script = tmp_path / "broken.py"
    script.write_text("import tensorflow as tf\nmodel.fit(x,\n  y epochs=3)\n")
    with pytest.raises(InputError, match="does not parse") as err:
        check_script(script)
    message = str(err.value)
    assert str(script) in message
    assert re.search(r"line [23]: ", message), message
    assert "fix:" in message


def test_check_source_syntax_error_names_filename() -> None:
    with pytest.raises(InputError, match=r"notebook\.py does not parse: line 1"):
        check_source("def f(:\n", filename="notebook.py")


@pytest.mark.parametrize("payload, says", [
    (bytes(range(256)) * 4, "binary file"),  # garbage with NUL bytes
    (b"import os\x00\n", "binary file"),  # valid UTF-8 but a NUL byte
    (b"x = '\xff\xfe\xfa'\n", "not readable as Python source"),  # no NUL, not UTF-8
])
def test_binary_or_undecodable_file(tmp_path: Path, payload: bytes, says: str) -> None:
    script = tmp_path / "model.bin"
    script.write_bytes(payload)
    with pytest.raises(InputError, match=says) as err:
        check_script(script)
    assert str(script) in str(err.value)
