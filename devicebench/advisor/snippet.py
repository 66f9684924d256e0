"""The code that applies a recommendation: what to change in the baseline's training
script (backend, device, threads, precision, compile arguments, input pipeline, batch)."""

from __future__ import annotations

from devicebench.trials.spec import TF32_SWITCH, TrialSpec


def snippet(recommended: TrialSpec, baseline: TrialSpec, batch_size: int | None = None) -> str:
    """Copy-paste code that turns the baseline's training script into the recommended one."""
    lines: list[str] = []
    if recommended.backend != baseline.backend:
        lines += ["import os", f'os.environ["KERAS_BACKEND"] = "{recommended.backend}"'
                  "  # before the first `import keras`", "import keras"]
    if recommended.device != baseline.device:
        if recommended.device == "cpu":
            if recommended.backend == "tensorflow":
                lines += ["import tensorflow as tf",
                          'tf.config.set_visible_devices([], "GPU")  # before any op: CPU only']
            else:
                lines += ['# run on the CPU: set before importing the framework',
                          'os.environ["CUDA_VISIBLE_DEVICES"] = ""'
                          + ('; os.environ["JAX_PLATFORMS"] = "cpu"'
                             if recommended.backend == "jax" else "")]
        elif recommended.device == "mps":
            lines += ['os.environ["KERAS_TORCH_DEVICE"] = "mps"  # before importing keras']
        else:
            index = recommended.device.split(":")[1]
            lines += [f'os.environ["CUDA_VISIBLE_DEVICES"] = "{index}"  # before importing']
    if recommended.threads and recommended.threads != baseline.threads:
        if recommended.backend == "tensorflow":
            lines += ["import tensorflow as tf", "tf.config.threading."
                      f"set_intra_op_parallelism_threads({recommended.threads})  # before any op"]
        elif recommended.backend == "torch":
            lines += ["import torch", f"torch.set_num_threads({recommended.threads})"]
        else:
            lines += [f'os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false '
                      f'intra_op_parallelism_threads={recommended.threads}"  # before import']
    if recommended.precision == "tf32" != baseline.precision:
        module = {"tensorflow": "tensorflow as tf"}.get(recommended.backend,
                                                       recommended.backend)
        lines += [f"import {module}", "# TF32 matmuls and convolutions: changes the math "
                  "(loss-checked)", *TF32_SWITCH[recommended.backend]]
    elif recommended.precision != baseline.precision:
        lines += [f'keras.mixed_precision.set_global_policy("{recommended.precision}")'
                  "  # before building the model"]
    compile_args = []
    if recommended.jit != baseline.jit:
        value = {"on": "True", "off": "False", "auto": '"auto"'}[recommended.jit]
        compile_args.append(f"jit_compile={value}")
    if recommended.steps_per_execution != baseline.steps_per_execution:
        compile_args.append(f"steps_per_execution={recommended.steps_per_execution}")
    if compile_args:
        lines.append(f"model.compile(..., {', '.join(compile_args)})")
    if recommended.pipeline != baseline.pipeline and recommended.pipeline == "tf.data":
        bs = batch_size or "BATCH_SIZE"
        lines += ["import tensorflow as tf",
                  "ds = tf.data.Dataset.from_tensor_slices((x_train, y_train))",
                  f"ds = ds.shuffle(len(x_train)).batch({bs}).prefetch(tf.data.AUTOTUNE)",
                  "model.fit(ds, epochs=...)"]
    if recommended.batch_size != baseline.batch_size and recommended.batch_size:
        lines.append(f"model.fit(..., batch_size={recommended.batch_size})  # changes the "
                     "training: check the loss")
    return "\n".join(dict.fromkeys(lines)) if lines else "# nothing to change"
