"""PyTorch ops: eager calls, traced (or ``torch.compile``d) chains, device syncs."""

from __future__ import annotations

import time
import warnings
from typing import Any

from devicebench.ops.kernels import BaseKernels, DeviceUnavailable, Fn, host_inputs, make_chain
from devicebench.ops.spec import OpsConfig

TRACE_REASON = ("torch.compile is not the default: on a CPU its first compile takes 5-30 s "
                "per op and shape and a compiled 2x2 call costs ~40 µs against ~3 µs eager "
                "(measured on the 2-core dev VM); compiled modes use torch.jit.trace "
                "(pass --torch-compile to use torch.compile)")


class Kernels(BaseKernels):
    backend = "torch"

    def __init__(self, config: OpsConfig) -> None:
        super().__init__(config)
        start = time.perf_counter()
        import torch

        from devicebench.backends import torch as torch_backend

        self.import_seconds = time.perf_counter() - start
        torch_backend.configure(config.device, config.threads)
        self.torch = torch
        if config.device == "cpu":
            self.dev = torch.device("cpu")
        elif config.device == "mps":
            mps = getattr(torch.backends, "mps", None)
            if mps is None or not mps.is_available():
                raise DeviceUnavailable("PyTorch's MPS device is not available (needs macOS "
                                        "12.3+ on Apple Silicon and an arm64 Python)")
            self.dev = torch.device("mps")
        else:
            if not torch.cuda.is_available():
                raise DeviceUnavailable(
                    "PyTorch sees no CUDA GPU (a CPU-only build, or a driver older than the "
                    "build's CUDA); run `devicebench doctor`")
            self.dev = torch.device("cuda:0")  # the parent set CUDA_VISIBLE_DEVICES
        self.compiled_with = "torch.compile" if config.torch_compile else "torch.jit.trace"
        self.info = {"version": torch.__version__, "import_seconds": self.import_seconds,
                     "compiled_with": self.compiled_with, "device_name": str(self.dev),
                     "intra_op_threads": torch.get_num_threads(),
                     # "highest" (the default): float32 matmuls in full float32 math
                     "matmul_precision": torch.get_float32_matmul_precision(),
                     "allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32)}
        if not config.torch_compile:
            self.info["compiled_note"] = TRACE_REASON

    def inputs(self, op: str, n: int) -> tuple[Any, ...]:
        return tuple(self.torch.from_numpy(a).to(self.dev)
                     for a in host_inputs(op, n, channels_last=False))

    def op(self, op: str) -> Fn:
        torch = self.torch
        table: dict[str, Fn] = {
            "multiply": torch.mul,
            "add": torch.add,
            "matmul": torch.matmul,
            "conv2d": lambda x, k: torch.nn.functional.conv2d(x, k, padding=1),
            "reduce_sum": lambda x: torch.sum(x, dim=-1),
            "softmax": lambda x: torch.softmax(x, dim=-1),
        }
        return table[op]

    def link(self, op: str) -> Fn:
        if op == "reduce_sum":
            return lambda a: a - a.mean(dim=-1, keepdim=True)
        return self.op(op)

    def compiled(self, op: str, chain: int) -> Fn:
        fn = make_chain(self.op(op) if chain == 1 else self.link(op), chain)
        torch = self.torch
        if self.config.torch_compile:
            return torch.compile(fn, dynamic=False)
        traced: dict[str, Any] = {}

        def call(*inputs: Any) -> Any:
            if "fn" not in traced:  # trace on the first call, with the real inputs
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    traced["fn"] = torch.jit.trace(fn, inputs, check_trace=False)
            return traced["fn"](*inputs)

        return call

    def sync(self, out: Any) -> None:
        if self.dev.type == "cuda":
            self.torch.cuda.synchronize()
        elif self.dev.type == "mps":
            self.torch.mps.synchronize()
