"""Issue 24, round 27's step 0: round25_heldout's misses (seen after it was scored once) as
general rules, each with cases that must stay silent. torch 2.5's TypeIs and Python 3.13's
ParamSpec against old typing_extensions (pytorch#133883, ROCm/pytorch#2475), datasets 2.16 with
an older huggingface_hub (alignment-handbook#94), jax up to 0.4.17 with scipy 1.13 (jax#20965),
keras beside keras-nightly (keras#19875), and the pytorch channel's CUDA build pinned with
pytorch-cuda (pytorch/test-infra#4567, ML4OPF#9)."""

from __future__ import annotations

from tests.unit.env_cases import warned as _ids

LINUX = {"system": "Linux", "machine": "x86_64", "python_version": "3.10.14",
         "python_implementation": "CPython", "conda_env": False, "python_prefix": "/home/u/venv",
         "os_release_name": "Ubuntu 22.04.4 LTS", "kernel_release": "6.5.0-41-generic"}
SMI = {"header": "| NVIDIA-SMI 550.120    Driver Version: 550.120    CUDA Version: 12.4     |",
       "rows": "0, NVIDIA GeForce RTX 3090, 24576, 8.6"}
CPU_TORCH = {"status": "ok", "stderr": "", "result": {
    "name": "torch", "status": "ok", "version": "2.3.1",
    "physical_devices": [{"name": "cpu", "kind": "CPU", "description": "cpu"}],
    "logical_devices": ["cpu"], "build": {"is_cuda_build": False}}}


def _doc(dists: dict, host: dict | None = None, **extra) -> dict:
    doc = {"host": host or LINUX, "distributions": {"numpy": "1.26.4", **dists},
           "frameworks": {"torch": CPU_TORCH}}
    doc.update(extra)
    return doc


def _range(dists: dict, host: dict | None = None) -> str:
    f = _ids(_doc(dists, host)).get("stack.dependency-range")
    return f"{f.title}\n{f.fix}" if f else ""


def test_typing_extensions_for_torch_25_and_python_313() -> None:
    assert "typing-extensions>=4.10" in _range({"torch": "2.5.0a0+git1a2b3c4",
                                                "typing-extensions": "4.7.1"})
    py313 = {**LINUX, "python_version": "3.13.5"}
    assert "typing-extensions>=4.12" in _range({"torch": "2.7.1", "typing-extensions": "4.10.0"},
                                               py313)
    # silent: 4.10 under torch 2.5 on 3.12, 4.12 on 3.13, torch 2.4 with 4.7
    assert _range({"torch": "2.5.1", "typing-extensions": "4.10.0"}) == ""
    assert _range({"torch": "2.7.1", "typing-extensions": "4.12.2"}, py313) == ""
    assert _range({"torch": "2.4.1", "typing-extensions": "4.7.1"}) == ""


def test_datasets_and_huggingface_hub() -> None:
    assert "huggingface-hub>=0.19.4" in _range({"datasets": "2.16.1",
                                                "huggingface-hub": "0.17.3"})
    assert _range({"datasets": "2.16.1", "huggingface-hub": "0.20.3"}) == ""
    assert _range({"datasets": "2.15.0", "huggingface-hub": "0.17.3"}) == ""


def test_jax_up_to_0417_with_scipy_113() -> None:
    assert "scipy<1.13" in _range({"jax": "0.4.17", "jaxlib": "0.4.17", "scipy": "1.13.0"})
    assert _range({"jax": "0.4.17", "jaxlib": "0.4.17", "scipy": "1.12.0"}) == ""


def test_keras_beside_keras_nightly() -> None:
    f = _ids(_doc({"keras": "3.3.3", "keras-nightly": "3.3.3.dev2024061803",
                   "tensorflow": "2.16.1"}))["keras.two-distributions"]
    assert f.severity == "error" and "pip uninstall keras keras-nightly" in f.fix
    assert "keras.two-distributions" not in _ids(_doc({"keras": "3.3.3"}))
    assert "keras.two-distributions" not in _ids(_doc({"keras-nightly": "3.3.3.dev2024061803"}))


def test_the_pytorch_channel_cuda_build_is_pinned_with_pytorch_cuda() -> None:
    doc = _doc({"torch": "2.3.1"}, {**LINUX, "conda_env": True}, nvidia_smi=SMI,
               conda_meta_listing=["pytorch-2.3.1-py3.10_cpu_0.json",
                                   "pytorch-mutex-1.0-cpu.json"])
    fix = _ids(doc)["conda.cpu-build"].fix
    assert "'pytorch=2.3.1=*cuda*' pytorch-cuda=12.1 -c pytorch -c nvidia" in fix
    doc["conda_meta_listing"] = ["pytorch-2.2.0.dev20230912-py3.10_cpu_0.json",
                                 "pytorch-cuda-11.8-h7e8668a_5.json"]
    fix = _ids(doc)["conda.cpu-build"].fix
    assert "pytorch-cuda=11.8 -c pytorch-nightly" in fix
    # a CUDA build stays silent
    doc["conda_meta_listing"] = ["pytorch-2.3.1-py3.10_cuda12.1_cudnn8.9.2_0.json"]
    assert "conda.cpu-build" not in _ids(doc)
