"""Issue 24, round 21 (step 0): the twentieth set's held-out misses as general rules.
ptxas's own "does not support CC X.Y" / "Value 'sm_XY' is not defined for option 'gpu-name'"
lines in any framework's output read as the ptxas it compiles with (JAX's nvcc wheel, Triton's,
TensorFlow's toolkit) older than the GPU; onnxruntime-gpu's CUDA major per release (PyPI: 11.8
before 1.19, 12 from 1.19) in the per-package CUDA-major table; inside WSL2 a Linux driver's
libcuda in ldconfig's cache beside Numba even when torch sees the GPU. Each with cases that
must stay silent; raw inputs replay through snapshot_from_raw."""

from __future__ import annotations

from tests.unit.env_cases import warned as _ids

HOST = {"system": "Linux", "machine": "x86_64", "python_version": "3.11.11",
        "python_implementation": "CPython", "conda_env": False, "python_prefix": "/venv"}
BLACKWELL = {"header": "| NVIDIA-SMI 575.57.08    Driver Version: 575.57.08    CUDA Version: "
             "12.9     |", "rows": "0, NVIDIA RTX PRO 6000 Blackwell, 97887, 12.0"}
GPU = {"name": "cuda:0", "kind": "GPU", "description": "NVIDIA GPU", "compute_capability": "8.6"}


def _jax(first_use: str, nvcc: str = "12.6.85") -> dict:
    return {"host": HOST, "nvidia_smi": BLACKWELL,
            "distributions": {"jax": "0.4.34", "jaxlib": "0.4.34", "jax-cuda12-plugin": "0.4.34",
                              "nvidia-cuda-nvcc-cu12": nvcc},
            "frameworks": {"jax": {"status": "ok", "stderr": "", "result": {
                "name": "jax", "status": "ok", "version": "0.4.34",
                "physical_devices": [{"name": "cuda:0", "kind": "GPU", "description": "x"}],
                "logical_devices": ["cuda:0"], "build": {"jaxlib_version": "0.4.34"},
                "extra": {"first_use_error": first_use} if first_use else {}}}}}


def test_ptxas_not_supporting_the_cc_names_the_nvcc_wheel_for_jax() -> None:
    f = _ids(_jax("XlaRuntimeError: UNIMPLEMENTED: ptxas does not support CC 12.0"))[
        "ptxas.older-than-gpu"]
    assert f.severity == "error" and "12.8" in f.fix and "nvidia-cuda-nvcc-cu12" in f.fix
    assert "XLA_FLAGS" not in f.fix and "12.6.85" in f.observed


def test_ptxas_gpu_name_line_reads_the_target_for_triton() -> None:
    doc = _jax("")
    doc["frameworks"] = {"torch": {"status": "ok", "stderr": "", "result": {
        "name": "torch", "status": "ok", "version": "2.5.1+cu124",
        "physical_devices": [GPU | {"compute_capability": "12.0"}], "logical_devices": ["cuda:0"],
        "build": {"is_cuda_build": True, "cuda_version": "12.4"},
        "extra": {"first_use_error": "ptxas fatal   : Value 'sm_120a' is not defined for "
                                     "option 'gpu-name'"}}}}
    f = _ids(doc)["ptxas.older-than-gpu"]
    assert "TRITON_PTXAS_PATH" in f.fix and "sm_120" in f.fix and "12.8" in f.observed


def test_no_ptxas_line_is_silent() -> None:
    assert "ptxas.older-than-gpu" not in _ids(_jax(""))
    assert "ptxas.older-than-gpu" not in _ids(_jax("XlaRuntimeError: out of memory"))


def _ort(version: str, ldconfig: str, dists: dict | None = None) -> dict:
    return {"host": HOST | {"kernel_release": "6.8.0-85-generic"},
            "nvidia_smi": BLACKWELL, "ldconfig": ldconfig,
            "distributions": {"onnxruntime-gpu": version, **(dists or {})}}


