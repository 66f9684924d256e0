"""Issue 24, round 22: rules written against round21_dev, each with cases that must stay
silent. Compiled extensions the probe does not import (vllm, xformers, flash-attn) against
the torch release their binaries were built for (vllm#1807, vllm#5501, unsloth#8580,
axolotl#892); a CUDA-extension builder beside a CUDA_HOME toolkit of the same major and another
minor than torch's CUDA (AutoGPTQ#203); a GPU missing from torch's arch list read from
nvidia-smi's compute capability when torch's devices carry none (pytorch#146977). Raw inputs
replay through snapshot_from_raw."""

from __future__ import annotations

from devicebench.env.checks import run_checks
from devicebench.env.interpret import snapshot_from_raw

LINUX = {"system": "Linux", "machine": "x86_64", "python_version": "3.10.12",
         "python_implementation": "CPython", "conda_env": False, "python_prefix": "/usr",
         "os_release_name": "Ubuntu 22.04.3 LTS", "kernel_release": "5.15.0-91-generic"}
SMI = {"header": "| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15    CUDA Version: 12.4 |",
       "rows": "0, NVIDIA A100-SXM4-80GB, 81920, 8.0"}


def _torch(version: str, cuda: str, arch: list[str] | None = None, gpu: str = "GPU",
           extra: dict | None = None) -> dict:
    devices = [{"name": "cpu", "kind": "CPU", "description": "cpu"},
               {"name": "cuda:0", "kind": "GPU", "description": gpu}]
    return {"status": "ok", "stderr": "", "result": {
        "name": "torch", "status": "ok", "version": version, "physical_devices": devices,
        "logical_devices": [d["name"] for d in devices], "build": {
            "is_cuda_build": True, "cuda_version": cuda, "is_rocm_build": False,
            "arch_list": arch if arch is not None else ["sm_80", "sm_86", "sm_90"]},
        "extra": extra or {}}}


def _ids(raw: dict) -> dict[str, str]:
    return {f.id: f.severity for f in run_checks(snapshot_from_raw(raw))}


def _raw(dists: dict, torch: dict, *, host: dict | None = None, smi: dict | None = None,
         env: dict | None = None) -> dict:
    return {"host": host or LINUX, "nvidia_smi": smi or SMI, "distributions": dists,
            "frameworks": {"torch": torch}, "env_vars": env or {}}


def _one(raw: dict, fid: str):
    return next(f for f in run_checks(snapshot_from_raw(raw)) if f.id == fid)


# -- extensions built for another torch ---------------------------------------------------------

def test_vllm_pinned_to_torch_23_beside_torch_22_is_warned() -> None:
    raw = _raw({"vllm": "0.5.0", "torch": "2.2.1"}, _torch("2.2.1+cu121", "12.1"))
    f = _one(raw, "extension.built-for-other-torch")
    assert f.severity == "warning" and "torch 2.3" in f.title and "torch==2.3.0" in f.fix


def test_vllm_with_its_own_torch_is_silent() -> None:
    raw = _raw({"vllm": "0.5.0", "torch": "2.3.0"}, _torch("2.3.0+cu121", "12.1"))
    assert "extension.built-for-other-torch" not in _ids(raw)


def test_a_vllm_release_no_row_is_read_for_is_silent() -> None:
    raw = _raw({"vllm": "0.6.3", "torch": "2.2.1"}, _torch("2.2.1+cu121", "12.1"))
    assert "extension.built-for-other-torch" not in _ids(raw)


def test_xformers_built_for_torch_210_beside_211_is_warned() -> None:
    raw = _raw({"xformers": "0.0.34", "torch": "2.11.0+cu130"}, _torch("2.11.0+cu130", "13.0"))
    f = _one(raw, "extension.built-for-other-torch")
    assert "2.10.0" in f.fix and "uninstall xformers" in f.fix


def test_xformers_with_torch_210_is_silent() -> None:
    raw = _raw({"xformers": "0.0.34", "torch": "2.10.0+cu128"}, _torch("2.10.0+cu128", "12.8"))
    assert "extension.built-for-other-torch" not in _ids(raw)


