"""Issue 24, round 26: rules written against round25_dev (installers and the Python-level
dependencies around the frameworks), each with cases that must stay silent. A torch==X+cuNNN pin
asked of PyPI alone (prefix-dev/pixi#2398), conda-forge's CPU pytorch on an NVIDIA machine
(micro-sam#356), a pre-0.4 CPU jaxlib on an NVIDIA machine (ShortCake#14), tensorboard before
2.21 under setuptools >= 82 (assume#774, UniLab#1465), accelerate >= 0.32 with an older
huggingface_hub (mlflow#12582), TensorFlow 2.14 with ml_dtypes 0.3 (ml_dtypes#101), torch 2.1+
with typing_extensions 3.x (pytorch#116945), jax <= 0.4.13 with scipy 1.13 (transformers#30402),
and pip check reading the Hugging Face libraries' requirements (easydiffusion#1623)."""

from __future__ import annotations

from tests.unit.env_cases import warned as _ids

LINUX = {"system": "Linux", "machine": "x86_64", "python_version": "3.11.10",
         "python_implementation": "CPython", "conda_env": False,
         "python_prefix": "/home/u/venv", "os_release_name": "Ubuntu 22.04.4 LTS",
         "kernel_release": "6.5.0-41-generic"}
SMI = {"header": "| NVIDIA-SMI 550.120    Driver Version: 550.120    CUDA Version: 12.4     |",
       "rows": "0, NVIDIA GeForce RTX 3090, 24576, 8.6"}


def _torch(version: str = "2.3.1+cu121", error: str = "") -> dict:
    if error:
        return {"status": "ok", "stderr": "", "result": {
            "name": "torch", "status": "error", "error": error}}
    return {"status": "ok", "stderr": "", "result": {
        "name": "torch", "status": "ok", "version": version,
        "physical_devices": [{"name": "cpu", "kind": "CPU", "description": "cpu"}],
        "logical_devices": ["cpu"], "build": {"is_cuda_build": True, "cuda_version": "12.1"}}}


def _doc(dists: dict, frameworks: dict | None = None, **extra) -> dict:
    doc = {"host": LINUX, "distributions": {"numpy": "1.26.4", **dists},
           "frameworks": frameworks if frameworks is not None else {"torch": _torch()}}
    doc.update(extra)
    return doc


def test_a_local_version_pin_asked_of_pypi_alone() -> None:
    err = ("ModuleNotFoundError: No module named 'torch' (failed to resolve pypi dependencies: "
           "there is no version of torch==2.5.1+cu121)")
    f = _ids(_doc({}, {"torch": _torch(error=err)}))["install.local-version-not-on-index"]
    assert f.severity == "error" and "cu121" in f.title
    assert "extra-index-urls" in f.fix and "download.pytorch.org/whl/cu121" in f.fix
    pip = "ERROR: No matching distribution found for torchvision==0.20.1+cu124"
    assert "whl/cu124" in _ids(_doc({}, {"torch": _torch(error=pip)}))[
        "install.local-version-not-on-index"].fix


def test_local_version_pin_stays_silent() -> None:
    # a plain version missing, another package, a working torch
    for err in ("there is no version of torch==9.9.9",
                "No matching distribution found for numpy==1.0+cu121",
                "ModuleNotFoundError: No module named 'torch'"):
        assert "install.local-version-not-on-index" not in _ids(
            _doc({}, {"torch": _torch(error=err)}))
    assert "install.local-version-not-on-index" not in _ids(_doc({"torch": "2.3.1"}))


def test_conda_forge_cpu_pytorch_names_its_cuda_builds() -> None:
    cpu = _torch("2.1.0")
    cpu["result"]["build"] = {"is_cuda_build": False}
    doc = _doc({"torch": "2.1.0"}, {"torch": cpu}, nvidia_smi=SMI,
               conda_meta_listing=["pytorch-2.1.0-cpu_generic_py311h8354fdb_2.json"])
    doc["host"] = {**LINUX, "conda_env": True}
    f = _ids(doc)["conda.cpu-build"]
    assert "cuda*" in f.fix and "pytorch-gpu" in f.fix
    # the pytorch channel's CPU build gets that channel's pin (with pytorch-cuda since round
    # 27's step 0), not conda-forge's metapackage
    doc["conda_meta_listing"] = ["pytorch-2.1.0-py3.11_cpu_0.json"]
    f = _ids(doc)["conda.cpu-build"]
    assert "=*cuda*' pytorch-cuda=" in f.fix and "pytorch-gpu" not in f.fix


