"""Per-backend op implementations, used only inside a worker process.

Each backend module defines ``Kernels`` with the same small surface (see
:class:`BaseKernels`): device-resident inputs, the plain op, seed 003's naive call, a
compiled chain of N links, and a device sync. The timed protocol in
:mod:`devicebench.ops.worker` is backend-independent.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from devicebench.ops.spec import CONV_CHANNELS, CONV_KERNEL, OpsConfig

Fn = Callable[..., Any]


class DeviceUnavailable(Exception):
    """The backend cannot use the requested device (the message says why and the fix)."""


def host_inputs(op: str, n: int, channels_last: bool = True) -> list[np.ndarray]:
    """float32 inputs for ``op`` at size ``n``, chosen so that chained links stay finite
    and never reach denormals (which would slow the CPU down): the second operand of
    multiply is in [0.5, 1.5), of matmul the identity, of conv2d a delta kernel."""
    rng = np.random.default_rng(n)

    def uniform(*shape: int) -> np.ndarray:
        return rng.uniform(0.5, 1.5, size=shape).astype(np.float32)

    if op in ("multiply", "add"):
        return [uniform(n, n), uniform(n, n)]
    if op == "matmul":
        return [uniform(n, n), np.eye(n, dtype=np.float32)]
    if op == "conv2d":
        c, k = CONV_CHANNELS, CONV_KERNEL
        if channels_last:
            kernel = np.zeros((k, k, c, c), np.float32)  # HWIO
            kernel[k // 2, k // 2] = np.eye(c, dtype=np.float32)
            return [uniform(1, n, n, c), kernel]
        kernel = np.zeros((c, c, k, k), np.float32)  # OIHW
        kernel[:, :, k // 2, k // 2] = np.eye(c, dtype=np.float32)
        return [uniform(1, c, n, n), kernel]
    return [uniform(n, n)]


def make_chain(link: Fn, length: int) -> Fn:
    """``length`` links chained: the output of each is the first input of the next."""

    def chained(a: Any, *rest: Any) -> Any:
        for _ in range(length):
            a = link(a, *rest)
        return a

    return chained


class BaseKernels:
    """The surface every backend implements; defaults suit a synchronous CPU library."""

    backend = ""
    compiled_with = ""

    def __init__(self, config: OpsConfig) -> None:
        self.config = config
        self.info: dict[str, Any] = {}

    def inputs(self, op: str, n: int) -> tuple[Any, ...]:
        """Device-resident inputs for ``op`` at size ``n``."""
        raise NotImplementedError

    def op(self, op: str) -> Fn:
        """The plain op: one framework call (eager mode)."""
        raise NotImplementedError

    def link(self, op: str) -> Fn:
        """One link of the in-graph chain: same shape in and out. The op itself, except
        reduce_sum, whose output must feed the next link: ``a - mean(a, -1)``."""
        return self.op(op)

    def naive(self, op: str, inputs: tuple[Any, ...]) -> Callable[[], Any]:
        """Seed 003's call: the op inside the device context, as the seed wrote it."""
        f = self.op(op)
        return lambda: f(*inputs)

    def compiled(self, op: str, chain: int) -> Fn:
        """One compiled function holding ``chain`` ops (1: the op itself)."""
        raise NotImplementedError

    def sync(self, out: Any) -> None:
        """Wait until ``out`` is computed (a no-op for synchronous libraries)."""

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """The device context every timed call runs in."""
        yield


def load_kernels(config: OpsConfig) -> BaseKernels:
    """Import the backend (inside the worker) and check that it can use the device.

    Raises:
        DeviceUnavailable: the backend sees no such device.
    """
    module = importlib.import_module(f"devicebench.ops.kernels.{config.backend}")
    return module.Kernels(config)
