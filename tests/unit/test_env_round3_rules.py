"""Doctor's round-3 mechanisms (issue 24), each on a round3_dev case and on its boundary:
a wheel tagged for a newer macOS, XLA's driver-older-than-ptxas warning, a ROCm target whose
override is known to hang, tensorflow-metal 1.1 under Keras 3, and TensorFlow's native-Windows
GPU limit when nothing is installed yet."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from devicebench.env.checks import load_knowledge
from tests.unit.env_cases import finding_ids as _ids

_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "env_corpus"
ROUND3 = {c["url"].split("github.com/")[-1]: c
          for c in json.loads((_DIR / "round3_cases.json").read_text(encoding="utf-8"))["cases"]}


def _raw(key: str) -> dict:
    return copy.deepcopy(ROUND3[key]["raw"])


def test_a_wheel_for_a_newer_macos_is_an_error_with_a_reinstall() -> None:
    raw = _raw("jjang-ai/mlxstudio/issues/104")
    f = _ids(raw)["platform.wheel-newer-than-os"]
    assert f.severity == "error" and "macOS 26" in f.title and "15.7.3" in f.title
    assert f.fix.startswith("pip install --force-reinstall --no-cache-dir 'mlx==0.30.6'")
    raw["host"]["mac_ver"] = "26.1"
    assert "platform.wheel-newer-than-os" not in _ids(raw)


def test_the_probe_records_only_macos_wheel_tags() -> None:
    from devicebench.env.probe import read_wheel_platform_tags

    tags = read_wheel_platform_tags()
    assert all(t.startswith("macosx_") for t in tags.values())


def test_xla_driver_older_than_ptxas_is_read_from_its_log_line() -> None:
    raw = _raw("jax-ml/jax/issues/25718")
    assert _ids(raw)["cuda.driver-older-than-ptxas"].severity == "error"  # ptxas failed
    fw = raw["frameworks"]["jax"]
    fw["result"]["extra"] = {}
    fw["stderr"] = ("W0105 12:00:00.000000 1 cuda_executor.cc:1] The NVIDIA driver's CUDA version "
                    "is 12.2 which is older than the PTX compiler version (12.6.85). Because ...\n")
    f = _ids(raw)["cuda.driver-older-than-ptxas"]
    assert f.severity == "warning" and "CUDA 12.2" in f.title and ">= 12.6" in f.fix
    fw["stderr"] = ""
    assert "cuda.driver-older-than-ptxas" not in _ids(raw)


def test_a_rocm_target_whose_override_hangs_is_not_answered_with_the_override() -> None:
    f = _ids(_raw("ROCm/TheRock/issues/1184"))["rocm.gfx-not-in-build"]
    assert "gfx1103" in f.title and f.fix.startswith("build PyTorch from source")
    assert "PYTORCH_ROCM_ARCH=gfx1103" in f.fix
    # a sibling with a working override keeps the plain override fix
    raw = _raw("ROCm/TheRock/issues/1184")
    raw["frameworks"]["torch"]["result"]["extra"]["gcn_arch"] = "gfx1101"
    raw["frameworks"]["torch"]["result"]["build"]["arch_list"] = ["gfx1100"]
    fix = _ids(raw)["rocm.gfx-not-in-build"].fix
    assert fix.startswith("export HSA_OVERRIDE_GFX_VERSION=11.0.0")


def test_tensorflow_metal_1_1_with_keras_3_but_not_with_keras_2() -> None:
    from devicebench.env.checks.apple import metal_choice

    raw = _raw("tensorflow/tensorflow/issues/63854")
    f = _ids(raw)["metal.keras3"]
    assert "Keras 3" in f.why and "TF_USE_LEGACY_KERAS=1" in f.fix
    raw["env_vars"] = {"TF_USE_LEGACY_KERAS": "1"}
    raw["distributions"]["tf-keras"] = "2.16.0"
    assert "metal.keras3" not in _ids(raw)
    # the pairing table itself is unchanged: 1.1.0 is still the plugin for TF 2.16
    assert metal_choice(load_knowledge(), python="3.11.8", tensorflow="2.16.1").release[
        "version"] == "1.1.0"


def test_nothing_installed_on_windows_names_the_native_gpu_limit() -> None:
    raw = _raw("tensorflow/tensorflow/issues/60241")
    f = _ids(raw)["frameworks.none"]
    assert "2.10 was the last release with GPU support" in f.why
    assert "WSL2" in f.fix and "tensorflow<2.11" in f.fix  # Python 3.10 has TF 2.10 wheels
    raw["host"]["python_version"] = "3.12.3"
    f = _ids(raw)["frameworks.none"]
    assert "WSL2" in f.fix and "tensorflow<2.11" not in f.fix
