"""Round 14's general mechanisms (issue 24). Step 0, from the thirteenth set's held-out misses
(studied after that set was scored):

* a ``[[framework_says]]`` fix template names the installed torch's own wheel index
  (``{torch_index}``, from its ``+cuXYZ`` tag) and the add-on release ``[[addon_builds]]``
  pairs with the installed torch release (``{addon_release}``): xformers' "built for PyTorch
  ... (you have ...)" is fixed with a command, not a placeholder;
* TensorFlow's "Cannot dlopen some GPU libraries" naming no library (TensorFlow >= 2.16
  prints no "Could not load dynamic library" line) with no GPU registered and the nvidia-*
  wheels' libraries not found by the loader -> ``cuda.wheel-libs-not-on-path`` with the
  wheels' directories on LD_LIBRARY_PATH.

From ``round13_dev`` (7/12 before, 11/12 after):

* CUDA error 802 (CUDA_ERROR_SYSTEM_NOT_READY) -> the NVIDIA Fabric Manager of NVSwitch
  systems (``[[framework_says]]`` ``cuda.system-not-ready``);
* a WSL2 container whose CUDA init fails with error 500 beside a Windows driver >= 555 -> the
  NVIDIA Container Toolkit that does not mount libnvdxgdmal.so.1
  (``wsl.container-driver-lib-missing``);
* torch's import failing on a ROCm library (libMIOpen, libamdhip64 ...) -> a ROCm build whose
  libraries are off the loader's path, TheRock's rocm-sdk wheel directories named when
  installed (``rocm.libs-not-on-path``; ``rocm.torch-not-rocm`` no longer calls it a CPU build);
* an add-on that sets TF_USE_LEGACY_KERAS in the process (transformers) beside TensorFlow 2.15
  without tf_keras (``[[sets_legacy_keras]]``, ``keras.addon-sets-legacy-keras``);
* MLX counts as an installed framework (no "no framework installed" warning beside it).

Each reads what the probe records and stays silent where the cause is absent.
"""

from __future__ import annotations

from devicebench.env.messages import reported_facts
from tests.unit.env_cases import findings_by_id as _ids


def _linux() -> dict:
    return {"system": "Linux", "machine": "x86_64", "python_version": "3.11.9",
            "kernel_release": "6.5.0-41-generic", "os_release_name": "Ubuntu 22.04.4 LTS",
            "python_prefix": "/home/u/venv", "python_executable": "/home/u/venv/bin/python"}


_SMI = {"header": "| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15    CUDA Version: "
                  "12.4     |", "rows": "0, NVIDIA GeForce RTX 3090, 24576, 8.6"}

_XF = ("WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:\n"
       "    PyTorch {built} with CUDA 1201 (you have {have})\n    Python  3.11.9 (you have "
       "3.11.9)\n  Please reinstall xformers\n")


def _torch(version: str, stderr: str = "") -> dict:
    return {"status": "ok", "stderr": stderr, "result": {
        "name": "torch", "status": "ok", "version": version,
        "physical_devices": [{"name": "cpu", "kind": "CPU", "description": "cpu"},
                             {"name": "cuda:0", "kind": "GPU",
                              "description": "NVIDIA GeForce RTX 3090",
                              "compute_capability": "8.6"}],
        "logical_devices": ["cpu", "cuda:0"],
        "build": {"is_cuda_build": True, "cuda_version": "12.4",
                  "arch_list": ["sm_80", "sm_86", "sm_90"]}, "extra": {}}}


def test_xformers_fix_names_the_installed_torchs_index_and_paired_release() -> None:
    raw = {"host": _linux(), "nvidia_smi": _SMI,
           "distributions": {"torch": "2.5.1+cu124", "xformers": "0.0.28.post3"},
           "frameworks": {"torch": _torch("2.5.1+cu124", _XF.format(
               built="2.5.1+cu121", have="2.5.1+cu124"))}}
    (f,) = _ids(raw)["xformers.built-for-another-torch"]
    assert "https://download.pytorch.org/whl/cu124" in f.fix
    assert "xformers==0.0.28.post3" in f.fix and "<the cuXXX" not in f.fix


