"""Issue 24, round 18 (step 0): the seventeenth set's held-out misses as general rules. An
``undefined symbol: nccl...`` at torch's import read as an NCCL older than the one the torch
release pins (pytorch#119932, pytorch#119072), xformers 0.0.22's built-for row (torch 2.0.1;
xformers#874), and a CPU package installed beside its GPU build (onnxruntime#23736). Each with
cases that must stay silent; raw inputs replay through snapshot_from_raw."""

from __future__ import annotations

from devicebench.env.checks import run_checks
from devicebench.env.interpret import snapshot_from_raw

HOST = {"system": "Linux", "machine": "x86_64", "python_version": "3.10.14",
        "python_implementation": "CPython", "conda_env": False, "python_prefix": "/home/u/venv"}
SMI = {"header": "| NVIDIA-SMI 535.154.05    Driver Version: 535.154.05    CUDA Version: 12.2  "
                 "   |", "rows": "0, NVIDIA A100-SXM4-80GB, 81920, 8.0"}


def _ids(doc: dict) -> dict:
    return {f.id: f for f in run_checks(snapshot_from_raw(doc)) if f.severity != "info"}


def _torch_failed(dists: dict, symbol: str = "ncclCommRegister") -> dict:
    error = (f"ImportError: /home/u/venv/lib/python3.10/site-packages/torch/lib/"
             f"libtorch_cuda.so: undefined symbol: {symbol}")
    return {"host": HOST, "nvidia_smi": SMI,
            "distributions": dict({"numpy": "1.26.4"}, **dists),
            "frameworks": {"torch": {"status": "error", "stderr": "", "result": {
                "name": "torch", "status": "error", "error": error}}}}


def test_an_nccl_symbol_missing_at_torch_import_names_the_nccl_torch_pins() -> None:
    f = _ids(_torch_failed({"torch": "2.2.0", "nvidia-nccl-cu12": "2.18.1"}))[
        "torch.nccl-older-than-build"]
    assert f.severity == "error" and "2.19.3" in f.title and "ncclCommRegister" in f.observed
    assert "pip install 'nvidia-nccl-cu12==2.19.3'" in f.fix
    assert "pytorch/pytorch/issues/119932" in f.source
    # the wheel is the pinned one: another libnccl.so.2 is found first
    g = _ids(_torch_failed({"torch": "2.2.0", "nvidia-nccl-cu12": "2.19.3"}))[
        "torch.nccl-older-than-build"]
    assert "LD_LIBRARY_PATH" in g.fix and "torch 2.1.2" in g.fix
    # a release not in the table: no pin is invented
    h = _ids(_torch_failed({"torch": "2.5.1"}, "ncclCommWindowRegister"))[
        "torch.nccl-older-than-build"]
    assert "the NCCL its wheels were built with" in h.title and "==" not in h.fix


def test_silent_for_other_symbols_a_working_torch_or_a_cu11_nccl_beside() -> None:
    other = _ids(_torch_failed({"torch": "2.2.0"}, "_ZN3c104cuda9SetDeviceEi"))
    assert "torch.nccl-older-than-build" not in other
    ok = _torch_failed({"torch": "2.2.0", "nvidia-nccl-cu12": "2.18.1"})
    ok["frameworks"]["torch"] = {"status": "ok", "stderr": "", "result": {
        "name": "torch", "status": "ok", "version": "2.2.0+cu121", "physical_devices": [],
        "logical_devices": [], "build": {"is_cuda_build": True, "cuda_version": "12.1"},
        "extra": {}}}
    assert "torch.nccl-older-than-build" not in _ids(ok)
    mixed = _ids(_torch_failed({"torch": "2.3.1", "nvidia-nccl-cu12": "2.20.5",
                                "nvidia-nccl-cu11": "2.14.3"}))
    assert "torch.nccl-older-than-build" not in mixed
    assert "stack.mixed-cuda-major-wheels" in mixed


def _xformers(xf: str, torch: str) -> dict:
    return {"host": dict(HOST, system="Windows", machine="AMD64"), "nvidia_smi": SMI,
            "distributions": {"torch": torch, "xformers": xf, "numpy": "1.26.0"}}


def test_xformers_0_0_22_is_paired_with_torch_2_0_1() -> None:
    found = [f for f in run_checks(snapshot_from_raw(_xformers("0.0.22", "2.1.0")))
             if f.severity != "info" and "xformers" in f.title and "2.0.1" in f.title]
    assert found and "xformers" in found[0].fix


def test_silent_for_xformers_0_0_22_on_torch_2_0_1_and_for_post7_on_2_1_0() -> None:
    for xf, torch in (("0.0.22", "2.0.1"), ("0.0.22.post7", "2.1.0")):
        found = [f for f in run_checks(snapshot_from_raw(_xformers(xf, torch)))
                 if f.severity != "info" and "xformers" in f.title.lower()]
        assert found == [], (xf, torch, found)


def _pkgs(dists: dict, gpu: bool = True) -> dict:
    raw = {"host": HOST, "distributions": dict({"numpy": "1.26.4"}, **dists)}
    if gpu:
        raw["nvidia_smi"] = SMI
    return raw


def test_a_cpu_package_beside_its_gpu_build_is_named() -> None:
    f = _ids(_pkgs({"onnxruntime": "1.19.0", "onnxruntime-gpu": "1.19.0"}))[
        "stack.cpu-package-beside-gpu-package"]
    assert "onnxruntime-gpu" in f.title and "pip uninstall onnxruntime onnxruntime-gpu" in f.fix
    assert f.fix.endswith("(it runs on the CPU too)") and "pip install onnxruntime-gpu" in f.fix
    p = _ids(_pkgs({"paddlepaddle": "2.6.1", "paddlepaddle-gpu": "2.6.1"}, gpu=False))
    assert "paddlepaddle-gpu" in p["stack.cpu-package-beside-gpu-package"].title


def test_silent_with_only_one_of_the_two_packages() -> None:
    for dists in ({"onnxruntime-gpu": "1.19.0"}, {"onnxruntime": "1.19.0"}, {}):
        assert "stack.cpu-package-beside-gpu-package" not in _ids(_pkgs(dists)), dists
