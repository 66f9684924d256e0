"""Issue 24, round 17 (step 0): the sixteenth set's held-out misses as general rules. A table
of minimum compute capability per GPU-using package release (vLLM on Pascal: vllm#19542,
gpustack#1497) and more Keras-2-only add-ons (retina-face: serengil/retinaface#93). Each with
cases that must stay silent; raw inputs replay through snapshot_from_raw."""

from __future__ import annotations

from tests.unit.env_cases import warned as _ids

HOST = {"system": "Linux", "machine": "x86_64", "python_version": "3.10.14",
        "python_implementation": "CPython", "conda_env": False, "python_prefix": "/home/u/venv"}


def _smi(name: str, cc: str) -> dict:
    return {"header": "| NVIDIA-SMI 570.133.07    Driver Version: 570.133.07    "
                      "CUDA Version: 12.8     |", "rows": f"0, {name}, 11264, {cc}"}


def _vllm(dists: dict, gpu: tuple = ("NVIDIA GeForce GTX 1080 Ti", "6.1")) -> dict:
    return {"host": HOST, "nvidia_smi": _smi(*gpu),
            "distributions": dict({"torch": "2.7.0", "numpy": "2.2.6"}, **dists)}


def test_a_package_release_below_its_minimum_compute_capability_is_named() -> None:
    f = _ids(_vllm({"vllm": "0.9.1"}))["gpu.below-package-minimum"]
    assert f.severity == "error" and "vllm 0.9.1" in f.title and "6.1" in f.title
    assert "7.0" in f.fix and "from source" in f.fix and "docs.vllm.ai" in f.source
    fa = _ids(_vllm({"flash-attn": "2.7.4"}, ("Tesla T4", "7.5")))["gpu.below-package-minimum"]
    assert "8.0" in fa.title and "flash-attn<2" in fa.fix


def test_silent_on_a_new_enough_gpu_an_old_release_or_without_the_package() -> None:
    assert "gpu.below-package-minimum" not in _ids(_vllm({"vllm": "0.9.1"}, ("Tesla T4", "7.5")))
    assert "gpu.below-package-minimum" not in _ids(_vllm({}))
    a100 = ("NVIDIA A100-SXM4-80GB", "8.0")
    assert "gpu.below-package-minimum" not in _ids(_vllm({"flash-attn": "2.7.4"}, a100))
    assert "gpu.below-package-minimum" not in _ids(
        _vllm({"flash-attn": "1.0.9"}, ("Tesla T4", "7.5")))
    no_smi = {"host": HOST, "distributions": {"vllm": "0.9.1", "torch": "2.7.0"}}
    assert "gpu.below-package-minimum" not in _ids(no_smi)


def _tf(dists: dict) -> dict:
    return {"host": HOST, "distributions": dict({"tensorflow": "2.16.1", "keras": "3.1.1",
                                                 "numpy": "1.26.4"}, **dists)}


def test_more_keras2_only_addons_under_keras3_are_named() -> None:
    for dist in ("retina-face", "tensorflow-decision-forests", "tensorflow-gnn"):
        version = {"retina-face": "0.0.14"}.get(dist, "1.0.0")
        f = _ids(_tf({dist: version}))["keras.keras2-addon-on-keras3"]
        assert dist in f.title and "(import " in f.title
        assert "TF_USE_LEGACY_KERAS=1" in f.fix and "tf-keras" in f.fix
        assert f.source.startswith("https://github.com/")


def test_silent_on_fixed_retinaface_keras2_tensorflow_or_legacy_keras() -> None:
    assert "keras.keras2-addon-on-keras3" not in _ids(_tf({"retina-face": "0.0.17"}))
    old_tf = _tf({"retina-face": "0.0.14"})
    old_tf["distributions"].update(tensorflow="2.15.0", keras="2.15.0")
    assert "keras.keras2-addon-on-keras3" not in _ids(old_tf)
    legacy = _tf({"tensorflow-gnn": "1.0.3", "tf-keras": "2.16.0"})
    legacy["env_vars"] = {"TF_USE_LEGACY_KERAS": "1"}
    assert "keras.keras2-addon-on-keras3" not in _ids(legacy)


