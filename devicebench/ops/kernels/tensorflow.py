"""TensorFlow ops: eager calls, ``tf.function`` chains, sync by fetching a value."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from devicebench.ops.kernels import BaseKernels, DeviceUnavailable, Fn, host_inputs, make_chain
from devicebench.ops.spec import OpsConfig

SMALL_FETCH = 4096  # elements: fetching a tensor this small whole is cheaper than a slice


class Kernels(BaseKernels):
    backend = "tensorflow"
    compiled_with = "tf.function"

    def __init__(self, config: OpsConfig) -> None:
        super().__init__(config)
        start = time.perf_counter()
        import tensorflow as tf

        from devicebench.backends import tensorflow as tf_backend

        self.import_seconds = time.perf_counter() - start
        tf_backend.configure(config.device, config.threads)  # before any op runs
        self.tf = tf
        if config.device == "cpu":
            self.dev = "/CPU:0"
        else:
            if not tf.config.list_logical_devices("GPU"):
                raise DeviceUnavailable(
                    "TensorFlow sees no GPU (a CPU-only build, or the CUDA libraries / "
                    "tensorflow-metal plugin did not load); run `devicebench doctor`")
            self.dev = "/GPU:0"
        threads = tf.config.threading.get_intra_op_parallelism_threads()
        self.info = {"version": tf.__version__, "import_seconds": self.import_seconds,
                     "compiled_with": self.compiled_with, "device_name": self.dev,
                     "intra_op_threads": threads or "all cores",
                     "tf32": bool(tf.config.experimental.tensor_float_32_execution_enabled())}

    def inputs(self, op: str, n: int) -> tuple[Any, ...]:
        tf = self.tf
        with tf.device(self.dev):
            # tf.identity copies the host constant onto the device.
            return tuple(tf.identity(tf.constant(a)) for a in host_inputs(op, n))

    def op(self, op: str) -> Fn:
        tf = self.tf
        table: dict[str, Fn] = {
            "multiply": tf.multiply,
            "add": tf.add,
            "matmul": tf.linalg.matmul,
            "conv2d": lambda x, k: tf.nn.conv2d(x, k, 1, "SAME"),
            "reduce_sum": lambda x: tf.reduce_sum(x, axis=-1),
            "softmax": lambda x: tf.nn.softmax(x, axis=-1),
        }
        return table[op]

    def link(self, op: str) -> Fn:
        if op == "reduce_sum":
            tf = self.tf
            return lambda a: a - tf.reduce_mean(a, axis=-1, keepdims=True)
        return self.op(op)

    def naive(self, op: str, inputs: tuple[Any, ...]) -> Callable[[], Any]:
        tf, dev, f = self.tf, self.dev, self.op(op)

        def call() -> Any:
            with tf.device(dev):  # as seed 003 wrote it: a device context per call
                return f(*inputs)

        return call

    def compiled(self, op: str, chain: int) -> Fn:
        fn = make_chain(self.op(op) if chain == 1 else self.link(op), chain)
        return self.tf.function(fn)

    def sync(self, out: Any) -> None:
        # Fetching a value waits for every op queued before it on the device stream. One
        # element, not the tensor: .numpy() of a 4096x4096 result would time a 64 MB copy.
        if self.dev == "/CPU:0" and out.shape.num_elements() <= SMALL_FETCH:
            out.numpy()
        else:
            self.tf.reshape(out, [-1])[:1].numpy()

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        with self.tf.device(self.dev):
            yield
