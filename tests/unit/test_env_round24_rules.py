"""Issue 24, round 24 step 0: round22_heldout's misses written as general rules, each with
cases that must stay silent. keras-hub on Keras 2 (tensorflow-directml-plugin#380), orbax
against jax (orbax#2368, bridge_data_v2#28), graphcast against jax 0.7 (weathernext#189), jax
names removed under jax-dependent libraries (dynamax#388, blackjax#787), keras-cv 0.6 without
keras-core (keras-cv#1932, #2110), dgl 2.1.0's torch patch bound (dgl#7247), torchtext's torch
per release (text#2272), Open3D's ML ops on Windows (CoFiI2P#14) and the nvcc on PATH when
CUDA_HOME is unset (YOLO-World#522). Raw inputs replay through snapshot_from_raw."""

from __future__ import annotations

from tests.unit.env_cases import LINUX, WIN
from tests.unit.env_cases import warned as _ids

SMI = {"header": "| NVIDIA-SMI 550.120    Driver Version: 550.120    CUDA Version: 12.4     |",
       "rows": "0, NVIDIA GeForce RTX 3080, 10240, 8.6"}


def _torch(version: str, cuda: str = "12.4") -> dict:
    devices = [{"name": "cpu", "kind": "CPU", "description": "cpu"},
               {"name": "cuda:0", "kind": "GPU", "description": "NVIDIA GeForce RTX 3080"}]
    return {"torch": {"status": "ok", "stderr": "", "result": {
        "name": "torch", "status": "ok", "version": version, "physical_devices": devices,
        "logical_devices": ["cpu", "cuda:0"], "build": {
            "is_cuda_build": True, "cuda_version": cuda, "is_rocm_build": False,
            "arch_list": ["sm_80", "sm_86", "sm_90"]}, "extra": {}}}}


def _doc(host: dict, dists: dict, frameworks: dict | None = None, **extra) -> dict:
    doc = {"host": host, "distributions": {"numpy": "1.26.4", **dists},
           "frameworks": frameworks or {}}
    doc.update(extra)
    return doc


# -- pairing rows ------------------------------------------------------------------------

def test_keras_hub_on_keras_2_names_keras_3_and_keras_nlp() -> None:
    f = _ids(_doc(WIN, {"tensorflow-cpu": "2.10.0", "keras": "2.10.0", "keras-hub": "0.18.1"}))[
        "package.pairing-mismatch"]
    assert "keras.ops" in f.why and "keras>=3" in f.fix and "keras-nlp" in f.fix


def test_keras_hub_on_keras_3_stays_silent() -> None:
    doc = _doc(LINUX, {"tensorflow": "2.18.0", "keras": "3.6.0", "keras-hub": "0.18.1"})
    assert "package.pairing-mismatch" not in _ids(doc)


def test_orbax_rows_name_the_pins_and_stay_silent_on_matching_pairs() -> None:
    f = _ids(_doc(LINUX, {"orbax-checkpoint": "0.11.24", "jax": "0.5.3", "jaxlib": "0.5.3"}))[
        "package.pairing-mismatch"]
    assert "record_scalar" in f.why and "0.11.23" in f.fix
    f = _ids(_doc(LINUX, {"orbax-checkpoint": "0.4.8", "jax": "0.4.13"}))[
        "package.pairing-mismatch"]
    assert "orbax-checkpoint==0.3.5" in f.fix
    for dists in ({"orbax-checkpoint": "0.11.23", "jax": "0.5.3"},
                  {"orbax-checkpoint": "0.11.24", "jax": "0.6.2"},
                  {"orbax-checkpoint": "0.3.5", "jax": "0.4.13"},
                  {"orbax-checkpoint": "0.4.8", "jax": "0.4.23"}):
        assert "package.pairing-mismatch" not in _ids(_doc(LINUX, dists)), dists


def test_graphcast_with_jax_0_7_and_before_it() -> None:
    f = _ids(_doc(LINUX, {"graphcast": "0.2.0.dev0", "jax": "0.7.2"}))["package.pairing-mismatch"]
    assert "OutInfo" in f.why and "jax<0.7" in f.fix
    assert "package.pairing-mismatch" not in _ids(
        _doc(LINUX, {"graphcast": "0.2.0.dev0", "jax": "0.6.2"}))


# -- jax names removed under jax-dependent libraries -------------------------------------

def test_keyarray_removal_reads_any_listed_dependent_not_flax_only() -> None:
    f = _ids(_doc(LINUX, {"dynamax": "0.1.5", "jax": "0.4.38"}))["jax.removed-name-in-dependent"]
    assert "KeyArray" in f.title and "jax==0.4.23" in f.fix
    for dists in ({"dynamax": "0.1.5", "jax": "0.4.23"}, {"dynamax": "1.1.0", "jax": "0.6.0"},
                  {"jax": "0.4.38"}):
        assert "jax.removed-name-in-dependent" not in _ids(_doc(LINUX, dists)), dists