def test_xformers_fix_keeps_the_placeholder_for_an_untagged_torch() -> None:
    raw = {"host": _linux(), "nvidia_smi": _SMI,
           "distributions": {"torch": "2.5.1", "xformers": "0.0.28.post3"},
           "frameworks": {"torch": _torch("2.5.1", _XF.format(built="2.5.1+cu121",
                                                               have="2.5.1"))}}
    (f,) = _ids(raw)["xformers.built-for-another-torch"]
    assert "<the cuXXX of your torch>" in f.fix  # no tag to read: nothing invented


def test_xformers_built_for_this_torch_stays_silent() -> None:
    raw = {"host": _linux(), "nvidia_smi": _SMI,
           "distributions": {"torch": "2.6.0+cu124", "xformers": "0.0.29.post2"},
           "frameworks": {"torch": _torch("2.6.0+cu124")}}
    ids = _ids(raw)
    assert "xformers.built-for-another-torch" not in ids
    assert "stack.addon-built-for-other-release" not in ids  # 0.0.29.post2 is torch 2.6.0's


_DLOPEN = ("W tensorflow/core/common_runtime/gpu/gpu_device.cc:2251] Cannot dlopen some GPU "
           "libraries. Please make sure the missing libraries mentioned above are installed "
           "properly if you would like to use GPU.\nSkipping registering GPU devices...\n")
_SITE = "/home/u/venv/lib/python3.11/site-packages/nvidia"


def _tf(stderr: str, gpu: bool = False) -> dict:
    devices = [{"name": "/physical_device:CPU:0", "kind": "CPU", "description": "cpu"}]
    if gpu:
        devices.append({"name": "/physical_device:GPU:0", "kind": "GPU",
                        "description": "NVIDIA GeForce RTX 3090"})
    return {"status": "ok", "stderr": stderr, "result": {
        "name": "tensorflow", "status": "ok", "version": "2.16.1",
        "physical_devices": devices, "logical_devices": [d["name"] for d in devices],
        "build": {"is_cuda_build": True, "cuda_version": "12.3", "cudnn_version": "8"}}}


def _tf_raw(stderr: str, gpu: bool = False) -> dict:
    return {"host": _linux(), "nvidia_smi": _SMI,
           "distributions": {"tensorflow": "2.16.1", "nvidia-cudnn-cu12": "8.9.7.29",
                             "nvidia-cublas-cu12": "12.3.4.1",
                             "nvidia-cuda-runtime-cu12": "12.3.101"},
           "wheel_lib_listing": {f"{_SITE}/cudnn/lib": ["libcudnn.so.8"],
                                 f"{_SITE}/cublas/lib": ["libcublas.so.12"],
                                 f"{_SITE}/cuda_runtime/lib": ["libcudart.so.12"]},
           "frameworks": {"tensorflow": _tf(stderr, gpu)}}


def test_unnamed_dlopen_failure_is_a_fact_only_without_named_libraries() -> None:
    assert reported_facts(_DLOPEN) == {"dlopen_unnamed": True}
    named = ("Could not load dynamic library 'libcudnn.so.8'; dlerror: libcudnn.so.8: cannot "
             "open shared object file\n" + _DLOPEN)
    assert "dlopen_unnamed" not in reported_facts(named)


def test_cannot_dlopen_naming_nothing_points_at_the_wheels_directories() -> None:
    (f,) = _ids(_tf_raw(_DLOPEN))["cuda.wheel-libs-not-on-path"]
    assert "2.16.1" in f.title and "without naming one" in f.observed
    assert f"LD_LIBRARY_PATH={_SITE}/cublas/lib:" in f.fix and f"{_SITE}/cudnn/lib" in f.fix