def test_a_pre_04_cpu_jaxlib_names_that_release_cuda_extra() -> None:
    def jax(version: str, jaxlib: str) -> dict:
        return _doc({"jax": version, "jaxlib": jaxlib}, {"jax": {"status": "ok", "stderr": "",
                    "result": {"name": "jax", "status": "ok", "version": version,
                               "physical_devices": [{"name": "cpu:0", "kind": "CPU"}],
                               "logical_devices": ["cpu:0"],
                               "build": {"default_backend": "cpu", "jaxlib_version": jaxlib}}}},
                    nvidia_smi=SMI)
    assert "jax[cuda11_cudnn82]==0.3.14" in _ids(jax("0.3.14", "0.1.75"))["gpu.not-seen"].fix
    # a 0.4 jaxlib keeps the cuda12 extra
    fix = _ids(jax("0.4.30", "0.4.30"))["gpu.not-seen"].fix
    assert "jax[cuda12]" in fix and "cudnn82" not in fix


def test_python_level_requires_rows() -> None:
    def rows(dists: dict) -> list[str]:
        f = _ids(_doc(dists)).get("stack.dependency-range")
        return [f.title] if f else []

    assert "setuptools<82" in rows({"tensorboard": "2.20.0", "setuptools": "82.0.1"})[0]
    assert "huggingface-hub>=0.23" in rows({"accelerate": "0.32.0",
                                            "huggingface-hub": "0.17.3"})[0]
    assert "typing-extensions>=4" in rows({"torch": "2.1.2", "typing-extensions": "3.7.4.3"})[0]
    assert "scipy<1.13" in rows({"jax": "0.4.13", "jaxlib": "0.4.13", "scipy": "1.13.0"})[0]
    tf = _ids(_doc({"tensorflow": "2.14.0rc1", "ml-dtypes": "0.3.0"}, {}))
    assert "ml_dtypes" in tf["stack.dependency-range"].why
    # silent: each side on its good release
    for dists in ({"tensorboard": "2.21.0", "setuptools": "84.0.0"},
                  {"tensorboard": "2.20.0", "setuptools": "81.0.0"},
                  {"accelerate": "0.31.0", "huggingface-hub": "0.17.3"},
                  {"accelerate": "0.32.0", "huggingface-hub": "0.23.4"},
                  {"torch": "2.1.2", "typing-extensions": "4.9.0"},
                  {"torch": "2.0.1", "typing-extensions": "3.7.4.3"},
                  {"jax": "0.4.30", "jaxlib": "0.4.30", "scipy": "1.13.0"},
                  {"jax": "0.4.13", "jaxlib": "0.4.13", "scipy": "1.12.0"}):
        assert rows(dists) == [], dists
    for dists in ({"tensorflow": "2.14.0", "ml-dtypes": "0.2.0"},
                  {"tensorflow": "2.16.1", "ml-dtypes": "0.3.2"}):
        assert "stack.dependency-range" not in _ids(_doc(dists, {})), dists


def test_pip_check_reads_the_hugging_face_libraries() -> None:
    doc = _doc({"transformers": "4.33.3", "huggingface-hub": "0.12.1"},
               requires={"transformers": ["huggingface-hub<1.0,>=0.15.1"]})
    f = _ids(doc)["install.requirement-conflict"]
    assert "huggingface-hub>=0.15.1,<1.0" in f.fix
    # silent: the hub inside the range; a requirement of a package outside the ML set
    doc["distributions"]["huggingface-hub"] = "0.16.4"
    assert "install.requirement-conflict" not in _ids(doc)
    other = _doc({"requests": "2.31.0", "urllib3": "1.0"},
                 requires={"requests": ["urllib3<3,>=1.21.1"]})
    assert "install.requirement-conflict" not in _ids(other)
