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

Each reads what the probe records and stays silent where the cause is absent.
"""

from __future__ import annotations

from devicebench.env.checks import run_checks
from devicebench.env.interpret import snapshot_from_raw
from devicebench.env.messages import reported_facts


def _ids(raw: dict) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in run_checks(snapshot_from_raw(raw)):
        out.setdefault(f.id, []).append(f)
    return out


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