def test_cannot_dlopen_stays_silent_when_a_gpu_registered_or_no_wheels() -> None:
    assert "cuda.wheel-libs-not-on-path" not in _ids(_tf_raw(_DLOPEN, gpu=True))
    assert "cuda.wheel-libs-not-on-path" not in _ids(_tf_raw(""))  # nothing said
    raw = _tf_raw(_DLOPEN)
    del raw["wheel_lib_listing"]
    raw["distributions"] = {"tensorflow": "2.16.1"}  # system CUDA, no wheels
    assert "cuda.wheel-libs-not-on-path" not in _ids(raw)


# ---- round 14's rules from round13_dev (7/12 before, 11/12 after) ------------------------

_SMI_H100 = {"header": "| NVIDIA-SMI 550.90.07    Driver Version: 550.90.07    CUDA Version: "
                       "12.4     |", "rows": "0, NVIDIA H100 80GB HBM3, 81559, 9.0"}


def _jax_failed(stderr: str) -> dict:
    return {"status": "ok", "stderr": stderr, "result": {
        "name": "jax", "status": "error",
        "error": "RuntimeError: Unable to initialize backend 'cuda': FAILED_PRECONDITION: No "
                 "visible GPU devices."}}


def test_cuda_error_802_names_the_fabric_manager() -> None:
    raw = {"host": _linux(), "nvidia_smi": _SMI_H100,
           "distributions": {"jax": "0.4.35", "jaxlib": "0.4.35", "jax-cuda12-plugin": "0.4.35"},
           "frameworks": {"jax": _jax_failed(
               "E external/xla/xla/stream_executor/cuda/cuda_driver.cc:152] failed call to "
               "cuInit: INTERNAL: CUDA error: Failed call to cuInit: CUDA_ERROR_SYSTEM_NOT_READY: "
               "system not yet initialized\n")}}
    (f,) = _ids(raw)["cuda.system-not-ready"]
    assert f.severity == "error" and "Fabric Manager" in f.title
    assert "nvidia-fabricmanager" in f.fix


def test_another_cuinit_failure_does_not_name_the_fabric_manager() -> None:
    raw = {"host": _linux(), "nvidia_smi": _SMI_H100,
           "distributions": {"jax": "0.4.35", "jaxlib": "0.4.35", "jax-cuda12-plugin": "0.4.35"},
           "frameworks": {"jax": _jax_failed("E cuda_driver.cc:152] failed call to cuInit: "
                                             "CUDA_ERROR_NO_DEVICE: no CUDA-capable device\n")}}
    assert "cuda.system-not-ready" not in _ids(raw)


_WSL_KERNEL = "5.15.153.1-microsoft-standard-WSL2"


def _wsl_container(driver: str, stderr: str, container: bool = True) -> dict:
    host = dict(_linux(), kernel_release=_WSL_KERNEL, in_container=container)
    return {"host": host,
            "nvidia_smi": {"header": f"| NVIDIA-SMI 555.42.02    Driver Version: {driver}    "
                                     "CUDA Version: 12.5     |",
                           "rows": "0, NVIDIA GeForce RTX 4090, 24564, 8.9"},
            "ldconfig": "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/wsl/lib/libcuda.so.1\n",
            "distributions": {"torch": "2.3.0"},
            "frameworks": {"torch": {"status": "ok", "stderr": stderr, "result": {
                "name": "torch", "status": "ok", "version": "2.3.0",
                "physical_devices": [{"name": "cpu", "kind": "CPU", "description": "cpu"}],
                "logical_devices": ["cpu"],
                "build": {"is_cuda_build": True, "cuda_version": "12.1"}, "extra": {}}}}}


_ERR500 = ("UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). "
           "Error 500: named symbol not found (Triggered internally at CUDAFunctions.cpp:108.)\n")


def test_wsl_container_with_driver_555_names_the_container_toolkit() -> None:
    (f,) = _ids(_wsl_container("555.85", _ERR500))["wsl.container-driver-lib-missing"]
    assert "555.85" in f.title and "nvidia-container-toolkit" in f.fix
    assert "1.14.4" in f.fix and "552.44" in f.fix