def test_jax_0_6_removed_deprecations_name_jax_below_0_6() -> None:
    ids = _ids(_doc(LINUX, {"jax": "0.6.0", "blackjax": "1.2.5", "dynamax": "1.0.0"}))
    f = ids["jax.removed-name-in-dependent"]
    assert "jax.core.Shape" in f.title and "jax<0.6.0" in f.fix
    assert "jax.removed-name-in-dependent" not in _ids(
        _doc(LINUX, {"jax": "0.5.3", "blackjax": "1.2.5", "dynamax": "1.0.0"}))


# -- keras-cv 0.6 and keras-core --------------------------------------------------------

def test_keras_cv_0_6_0_without_keras_core() -> None:
    f = _ids(_doc(LINUX, {"tensorflow": "2.13.0", "keras": "2.13.1", "keras-cv": "0.6.0"}))[
        "package.undeclared-import-missing"]
    assert "keras_core" in f.why and "pip install keras-core" in f.fix


def test_keras_cv_0_6_with_keras_3_on_old_tf_and_the_silent_pairs() -> None:
    doc = _doc(LINUX, {"tensorflow": "2.14.0", "keras": "3.0.0", "keras-cv": "0.6.4"})
    assert "keras-core" in _ids(doc)["package.undeclared-import-missing"].fix
    for dists in ({"tensorflow": "2.13.0", "keras": "2.13.1", "keras-cv": "0.6.0",
                   "keras-core": "0.1.7"},
                  {"tensorflow": "2.14.0", "keras": "2.14.0", "keras-cv": "0.6.4"},
                  {"tensorflow": "2.16.1", "keras": "3.3.3", "keras-cv": "0.6.4"},
                  {"tensorflow": "2.16.1", "keras": "3.3.3", "keras-cv": "0.9.0"}):
        assert "package.undeclared-import-missing" not in _ids(_doc(LINUX, dists)), dists


# -- extension rows -----------------------------------------------------------------------

def test_dgl_2_1_0_reads_torch_by_patch() -> None:
    f = _ids(_doc(LINUX, {"torch": "2.2.2", "dgl": "2.1.0"}, _torch("2.2.2+cu121", "12.1")))[
        "extension.built-for-other-torch"]
    assert "2.2.1" in f.fix
    for torch in ("2.2.1", "2.1.2"):
        doc = _doc(LINUX, {"torch": torch, "dgl": "2.1.0"}, _torch(torch + "+cu121", "12.1"))
        assert "extension.built-for-other-torch" not in _ids(doc), torch


def test_torchtext_reads_the_torch_of_each_release() -> None:
    doc = _doc(LINUX, {"torch": "2.4.0", "torchtext": "0.18.0"}, _torch("2.4.0+cu121", "12.1"))
    assert "torch==2.3.1" in _ids(doc)["extension.built-for-other-torch"].fix
    for torch, text in (("2.3.1", "0.18.0"), ("2.2.2", "0.17.2"), ("2.1.2", "0.16.2")):
        doc = _doc(LINUX, {"torch": torch, "torchtext": text}, _torch(torch + "+cu121", "12.1"))
        assert "extension.built-for-other-torch" not in _ids(doc), text


# -- platforms and toolkits ---------------------------------------------------------------

def test_open3d_beside_torch_on_windows_and_off_it() -> None:
    f = _ids(_doc(WIN, {"open3d": "0.17.0", "torch": "1.13.1"}))["open3d.no-ml-ops-on-windows"]
    assert "linux" in f.fix.lower() and "WSL" in f.fix
    for host, dists in ((LINUX, {"open3d": "0.17.0", "torch": "1.13.1"}),
                        (WIN, {"open3d": "0.17.0"})):
        assert "open3d.no-ml-ops-on-windows" not in _ids(_doc(host, dists))


def test_nvcc_on_path_of_another_major_beside_mim() -> None:
    path = {"PATH": "/home/u/venv/bin:/usr/local/bin:/usr/bin:/bin"}
    doc = _doc(LINUX, {"torch": "2.5.1", "openmim": "0.3.9"}, _torch("2.5.1+cu124"),
               nvidia_smi=SMI, env_vars=path)
    f = _ids(doc)["cuda.nvcc-on-path-other-major"]
    assert "11.5" in f.title and "torch==2.4.1" in f.fix


def test_nvcc_on_path_stays_silent_when_the_toolkit_is_named_or_no_builder() -> None:
    base = {"PATH": "/home/u/venv/bin:/usr/local/bin:/usr/bin:/bin"}
    for dists, env, cuda in (
            ({"torch": "2.5.1", "openmim": "0.3.9"}, {**base, "CUDA_HOME": "/usr/local/cuda"},
             "12.4"),
            ({"torch": "2.5.1", "openmim": "0.3.9"},
             {"PATH": "/usr/local/cuda-12.4/bin:/usr/bin:/bin"}, "12.4"),
            ({"torch": "2.5.1"}, base, "12.4"),
            ({"torch": "2.0.1", "openmim": "0.3.9"}, base, "11.8")):
        doc = _doc(LINUX, dists, _torch(dists["torch"] + "+cu", cuda), nvidia_smi=SMI,
                   env_vars=env)
        assert "cuda.nvcc-on-path-other-major" not in _ids(doc), (dists, env)