CUDA12 = "\tlibcudart.so.12 (libc6,x86-64) => /usr/local/cuda-12.1/lib64/libcudart.so.12\n"
CUDA11 = "\tlibcudart.so.11.0 (libc6,x86-64) => /usr/local/cuda-11.8/lib64/libcudart.so.11.0\n"


def test_onnxruntime_gpu_before_1_19_on_cuda_12_names_the_cuda_12_build() -> None:
    f = _ids(_ort("1.18.0", CUDA12))["cuda.package-for-another-major"]
    assert "onnxruntime-gpu" in f.title and "1.19" in f.fix and "onnxruntime-cuda-12" in f.fix
    f = _ids(_ort("1.17.0", "", {"nvidia-cuda-runtime-cu12": "12.4.127"}))[
        "cuda.package-for-another-major"]
    assert "CUDA 11" in f.title


def test_onnxruntime_gpu_of_the_environments_major_is_silent() -> None:
    assert "cuda.package-for-another-major" not in _ids(_ort("1.19.2", CUDA12))
    assert "cuda.package-for-another-major" not in _ids(_ort("1.18.0", CUDA11))
    assert "cuda.package-for-another-major" not in _ids(_ort("1.18.0", ""))  # no CUDA found


WSL = HOST | {"kernel_release": "5.15.90.1-microsoft-standard-WSL2",
              "os_release_name": "Ubuntu 22.04.2 LTS"}
WSL_LIB = ("\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/wsl/lib/libcuda.so.1\n"
           "\tlibcuda.so (libc6,x86-64) => /usr/lib/wsl/lib/libcuda.so\n")
LINUX_LIB = "\tlibcuda.so (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so\n"
TORCH_OK = {"torch": {"status": "ok", "stderr": "", "result": {
    "name": "torch", "status": "ok", "version": "2.0.1+cu118", "physical_devices": [GPU],
    "logical_devices": ["cuda:0"], "build": {"is_cuda_build": True, "cuda_version": "11.8"}}}}


def _wsl(ldconfig: str, dists: dict, **host: object) -> dict:
    return {"host": WSL | host, "ldconfig": ldconfig, "distributions": dists,
            "frameworks": TORCH_OK, "nvidia_smi": {
                "header": "| NVIDIA-SMI 530.50    Driver Version: 530.50    CUDA Version: 12.1 |",
                "rows": "0, NVIDIA GeForce RTX 3080, 10240, 8.6"}}


def test_wsl_linux_libcuda_beside_numba_is_said_though_torch_sees_the_gpu() -> None:
    f = _ids(_wsl(WSL_LIB + LINUX_LIB, {"numba": "0.57.0", "torch": "2.0.1"}))[
        "wsl.linux-libcuda-beside-loader"]
    assert f.severity == "warning" and "libcuda" in f.title
    assert "libnvidia-compute" in f.fix and "/usr/lib/wsl/lib" in f.fix


def test_healthy_wsl_and_other_cases_stay_silent() -> None:
    rule = "wsl.linux-libcuda-beside-loader"
    assert rule not in _ids(_wsl(WSL_LIB, {"numba": "0.57.0", "torch": "2.0.1"}))  # WSL's only
    assert rule not in _ids(_wsl(WSL_LIB + LINUX_LIB, {"torch": "2.0.1"}))  # no Numba
    stub = "\tlibcuda.so (libc6,x86-64) => /usr/local/cuda/lib64/stubs/libcuda.so\n"
    assert rule not in _ids(_wsl(WSL_LIB + stub, {"numba": "0.57.0"}))  # a toolkit's stub
    assert rule not in _ids(_wsl(WSL_LIB + LINUX_LIB, {"numba": "0.57.0"}, in_container=True))
    native = _wsl(LINUX_LIB, {"numba": "0.57.0"}, kernel_release="6.8.0-85-generic")
    assert rule not in _ids(native)  # not WSL: the Linux driver is the right one