def test_flash_attn_234_on_torch_20_is_warned_and_silent_on_torch_21() -> None:
    old = _raw({"flash-attn": "2.3.4", "torch": "2.0.1"}, _torch("2.0.1+cu117", "11.7"))
    assert "flash-attn==2.3.3" in _one(old, "extension.built-for-other-torch").fix
    new = _raw({"flash-attn": "2.3.4", "torch": "2.1.2"}, _torch("2.1.2+cu121", "12.1"))
    assert "extension.built-for-other-torch" not in _ids(new)
    other = _raw({"flash-attn": "2.3.3", "torch": "2.0.1"}, _torch("2.0.1+cu117", "11.7"))
    assert "extension.built-for-other-torch" not in _ids(other)


# -- CUDA_HOME of another minor beside an extension builder ----------------------------------

def test_auto_gptq_with_cuda_home_118_and_torch_cu117_is_warned() -> None:
    raw = _raw({"auto-gptq": "0.3.2", "torch": "2.0.1"}, _torch("2.0.1+cu117", "11.7"),
               env={"CUDA_HOME": "/usr/local/cuda-11.8"})
    f = _one(raw, "cuda.extension-toolkit-minor")
    assert f.severity == "warning" and "11.7" in f.title and "cu118" in f.fix


def test_the_same_toolkit_no_builder_or_no_cuda_home_is_silent() -> None:
    same = _raw({"auto-gptq": "0.3.2", "torch": "2.0.1"}, _torch("2.0.1+cu117", "11.7"),
                env={"CUDA_HOME": "/usr/local/cuda-11.7"})
    none = _raw({"transformers": "4.31.0", "torch": "2.0.1"}, _torch("2.0.1+cu117", "11.7"),
                env={"CUDA_HOME": "/usr/local/cuda-11.8"})
    unset = _raw({"auto-gptq": "0.3.2", "torch": "2.0.1"}, _torch("2.0.1+cu117", "11.7"))
    for raw in (same, none, unset):
        ids = _ids(raw)
        assert "cuda.extension-toolkit-minor" not in ids
        assert "cuda.extension-toolkit-major" not in ids


def test_a_minor_mismatch_beside_a_builder_not_seen_to_fail_so_is_info() -> None:
    raw = _raw({"deepspeed": "0.14.0", "torch": "2.3.1"}, _torch("2.3.1+cu121", "12.1"),
               env={"CUDA_HOME": "/usr/local/cuda-12.4"})
    assert _ids(raw).get("cuda.extension-toolkit-minor") == "info"


def test_a_major_mismatch_stays_the_error() -> None:
    raw = _raw({"deepspeed": "0.14.0", "torch": "2.0.1"}, _torch("2.0.1+cu117", "11.7"),
               env={"CUDA_HOME": "/usr/local/cuda-12.2"})
    ids = _ids(raw)
    assert ids.get("cuda.extension-toolkit-major") == "error"
    assert "cuda.extension-toolkit-minor" not in ids


# -- the GPU's capability from nvidia-smi when torch's devices carry none ---------------------

BLACKWELL = {"header": "| NVIDIA-SMI 572.16    Driver Version: 572.16    CUDA Version: 12.8 |",
             "rows": "0, NVIDIA GeForce RTX 5090, 32607, 12.0"}


def test_sm_120_missing_from_the_arch_list_read_from_nvidia_smi() -> None:
    raw = _raw({"torch": "2.6.0+cu124"}, _torch(
        "2.6.0+cu124", "12.4", gpu="NVIDIA GeForce RTX 5090",
        extra={"first_use_error": "RuntimeError: CUDA error: no kernel image is available "
                                  "for execution on the device"}), smi=BLACKWELL)
    f = _one(raw, "gpu.arch-not-in-build")
    assert f.severity == "error" and "sm_120" in f.title and "cu128" in f.fix


def test_a_gpu_the_build_covers_read_from_nvidia_smi_is_silent() -> None:
    raw = _raw({"torch": "2.6.0+cu124"}, _torch("2.6.0+cu124", "12.4"))  # A100, sm_80 built
    assert "gpu.arch-not-in-build" not in _ids(raw)
    ptx = _raw({"torch": "2.6.0+cu124"}, _torch("2.6.0+cu124", "12.4",
                                                 arch=["sm_80", "compute_80"]),
               smi={"header": SMI["header"], "rows": "0, NVIDIA H100, 81559, 9.0"})
    assert "gpu.arch-not-in-build" not in _ids(ptx)  # PTX for 8.0 runs on 9.0; no failure
