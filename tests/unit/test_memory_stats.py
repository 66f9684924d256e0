"""Every way a framework says "I cannot report memory on this device" reads as one value,
``unknown``, with the framework's own words kept as the detail (issue 29). The inputs are
the probe worker's raw records, verbatim, as they were seen on real hosts."""

from __future__ import annotations

import pytest

from devicebench.env.interpret import framework_probe_from_worker, memory_stats_from_raw
from devicebench.env.snapshot import FrameworkProbe

TF_CPU = "tf.config.experimental.get_memory_info('CPU:0')"
JAX = "jax.devices()[0].memory_stats()"

# (where it was seen, the worker's raw record, the value, words the detail must keep)
RECORDED = [
    # This project's Intel and AMD VMs, TF 2.21 (probe worker, 2026-12-01).
    ("TF 2.21 on the CPU, zeros", {"call": TF_CPU, "result": {"current": 0, "peak": 0}},
     "unknown", "returned zeros"),
    # Issue 29's AMD EPYC VM, TF 2.21.0: the same call raises instead.
    ("TF 2.21 on the CPU, raises",
     {"call": TF_CPU,
      "error": "ValueError: Allocator stats not available for device 'CPU:0'"},
     "unknown", "Allocator stats not available"),
    # JAX 0.10.2 on the CPU: Device.memory_stats() is None.
    ("JAX on the CPU", {"call": JAX, "result": None}, "unknown", "returned None"),
    ("an empty statistics dict", {"call": JAX, "result": {}}, "unknown", "returned {}"),
    # PJRT plugins without the call (zml/zml#739: "MemoryStats unimplemented" on Metal).
    ("an unimplemented call",
     {"call": JAX, "error": "XlaRuntimeError: UNIMPLEMENTED: MemoryStats is not supported"},
     "unknown", "UNIMPLEMENTED"),
    ("NotImplementedError", {"call": JAX, "error": "NotImplementedError: not implemented"},
     "unknown", "NotImplementedError"),
    # recorded/h200: JAX on the GPU reports bytes in use.
    ("JAX on an H200", {"call": JAX, "result": {"bytes_in_use": 512, "peak_bytes_in_use": 512,
                                                "bytes_limit": 150_000_000_000}},
     "works", ""),
]


@pytest.mark.parametrize(("where", "raw", "value", "words"), RECORDED,
                         ids=[r[0] for r in RECORDED])
def test_each_recorded_outcome_is_interpreted(where, raw, value, words):
    got, detail = memory_stats_from_raw(raw)
    assert got == value, where
    assert words in detail
    if value == "unknown":
        assert not got.startswith("error")


def test_a_real_fault_stays_an_error():
    got, detail = memory_stats_from_raw(
        {"call": TF_CPU, "error": "RuntimeError: CUDA_ERROR_ILLEGAL_ADDRESS"})
    assert got == "error: RuntimeError: CUDA_ERROR_ILLEGAL_ADDRESS"
    assert detail == ""


def test_the_worker_reply_goes_through_the_interpretation():
    reply = {"name": "tensorflow", "status": "ok", "version": "2.21.0",
             "memory_stats_raw": RECORDED[1][1]}
    probe = framework_probe_from_worker("tensorflow", "ok", reply)
    assert probe.memory_stats == "unknown"
    assert "Allocator stats not available for device 'CPU:0'" in probe.memory_stats_detail


@pytest.mark.parametrize("legacy", ["zeros", "unsupported"])
def test_snapshots_saved_before_unknown_existed_read_as_unknown(legacy):
    probe = FrameworkProbe(name="tensorflow", memory_stats=legacy)
    assert probe.memory_stats == "unknown"
    assert probe.memory_stats_detail
