"""Doctor's round-5 mechanisms (issue 24), each with a case that must fire and one that must
stay silent: XLA's older ptxas wording; a Python newer than old pins when nothing is
installed; the CUDA runtime a TensorFlow build loads when its log names none; a driver and a
library cause that both block the GPU; a container without GPU access; a macOS virtual
machine; torchvision past the compatibility table and beside a nightly torch; add-ons that
ship Keras 2 models. Cases are replayed from raw probe inputs of the corpus."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from devicebench.env.checks import load_knowledge, run_checks
from devicebench.env.checks.frameworks import python_newer_than_pins
from devicebench.env.checks.stack import map_pair
from devicebench.env.finding import Finding
from devicebench.env.interpret import snapshot_from_raw

_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "env_corpus"
CASES = {c["url"]: c for name in ("round4_cases.json", "round5_cases.json")
         for c in json.loads((_DIR / name).read_text(encoding="utf-8"))["cases"]}


def raw(tail: str) -> dict:
    return copy.deepcopy(next(c["raw"] for u, c in CASES.items() if u.endswith(tail)))


def findings(doc: dict) -> dict[str, Finding]:
    return {f.id: f for f in run_checks(snapshot_from_raw(doc))}


def test_xla_older_ptxas_wording_is_read() -> None:
    doc = raw("jax/issues/19821")  # "older than the ptxas CUDA version (12.3.107)"
    f = findings(doc)["cuda.driver-older-than-ptxas"]
    assert f.severity == "warning" and "12.3" in f.title and "driver" in f.fix
    doc["frameworks"]["jax"]["stderr"] = ""
    assert "cuda.driver-older-than-ptxas" not in findings(doc)


def test_a_python_newer_than_old_pins_is_named_when_nothing_is_installed() -> None:
    kb = load_knowledge()
    assert python_newer_than_pins("3.13.1", kb) == ("TensorFlow 2.20 and PyTorch 2.5", "3.12")
    f = findings(raw("lunar/issues/226"))["frameworks.none"]  # Python 3.11.2, Feb 2023
    assert "Python 3.11 has wheels only from TensorFlow 2.12 and PyTorch 2.0" in f.why
    assert "python3.10 -m venv" in f.fix
    old = raw("lunar/issues/226")
    old["host"]["python_version"] = "3.10.11"
    quiet = findings(old)["frameworks.none"]
    assert "wheels only from" not in quiet.why and "-m venv" not in quiet.fix


def test_the_cuda_runtime_a_tf_build_loads_is_named_when_tf_logs_none() -> None:
    doc = raw("tensorflow/issues/66750")  # TF 2.13.1 (CUDA 11.8), only CUDA 12.4 installed
    f = findings(doc)["gpu.not-seen"]
    assert "built for CUDA 11.8" in f.why and "loads libcudart.so.11.0" in f.why
    assert "libcudart.so.12" in f.why and "cudatoolkit=11.8" in f.fix
    ok = copy.deepcopy(doc)  # the runtime it needs is there: not this cause
    ok["ldconfig"] += ("\tlibcudart.so.11.0 (libc6,x86-64) => "
                       "/usr/local/cuda-11.8/lib64/libcudart.so.11.0\n")
    assert "loads libcudart.so.11.0" not in findings(ok)["gpu.not-seen"].why
    cpu_vm = copy.deepcopy(doc)  # no NVIDIA GPU: TF's message is expected, nothing to say
    del cpu_vm["nvidia_smi"]
    assert "gpu.not-seen" not in findings(cpu_vm)


def test_a_driver_and_a_library_cause_are_both_fixed() -> None:
    doc = raw("tensorflow/issues/70960")  # WSL2: CUDA 11.4 driver and toolkit, TF 2.15 (12.2)
    f = findings(doc)["gpu.not-seen"]
    assert f.fix.startswith("update the NVIDIA driver to >= 525.60.13")
    assert "; and: pip install 'tensorflow[and-cuda]==2.15.1'" in f.fix
    new_driver = copy.deepcopy(doc)
    new_driver["nvidia_smi"]["header"] = new_driver["nvidia_smi"]["header"].replace(
        "470.76", "560.70").replace("11.4", "12.6")
    fixed = findings(new_driver)
    assert "cuda.driver-too-old" not in fixed
    assert fixed["gpu.not-seen"].fix == "pip install 'tensorflow[and-cuda]==2.15.1'"


def test_a_container_without_gpu_access() -> None:
    doc = raw("tibava/issues/2")
    f = findings(doc)["container.no-gpu"]
    assert "PyTorch 2.5.1+cu124" in f.observed and "--gpus all" in f.fix
    assert "container-toolkit" in f.source
    outside = copy.deepcopy(doc)
    outside["host"]["in_container"] = False
    assert "container.no-gpu" not in findings(outside)
    with_gpu = copy.deepcopy(doc)  # GPU passed in: nvidia-smi works inside
    with_gpu["nvidia_smi"] = {"header": "| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15"
                              "    CUDA Version: 12.4     |",
                              "rows": "0, NVIDIA GeForce RTX 4090, 24564, 8.9"}
    assert "container.no-gpu" not in findings(with_gpu)
    # A CPU-only container with the default (CUDA-built) wheel and none of NVIDIA's CUDA
    # libraries, as this project's CI container: said, but not a warning.
    cpu_only = copy.deepcopy(doc)
    cpu_only["distributions"] = {k: v for k, v in doc["distributions"].items()
                                 if not k.startswith("nvidia-")}
    quiet = findings(cpu_only)["container.no-gpu"]
    assert quiet.severity == "info" and "CPU-only container?" in quiet.observed
    assert f.severity == "warning" and "nvidia-cudnn-cu12" in f.observed


def test_a_macos_virtual_machine_with_an_apple_gpu_framework() -> None:
    doc = raw("pytorch/issues/125197")  # GitHub's macos-14 arm64 runner
    f = findings(doc)["host.virtual-mac"]
    assert "Apple M1 (Virtual)" in f.observed and "MPS reported available" in f.observed
    assert "Metal Performance Shaders" in f.why and "docs.github.com" in f.source
    real = copy.deepcopy(doc)
    real["host"]["cpu_brand"] = "Apple M1"
    assert "host.virtual-mac" not in findings(real)
    no_gpu_use = copy.deepcopy(doc)
    no_gpu_use["frameworks"]["torch"]["result"]["build"]["mps_built"] = False
    no_gpu_use["frameworks"]["torch"]["result"]["physical_devices"] = [
        {"name": "cpu", "kind": "CPU", "description": "cpu"}]
    assert "host.virtual-mac" not in findings(no_gpu_use)


def test_torchvision_past_the_table_and_beside_a_nightly() -> None:
    stack = next(s for s in load_knowledge()["stacks"] if s["components"] == ["torchvision"])
    assert map_pair(stack, "0.26") == "2.11" and map_pair(stack, "2.12", reverse=True) == "0.27"
    assert map_pair(stack, "1.0") is None
    doc = raw("torchtitan/pull/3022")  # torch 2.12 nightly, torchvision 0.26 (for 2.11)
    f = findings(doc)["stack.release-skew"]
    assert f.fix.startswith("pip install --pre torchvision --index-url "
                            "https://download.pytorch.org/whl/nightly/cu130")
    matched = copy.deepcopy(doc)
    matched["distributions"]["torch"] = "2.11.0"
    matched["frameworks"]["torch"]["result"]["version"] = "2.11.0+cu130"
    assert "stack.release-skew" not in findings(matched)


def test_an_addon_shipping_keras2_models_under_keras3() -> None:
    doc = raw("LSSTDESC/CCL/issues/1171")
    f = findings(doc)["keras.keras2-addon-on-keras3"]
    assert f.title.startswith("baccoemu ships models saved by Keras 2")
    assert "tf-keras==2.16" in f.fix and "TF_USE_LEGACY_KERAS=1" in f.fix
    keras2 = copy.deepcopy(doc)  # TF 2.15: tf.keras is still Keras 2
    keras2["distributions"].update({"tensorflow": "2.15.1", "keras": "2.15.0"})
    keras2["frameworks"]["tensorflow"]["result"]["version"] = "2.15.1"
    assert "keras.keras2-addon-on-keras3" not in findings(keras2)


def test_python_support_matrix_per_tensorflow_release() -> None:
    from devicebench.env.checks.frameworks import tf_releases_for_python

    kb = __import__("devicebench.env.checks", fromlist=["load_knowledge"]).load_knowledge()
    assert "2.10" in tf_releases_for_python("3.10.11", kb)
    assert "2.15" not in tf_releases_for_python("3.12.3", kb)
    assert tf_releases_for_python("3.14.2", kb) == []
    host = {"system": "Linux", "machine": "x86_64", "python_version": "3.12.3"}
    old = {"host": host, "distributions": {"tensorflow": "2.15.1"}}
    f = next(f for f in run_checks(snapshot_from_raw(old))
             if f.id == "python.unsupported-by-release")
    assert "3.12" in f.title and ">=3.9,<3.12" in f.observed
    new = {"host": host, "distributions": {"tensorflow": "2.19.0"}}
    assert "python.unsupported-by-release" not in {f.id for f in run_checks(snapshot_from_raw(new))}
    bare = {"host": dict(host, python_version="3.14.2"), "distributions": {}}
    none = next(f for f in run_checks(snapshot_from_raw(bare)) if f.id == "frameworks.none")
    assert "no TensorFlow release has wheels for Python 3.14.2" in none.fix
