"""Issue 24, round 18 (step 0): the seventeenth set's held-out misses as general rules. An
``undefined symbol: nccl...`` at torch's import read as an NCCL older than the one the torch
release pins (pytorch#119932, pytorch#119072), xformers 0.0.22's built-for row (torch 2.0.1;
xformers#874), and a CPU package installed beside its GPU build (onnxruntime#23736). Each with
cases that must stay silent; raw inputs replay through snapshot_from_raw."""

from __future__ import annotations

from devicebench.env.checks import run_checks
from devicebench.env.interpret import snapshot_from_raw
from tests.unit.env_cases import warned as _ids

HOST = {"system": "Linux", "machine": "x86_64", "python_version": "3.10.14",
        "python_implementation": "CPython", "conda_env": False, "python_prefix": "/home/u/venv"}
SMI = {"header": "| NVIDIA-SMI 535.154.05    Driver Version: 535.154.05    CUDA Version: 12.2  "
                 "   |", "rows": "0, NVIDIA A100-SXM4-80GB, 81920, 8.0"}


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


# Round 18 rules, from round17_dev (jax#19768, ROCm/tensorflow-upstream#2404, sdnext#1805,
# ROCm/jax#268).

def _amd(dists: dict, frameworks: dict, gfx: str = "gfx1100", name: str = "Radeon RX 7900 XTX",
         env: dict | None = None, nvidia: bool = False) -> dict:
    raw = {"host": HOST, "distributions": dict({"numpy": "1.26.4"}, **dists),
           "rocminfo": f"ROCk module is loaded\n  Name:                    {gfx}\n"
                       f"  Marketing Name:          {name}\n",
           "frameworks": frameworks}
    if env:
        raw["env_vars"] = env
    if nvidia:
        raw["nvidia_smi"] = SMI
    return raw


def _tf(version: str, rocm: bool, stderr: str = "", gpu: bool = False) -> dict:
    devices = [{"name": "/physical_device:CPU:0", "kind": "CPU", "description": "cpu"}]
    if gpu:
        devices.append({"name": "/physical_device:GPU:0", "kind": "GPU", "description": "gpu"})
    return {"tensorflow": {"status": "ok", "stderr": stderr, "result": {
        "name": "tensorflow", "status": "ok", "version": version, "physical_devices": devices,
        "logical_devices": [d["name"] for d in devices],
        "build": {"is_cuda_build": not rocm, "cuda_version": "" if rocm else "11.8",
                  "cudnn_version": "", "is_rocm_build": rocm}}}}


def test_pypi_tensorflow_on_an_amd_gpu_is_named() -> None:
    f = _ids(_amd({"tensorflow": "2.12.0"}, _tf("2.12.0", rocm=False)))["rocm.tf-not-rocm"]
    assert "tensorflow-rocm" in f.title and "pip install tensorflow-rocm" in f.fix
    assert "gfx1100" in f.observed and f.source.startswith("https://github.com/")


def test_silent_with_tensorflow_rocm_an_nvidia_gpu_an_igpu_or_a_gpu_seen() -> None:
    for raw in (_amd({"tensorflow-rocm": "2.14.0.600"}, _tf("2.14.0", rocm=True)),
                _amd({"tensorflow": "2.12.0"}, _tf("2.12.0", rocm=False), nvidia=True),
                _amd({"tensorflow": "2.12.0"}, _tf("2.12.0", rocm=False), gfx="gfx1036",
                     name="AMD Radeon Graphics"),
                _amd({"tensorflow": "2.12.0"}, _tf("2.12.0", rocm=False, gpu=True))):
        assert "rocm.tf-not-rocm" not in _ids(raw)


def _ignored(gfx: str, listed: str) -> str:
    return ("I tensorflow/core/common_runtime/gpu/gpu_device.cc:2015] Ignoring visible gpu "
            "device (device: 0, name: Radeon RX 7900 XTX, pci bus id: 0000:03:00.0) with "
            f"AMDGPU version : {gfx}. The supported AMDGPU versions are {listed}.\n")


def test_a_gpu_dropped_by_a_glued_supported_list_is_named() -> None:
    raw = _amd({"tensorflow-rocm": "2.14.0.600"},
               _tf("2.14.0", True, _ignored("gfx1100", "gfx1030gfx1100, gfx900, gfx906")))
    f = _ids(raw)["rocm.tf-supported-list-broken"]
    assert "gfx1100" in f.title and "gfx1030gfx1100" in f.observed
    assert "pip install -U tensorflow-rocm" in f.fix and "2434" in f.fix


