"""Issue 24, round 20 (step 0): the nineteenth set's held-out misses as general rules.
A versioned CUDA symbol (``__nvJitLinkComplete_12_4, version libnvJitLink.so.12``) read as a
loaded library older than the build, naming the copy that shadows the wheel's; a sibling's
symbol (libcublas wanting one from libcublasLt) read as a pair from two releases; XLA's
"kernel version ... does not match DSO version" and "older than the PTX compiler version
12.6.77" read into driver findings naming the driver series; MLX's macOS minimum (13.5) from
the OS version whether or not MLX is imported; tensorflow-text releases known broken beside
their own TensorFlow; torch's MPS macOS minimum said as "macOS 13.0". Each with cases that
must stay silent; raw inputs replay through snapshot_from_raw."""

from __future__ import annotations

from tests.unit.env_cases import warned as _ids

HOST = {"system": "Linux", "machine": "x86_64", "python_version": "3.12.7",
        "python_implementation": "CPython", "conda_env": True,
        "python_prefix": "/home/u/miniconda3/envs/e"}
SMI = {"header": "| NVIDIA-SMI 550.90.07    Driver Version: 550.90.07    CUDA Version: 12.4     |",
       "rows": "0, NVIDIA A100-SXM4-80GB, 81920, 8.0"}


def _torch(error: str, records: list[str] | None = None, libs: list[str] | None = None) -> dict:
    return {"host": HOST, "nvidia_smi": SMI, "distributions": {"torch": "2.5.1"},
            "conda_meta_listing": records or [], "env_lib_listing": libs or [],
            "frameworks": {"torch": {"status": "error", "stderr": "", "result": {
                "name": "torch", "status": "error", "error": error}}}}


NVJIT = ("ImportError: /home/u/miniconda3/envs/e/lib/libcusparse.so.12: undefined symbol: "
         "__nvJitLinkComplete_12_4, version libnvJitLink.so.12")


def test_a_versioned_symbol_names_the_older_loaded_copy_and_the_wheel_fix() -> None:
    f = _ids(_torch(NVJIT, ["libnvjitlink-12.1.105-0.json"], ["libnvJitLink.so.12"]))[
        "cuda.loaded-library-older-than-build"]
    assert "CUDA 12.4" in f.title and "libnvjitlink 12.1.105" in f.observed
    assert "nvidia-nvjitlink-cu12>=12.4" in f.fix and "LD_LIBRARY_PATH" in f.fix
    assert "python3.12/site-packages/nvidia/nvjitlink/lib" in f.fix
    assert "conda install -c nvidia 'libnvjitlink>=12.4'" in f.fix


def test_a_versioned_symbol_outside_conda_says_the_loader_s_first_copy() -> None:
    f = _ids(_torch(NVJIT.replace("/home/u/miniconda3/envs/e/lib/", "/usr/local/cuda/lib64/")))[
        "cuda.loaded-library-older-than-build"]
    assert "conda install" not in f.fix and "the first libnvJitLink.so" in f.observed


def test_silent_without_a_versioned_undefined_symbol() -> None:
    for error in ("ImportError: libcusparse.so.12: cannot open shared object file",
                  "ImportError: /x/libfoo.so: undefined symbol: _ZN3fooEv"):
        found = _ids(_torch(error))
        assert "cuda.loaded-library-older-than-build" not in found
        assert "cuda.sibling-library-mismatch" not in found


CUBLAS = ("OSError: /home/u/miniconda3/envs/e/lib/python3.8/site-packages/torch/lib/../../../../"
          "libcublas.so.11: undefined symbol: cublasLt_for_cublas_HSS, version libcublasLt.so.11")


def test_a_sibling_symbol_is_a_pair_from_two_releases_named_by_the_cudatoolkit_record() -> None:
    f = _ids(_torch(CUBLAS, ["cudatoolkit-11.0.221-h6bb024c_0.json"]))[
        "cuda.sibling-library-mismatch"]
    assert "cudatoolkit 11.0.221" in f.why and "conda install cudatoolkit=" in f.fix
    f = _ids(_torch(CUBLAS))["cuda.sibling-library-mismatch"]
    assert "cudatoolkit" not in f.fix and "LD_LIBRARY_PATH" in f.fix


def test_a_symbol_versioned_by_its_own_library_is_not_a_sibling_mismatch() -> None:
    own = "ImportError: /x/libcudnn.so.8: undefined symbol: foo, version libcudnn.so.8"
    assert "cuda.sibling-library-mismatch" not in _ids(_torch(own))


