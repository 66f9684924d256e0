"""JAX ops: eager (op-by-op) calls, ``jax.jit`` chains, ``block_until_ready``."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from devicebench.ops.kernels import BaseKernels, DeviceUnavailable, Fn, host_inputs, make_chain
from devicebench.ops.spec import OpsConfig


class Kernels(BaseKernels):
    backend = "jax"
    compiled_with = "jax.jit"

    def __init__(self, config: OpsConfig) -> None:
        super().__init__(config)
        start = time.perf_counter()
        import jax
        import jax.numpy as jnp

        self.import_seconds = time.perf_counter() - start
        self.jax, self.jnp = jax, jnp
        if config.device == "cpu":
            self.dev = jax.devices("cpu")[0]
        else:
            try:
                accel = list(jax.devices("gpu"))
            except RuntimeError:
                accel = [d for d in jax.devices() if d.platform != "cpu"]
            if not accel:
                raise DeviceUnavailable(
                    "JAX sees no GPU (install jax[cuda12] for NVIDIA GPUs, jax-metal for "
                    "Apple GPUs); run `devicebench doctor`")
            self.dev = accel[0]
        self.info = {"version": jax.__version__, "import_seconds": self.import_seconds,
                     "compiled_with": self.compiled_with,
                     "device_name": f"{self.dev.platform}:{self.dev.id}",
                     # None: jax's default, TF32 for float32 matmuls on NVIDIA GPUs
                     "matmul_precision": str(jax.config.jax_default_matmul_precision)}

    def inputs(self, op: str, n: int) -> tuple[Any, ...]:
        return tuple(self.jax.device_put(a, self.dev) for a in host_inputs(op, n))

    def op(self, op: str) -> Fn:
        jax, jnp = self.jax, self.jnp
        table: dict[str, Fn] = {
            "multiply": jnp.multiply,
            "add": jnp.add,
            "matmul": jnp.matmul,
            "conv2d": lambda x, k: jax.lax.conv_general_dilated(
                x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
            "reduce_sum": lambda x: jnp.sum(x, axis=-1),
            "softmax": lambda x: jax.nn.softmax(x, axis=-1),
        }
        return table[op]

    def link(self, op: str) -> Fn:
        if op == "reduce_sum":
            jnp = self.jnp
            return lambda a: a - jnp.mean(a, axis=-1, keepdims=True)
        return self.op(op)

    def naive(self, op: str, inputs: tuple[Any, ...]) -> Callable[[], Any]:
        jax, dev, f = self.jax, self.dev, self.op(op)

        def call() -> Any:
            with jax.default_device(dev):  # seed 003's per-call device context
                return f(*inputs)

        return call

    def compiled(self, op: str, chain: int) -> Fn:
        fn = make_chain(self.op(op) if chain == 1 else self.link(op), chain)
        return self.jax.jit(fn)

    def sync(self, out: Any) -> None:
        out.block_until_ready()  # JAX dispatches asynchronously, on the CPU too

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        with self.jax.default_device(self.dev):
            yield