# Round 17 rules, from round16_dev (CodeJudge#2, g2pW-Cantonese#1, bitsandbytes#1559).

A6000 = ("NVIDIA RTX A6000", "8.6")


def _gpu_host(dists: dict, env: dict | None = None, gpu: tuple | None = A6000) -> dict:
    raw = {"host": HOST, "distributions": dict({"numpy": "1.26.4"}, **dists)}
    if gpu:
        raw["nvidia_smi"] = _smi(*gpu)
    if env:
        raw["env_vars"] = env
    return raw


def test_one_cuda_library_for_two_cuda_majors_is_named() -> None:
    f = _ids(_gpu_host({"torch": "2.3.1", "nvidia-nccl-cu11": "2.14.3",
                        "nvidia-nccl-cu12": "2.20.5", "nvidia-cudnn-cu12": "8.9.2.26"}))[
        "stack.mixed-cuda-major-wheels"]
    assert "nccl" in f.title and "nvidia-nccl-cu11" in f.fix and "cu12" not in f.fix
    assert f.source.startswith("https://")


def test_silent_with_one_cuda_major_or_different_libraries() -> None:
    one = {"torch": "2.3.1", "nvidia-nccl-cu12": "2.20.5", "nvidia-cudnn-cu12": "8.9.2.26"}
    assert "stack.mixed-cuda-major-wheels" not in _ids(_gpu_host(one))
    other_libs = {"nvidia-cudnn-cu11": "8.6.0.163", "nvidia-nccl-cu12": "2.20.5"}
    assert "stack.mixed-cuda-major-wheels" not in _ids(_gpu_host(other_libs))


def test_a_cpu_only_package_on_a_gpu_host_is_named() -> None:
    f = _ids(_gpu_host({"onnxruntime": "1.20.1"}))["stack.cpu-only-package-on-gpu-host"]
    assert "onnxruntime-gpu" in f.title and "pip install onnxruntime-gpu" in f.fix


def test_silent_with_the_gpu_package_or_without_an_nvidia_gpu() -> None:
    both = {"onnxruntime": "1.19.0", "onnxruntime-gpu": "1.19.0"}
    assert "stack.cpu-only-package-on-gpu-host" not in _ids(_gpu_host(both))
    assert "stack.cpu-only-package-on-gpu-host" not in _ids(
        _gpu_host({"onnxruntime": "1.20.1"}, gpu=None))
    assert "stack.cpu-only-package-on-gpu-host" not in _ids(
        _gpu_host({"onnxruntime-gpu": "1.20.1"}))


def test_a_bitsandbytes_cuda_override_is_named_unless_it_is_torchs() -> None:
    f = _ids(_gpu_host({"bitsandbytes": "0.45.3", "torch": "2.4.1"},
                       {"BNB_CUDA_VERSION": "124"}))["bitsandbytes.cuda-version-override"]
    assert "libbitsandbytes_cuda124" in f.title and "BNB_CUDA_VERSION=" in f.fix
    assert "bitsandbytes.cuda-version-override" not in _ids(
        _gpu_host({"bitsandbytes": "0.45.3"}))
    assert "bitsandbytes.cuda-version-override" not in _ids(
        _gpu_host({"torch": "2.4.1"}, {"BNB_CUDA_VERSION": "124"}))
    same = _gpu_host({"bitsandbytes": "0.45.3", "torch": "2.4.1"}, {"BNB_CUDA_VERSION": "121"})
    same["frameworks"] = {"torch": {"status": "ok", "stderr": "", "result": {
        "name": "torch", "status": "ok", "version": "2.4.1+cu121", "physical_devices": [],
        "logical_devices": [], "build": {"is_cuda_build": True, "cuda_version": "12.1"},
        "extra": {}}}}
    assert "bitsandbytes.cuda-version-override" not in _ids(same)