def _jax(stderr: str, driver: str = "535.183.06", cuda: str = "12.2", gpu: bool = False) -> dict:
    dev = ({"name": "cuda:0", "kind": "GPU", "description": "NVIDIA A100"} if gpu
           else {"name": "cpu:0", "kind": "CPU", "description": "cpu"})
    return {"host": {**HOST, "conda_env": False, "python_prefix": "/venv"},
            "nvidia_smi": {"header": f"| NVIDIA-SMI {driver}    Driver Version: {driver}    "
                                     f"CUDA Version: {cuda}     |",
                           "rows": "0, NVIDIA A100-SXM4-80GB, 81920, 8.0"},
            "distributions": {"jax": "0.4.34", "jaxlib": "0.4.34",
                              "jax-cuda12-plugin": "0.4.34", "jax-cuda12-pjrt": "0.4.34"},
            "frameworks": {"jax": {"status": "ok", "stderr": stderr, "result": {
                "name": "jax", "status": "ok", "version": "0.4.34", "physical_devices": [dev],
                "logical_devices": [dev["name"]], "build": {"jaxlib_version": "0.4.34"},
                "extra": {}}}}}


DSO = ("E external/xla/xla/stream_executor/cuda/cuda_diagnostics.cc:262] kernel version "
       "535.183.6 does not match DSO version 560.28.3 -- cannot find working devices in this "
       "configuration\n")


def test_a_kernel_driver_older_than_the_loaded_libcuda_names_the_driver_series() -> None:
    f = _ids(_jax(DSO))["cuda.kernel-driver-older-than-libcuda"]
    assert "CUDA 12.6" in f.title and "560 series" in f.fix and "CUDA 12.2 or older" in f.fix


def test_silent_when_the_kernel_is_newer_or_no_such_line() -> None:
    newer = DSO.replace("535.183.6 does", "570.1.1 does")
    for stderr in (newer, ""):
        assert "cuda.kernel-driver-older-than-libcuda" not in _ids(_jax(stderr))


PTX = ("W external/xla/xla/service/gpu/nvptx_compiler.cc:930] The NVIDIA driver's CUDA version "
       "is 12.2 which is older than the PTX compiler version 12.6.77. Because the driver is older "
       "than the PTX compiler version, XLA is disabling parallel compilation.\n")


def test_the_ptx_compiler_warning_without_parentheses_names_the_driver_for_it() -> None:
    f = _ids(_jax(PTX, "535.104.05", gpu=True))["cuda.driver-older-than-ptxas"]
    assert f.severity == "warning" and "560.28.03" in f.fix and "ptxas 12.6" in f.title
    assert "cuda.driver-older-than-ptxas" not in _ids(_jax("", "535.104.05", gpu=True))


def _mac(version: str, dists: dict, frameworks: dict | None = None) -> dict:
    return {"host": {"system": "Darwin", "machine": "arm64", "python_version": "3.11.9",
                     "python_implementation": "CPython", "mac_ver": version,
                     "proc_translated": "0", "cpu_brand": "Apple M1", "conda_env": False,
                     "python_prefix": "/Users/u/venv"},
            "distributions": dists, "frameworks": frameworks or {}}


def test_mlx_below_its_macos_minimum_is_said_without_importing_it() -> None:
    f = _ids(_mac("13.0", {"mlx": "0.13.0"}))["macos.package-needs-newer"]
    assert "13.5" in f.title and "macOS 13.5" in f.fix


def test_silent_for_mlx_on_a_new_enough_macos_or_without_mlx() -> None:
    for doc in (_mac("13.5", {"mlx": "0.13.0"}), _mac("14.5", {"mlx": "0.20.0"}),
                _mac("13.0", {"numpy": "1.26.4"})):
        assert "macos.package-needs-newer" not in _ids(doc)


def _tf(dists: dict) -> dict:
    return {"host": {**HOST, "conda_env": False, "python_prefix": "/usr"},
            "distributions": dists, "frameworks": {}}


def test_a_tensorflow_text_release_known_broken_beside_its_own_tensorflow() -> None:
    f = _ids(_tf({"tensorflow-cpu": "2.19.0", "tensorflow-text": "2.19.0"}))[
        "tensorflow.companion-broken-release"]
    assert f.fix == "pip install 'tensorflow-cpu==2.18.1' 'tensorflow-text==2.18.1'"


def test_silent_for_a_working_pair_or_another_tensorflow() -> None:
    for dists in ({"tensorflow": "2.18.1", "tensorflow-text": "2.18.1"},
                  {"tensorflow": "2.20.0", "tensorflow-text": "2.20.1"},
                  {"tensorflow-text": "2.19.0"}):
        assert "tensorflow.companion-broken-release" not in _ids(_tf(dists))


def test_torch_mps_on_macos_12_names_macos_13() -> None:
    probe = {"status": "ok", "stderr": "", "result": {
        "name": "torch", "status": "ok", "version": "2.6.0",
        "physical_devices": [{"name": "cpu", "kind": "CPU", "description": "cpu"}],
        "logical_devices": ["cpu"], "build": {"mps_built": True}, "extra": {}}}
    f = _ids(_mac("12.7.6", {"torch": "2.6.0"}, {"torch": probe}))["gpu.not-seen"]
    assert "macOS 13.0 or newer" in f.fix and "torch<2.5" in f.fix
