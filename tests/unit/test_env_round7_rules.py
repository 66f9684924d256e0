"""Round 7 of issue 24's environment rules: each family with a case that must fire and one that
must stay silent, replayed from raw probe inputs (``snapshot_from_raw``)."""

from __future__ import annotations

from devicebench.env.messages import reported_facts
from tests.unit.env_cases import case_raw as _case
from tests.unit.env_cases import finding_ids as _ids


def test_cpython_dll_load_failure_is_read_for_any_framework() -> None:
    said = reported_facts("ImportError: DLL load failed while importing _pywrap_tensorflow_"
                          "internal: A dynamic link library (DLL) initialization routine failed.")
    assert said["dll_load_failed"] == {"dll": "_pywrap_tensorflow_internal.pyd",
                                       "path": "_pywrap_tensorflow_internal", "code": 1114}
    assert reported_facts("DLL load failed while importing _multiarray_umath: The specified "
                          "module could not be found.")["dll_load_failed"]["code"] == 126
    raw = _case("round7_cases", "tensorflow/issues/79362")
    f = _ids(raw)["windows.dll-load-failed"]
    assert "_pywrap_tensorflow_internal" in f.title and "1114" in f.observed
    assert "initialisation routine failed" in f.why and "vc_redist" in f.fix
    # silent: the same Windows machine whose TensorFlow imports
    raw["frameworks"]["tensorflow"] = {"status": "ok", "stderr": "", "result": {
        "name": "tensorflow", "status": "ok", "version": "2.18.0",
        "physical_devices": [{"name": "/physical_device:CPU:0", "kind": "CPU"}],
        "logical_devices": ["/device:CPU:0"], "build": {}}}
    assert "windows.dll-load-failed" not in _ids(raw)


def test_an_addon_built_for_another_torch_release_is_named_with_its_pair() -> None:
    raw = _case("round7_cases", "stable-diffusion-webui/issues/15444")
    f = _ids(raw)["stack.addon-built-for-other-release"]
    assert f.title == ("xformers 0.0.23.post1 is built for PyTorch 2.1.2; PyTorch 2.2.2+cu121 "
                       "is installed")
    assert f.fix.startswith('pip install "xformers==0.0.25.post1"')  # Windows: double quotes
    assert "torch==2.1.2" in f.fix and "whl/cu1" in f.fix
    raw["distributions"]["xformers"] = "0.0.25.post1"  # silent: the matching release
    assert "stack.addon-built-for-other-release" not in _ids(raw)
    raw["distributions"]["xformers"] = "0.0.99"  # silent: a release the table does not list
    assert "stack.addon-built-for-other-release" not in _ids(raw)


def test_torch_directml_pins_the_torch_it_was_built_for() -> None:
    raw = _case("round7_cases", "DirectML/issues/432")
    f = _ids(raw)["stack.addon-built-for-other-release"]
    assert "torch-directml 0.1.13.1.dev230301 is built for PyTorch 1.13.1" in f.title
    assert 'torch-directml==0.2.0.*' in f.fix and "torch==1.13.1" in f.fix
    raw["distributions"]["torch"] = "1.13.1"
    raw["frameworks"]["torch"]["result"]["version"] = "1.13.1"
    assert "stack.addon-built-for-other-release" not in _ids(raw)


def test_a_jax_backend_whose_plugin_library_is_missing() -> None:
    raw = _case("round7_cases", "jax/issues/24987")
    f = _ids(raw)["jax.backend-library-missing"]
    assert "'tpu'" in f.title and "libtpu.so" in f.title and "libtpu-nightly" in f.observed
    assert f.fix.startswith("pip install -U 'jax[tpu]'")
    # silent: the same TPU VM whose jax brought the TPU up
    raw["frameworks"]["jax"]["stderr"] = ""
    raw["frameworks"]["jax"]["result"]["physical_devices"].append(
        {"name": "tpu:0", "kind": "TPU", "description": "TPU v5 lite"})
    assert "jax.backend-library-missing" not in _ids(raw)


def test_a_rocm_build_that_finds_no_hip_gpu_on_an_unlisted_target() -> None:
    raw = _case("round6_cases", "Fooocus/issues/1079")  # rocminfo gfx1032, 'No HIP GPUs'
    f = _ids(raw)["rocm.gfx-not-in-build"]
    assert "gfx1032" in f.title and f.fix.startswith("export HSA_OVERRIDE_GFX_VERSION=10.3.0")
    # silent: the same words on a GPU whose target the wheels carry (another cause: /dev/kfd)
    raw["rocminfo"] = raw["rocminfo"].replace("gfx1032", "gfx1030")
    assert "rocm.gfx-not-in-build" not in _ids(raw)


def test_a_keras2_addon_beside_keras3_under_tensorflow_2_15_is_named() -> None:
    raw = _case("round6_cases", "keras-hub/issues/1417")  # TF 2.15, keras 3.0.4, tf-hub 0.16
    f = _ids(raw)["keras.keras2-addon-on-keras3"]
    assert f.title.startswith("tensorflow-hub") and "keras 3.0.4" in f.observed
    assert "tf-keras==2.15.*" in f.fix
    raw["distributions"]["keras"] = "2.15.0"  # silent: TF 2.15 with its own Keras 2
    assert "keras.keras2-addon-on-keras3" not in _ids(raw)


def test_a_placeholder_release_names_the_python_it_has_no_wheels_for() -> None:
    raw = _case("round6_cases", "keras-hub/issues/1649")  # keras-nlp 0.0.0 on Python 3.12
    f = _ids(raw)["install.placeholder-release"]
    assert "keras-nlp 0.0.0" in f.title and "3.12" in f.why and "Python 3.11" in f.fix
    raw["distributions"]["keras-nlp"] = "0.12.1"  # silent: a real release
    raw["distributions"]["mytool"] = "0.0.0"  # silent: not a deep-learning package
    assert "install.placeholder-release" not in _ids(raw)


def test_a_minor_version_gap_names_the_toolkit_driver_not_the_family_minimum() -> None:
    raw = _case("round7_cases", "GeneFacePlusPlus/issues/192")  # driver 510 (11.6), torch cu117
    f = _ids(raw)["cuda.minor-version-compat"]
    assert "driver to >= 515.43.04" in f.fix and "450.80.02" not in f.fix  # 510 meets 450 already
    raw["host"] = dict(raw["host"], system="Windows", machine="AMD64")
    assert "driver to >= 516.01" in _ids(raw)["cuda.minor-version-compat"].fix
    raw["nvidia_smi"]["header"] = raw["nvidia_smi"]["header"].replace("510.47.03", "516.94") \
        .replace("CUDA Version: 11.6", "CUDA Version: 11.7")  # silent: the driver is new enough
    assert "cuda.minor-version-compat" not in _ids(raw)