def test_silent_when_the_target_is_really_missing_or_listed_apart() -> None:
    missing = _amd({"tensorflow-rocm": "2.14.0.600"},
                   _tf("2.14.0", True, _ignored("gfx1031", "gfx1030gfx1100, gfx900")))
    assert "rocm.tf-supported-list-broken" not in _ids(missing)
    apart = _amd({"tensorflow-rocm": "2.14.0.600"},
                 _tf("2.14.0", True, _ignored("gfx1100", "gfx1030, gfx1100, gfx900")))
    assert "rocm.tf-supported-list-broken" not in _ids(apart)
    assert "rocm.tf-supported-list-broken" not in _ids(
        _amd({"tensorflow-rocm": "2.14.0.600"}, _tf("2.14.0", True)))


def _jax_import_failed(lib: str = "librocm_smi64.so.6") -> dict:
    return {"jax": {"status": "error", "stderr": "", "result": {
        "name": "jax", "status": "error",
        "error": f"ImportError: {lib}: cannot open shared object file: No such file or directory"}}}


_ROCM60 = {"jax": "0.4.35", "jaxlib": "0.4.35", "jax-rocm60-plugin": "0.4.35",
           "jax-rocm60-pjrt": "0.4.35"}


def test_rocm_wheels_for_another_rocm_release_are_named() -> None:
    raw = _amd(_ROCM60, _jax_import_failed(), "gfx942", "AMD Instinct MI300A",
               env={"LD_LIBRARY_PATH": "/opt/rocm-6.2.1/lib"})
    f = _ids(raw)["rocm.wheel-for-another-rocm"]
    assert "ROCm 6.0" in f.title and "librocm_smi64.so.6" in f.title
    assert "6.2.1" in f.observed and "rocm/6.0" in f.fix
    assert "ROCm/jax/issues/268" in f.source


def test_silent_with_the_built_for_rocm_on_the_path_a_non_rocm_lib_or_no_named_release() -> None:
    same = _amd(_ROCM60, _jax_import_failed(), env={"LD_LIBRARY_PATH": "/opt/rocm-6.0.2/lib"})
    assert "rocm.wheel-for-another-rocm" not in _ids(same)
    other = _amd(_ROCM60, _jax_import_failed("libcudart.so.12"),
                 env={"LD_LIBRARY_PATH": "/opt/rocm-6.2.1/lib"})
    assert "rocm.wheel-for-another-rocm" not in _ids(other)
    unnamed = _amd({"jax": "0.4.35", "jaxlib": "0.4.35"}, _jax_import_failed(),
                   env={"LD_LIBRARY_PATH": "/opt/rocm-6.2.1/lib"})
    assert "rocm.wheel-for-another-rocm" not in _ids(unnamed)


def _jax_cuda(jaxlib: str, driver: tuple = ("470.182.03", "11.4")) -> dict:
    return {"host": HOST,
            "nvidia_smi": {"header": f"| NVIDIA-SMI {driver[0]}    Driver Version: {driver[0]}"
                                     f"    CUDA Version: {driver[1]}     |",
                           "rows": "0, NVIDIA A100-PCIE-40GB, 40960, 8.0"},
            "distributions": {"jax": "0.4.24", "jaxlib": jaxlib, "numpy": "1.26.4"},
            "frameworks": {"jax": {"status": "ok", "stderr": "", "result": {
                "name": "jax", "status": "error",
                "error": "XlaRuntimeError: FAILED_PRECONDITION: DNN library initialization "
                         "failed."}}}}


def test_a_cuda12_jaxlib_on_a_cuda11_driver_is_named() -> None:
    f = _ids(_jax_cuda("0.4.24+cuda12.cudnn89"))["cuda.driver-too-old"]
    assert "JAX" in f.title and "CUDA 12" in f.observed and "525" in f.fix


def test_silent_for_a_cuda11_jaxlib_a_cuda12_driver_or_a_plain_jaxlib() -> None:
    assert "cuda.driver-too-old" not in _ids(_jax_cuda("0.4.24+cuda11.cudnn86"))
    assert "cuda.driver-too-old" not in _ids(
        _jax_cuda("0.4.24+cuda12.cudnn89", ("535.154.05", "12.2")))
    assert "cuda.driver-too-old" not in _ids(_jax_cuda("0.4.24"))
