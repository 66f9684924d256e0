"""numpy: the CPU reference. Synchronous and uncompiled, so one mode: the plain call."""

from __future__ import annotations

from typing import Any

import numpy as np

from devicebench.ops.kernels import BaseKernels, DeviceUnavailable, Fn, host_inputs
from devicebench.ops.spec import OpsConfig


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


class Kernels(BaseKernels):
    backend = "numpy"
    compiled_with = ""

    def __init__(self, config: OpsConfig) -> None:
        super().__init__(config)
        if config.device != "cpu":
            raise DeviceUnavailable("numpy runs on the CPU only")
        blas = ""
        try:
            cfg = np.show_config(mode="dicts")
            blas = cfg["Build Dependencies"]["blas"]["name"]
        except Exception:
            pass
        self.info = {"version": np.__version__, "import_seconds": 0.0, "blas": blas,
                     "device_name": "cpu"}

    def inputs(self, op: str, n: int) -> tuple[Any, ...]:
        return tuple(host_inputs(op, n))

    def op(self, op: str) -> Fn:
        table: dict[str, Fn] = {
            "multiply": np.multiply,
            "add": np.add,
            "matmul": np.matmul,
            "reduce_sum": lambda x: x.sum(axis=-1),
            "softmax": _softmax,
        }
        return table[op]

    def compiled(self, op: str, chain: int) -> Fn:
        raise NotImplementedError("numpy has no compiler")