def test_wsl_container_rule_stays_silent_elsewhere() -> None:
    assert "wsl.container-driver-lib-missing" not in _ids(_wsl_container("552.44", _ERR500))
    assert "wsl.container-driver-lib-missing" not in _ids(
        _wsl_container("555.85", _ERR500, container=False))
    assert "wsl.container-driver-lib-missing" not in _ids(_wsl_container("555.85", ""))


def _rocm_torch_failed(error: str, dists: dict) -> dict:
    return {"host": dict(_linux(), python_version="3.12.3"),
            "rocminfo": "  Name:                    gfx1151\n  Marketing Name:          AMD "
                        "Radeon 8060S Graphics\n",
            "distributions": {"torch": "2.8.0a0+gitba56102", **dists},
            "frameworks": {"torch": {"status": "ok", "stderr": "", "result": {
                "name": "torch", "status": "error", "error": error}}}}


_MIOPEN = "ImportError: libMIOpen.so.1: cannot open shared object file: No such file or directory"


def test_rocm_sdk_wheel_libraries_off_the_loader_path_are_named() -> None:
    raw = _rocm_torch_failed(_MIOPEN, {"rocm-sdk-core": "7.9.0",
                                       "rocm-sdk-libraries-gfx1151": "7.9.0"})
    ids = _ids(raw)
    (f,) = ids["rocm.libs-not-on-path"]
    assert "libMIOpen.so.1" in f.title
    assert "site-packages/_rocm_sdk_libraries_gfx1151/lib:" in f.fix
    assert "site-packages/_rocm_sdk_core/lib" in f.fix
    assert "rocm.torch-not-rocm" not in ids  # a ROCm build, not a CPU one


def test_rocm_library_missing_without_sdk_wheels_points_at_the_system_rocm() -> None:
    (f,) = _ids(_rocm_torch_failed("ImportError: libamdhip64.so.6: cannot open shared object "
                                   "file: No such file or directory", {}))["rocm.libs-not-on-path"]
    assert "/opt/rocm/lib" in f.fix


def test_a_missing_cuda_library_is_not_called_a_rocm_one() -> None:
    raw = _rocm_torch_failed("ImportError: libcudnn.so.9: cannot open shared object file: No "
                             "such file or directory", {})
    assert "rocm.libs-not-on-path" not in _ids(raw)


def _tf215(dists: dict, tf_version: str = "2.15.1") -> dict:
    return {"host": _linux(),
            "distributions": {"tensorflow": tf_version, "keras": tf_version[:4] + ".0", **dists},
            "frameworks": {"tensorflow": {"status": "ok", "stderr": "", "result": {
                "name": "tensorflow", "status": "ok", "version": tf_version,
                "physical_devices": [{"name": "/physical_device:CPU:0", "kind": "CPU",
                                      "description": "cpu"}],
                "logical_devices": ["/device:CPU:0"], "build": {"is_cuda_build": False}}}}}


def test_transformers_setting_legacy_keras_under_tf_215_without_tf_keras() -> None:
    (f,) = _ids(_tf215({"transformers": "4.55.4"}))["keras.addon-sets-legacy-keras"]
    assert "TF_USE_LEGACY_KERAS" in f.title and "tf-keras~=2.15.0" in f.fix


def test_legacy_keras_rule_stays_silent_when_nothing_breaks() -> None:
    rid = "keras.addon-sets-legacy-keras"
    assert rid not in _ids(_tf215({"transformers": "4.55.4", "tf-keras": "2.15.1"}))
    assert rid not in _ids(_tf215({"transformers": "4.55.4"}, tf_version="2.14.1"))
    assert rid not in _ids(_tf215({"transformers": "4.36.2"}))
    assert rid not in _ids(_tf215({}))


def test_mlx_counts_as_an_installed_framework() -> None:
    mac = {"system": "Darwin", "machine": "arm64", "python_version": "3.12.8",
           "mac_ver": "15.7.4", "proc_translated": "0", "cpu_brand": "Apple M2",
           "python_prefix": "/Users/u/.venv"}
    assert "frameworks.none" not in _ids({"host": mac, "distributions": {"mlx": "0.29.4"}})
    assert "frameworks.none" in _ids({"host": mac, "distributions": {}})
