"""Issue 24, round 9: conda build strings, a Keras 2 release beside TensorFlow, Keras-3-only
add-ons under TF_USE_LEGACY_KERAS, tensorflow-io's release pairing. Each rule has a case it
must name and cases that must stay silent; raw inputs replay through snapshot_from_raw."""

from __future__ import annotations

from pathlib import Path

from devicebench.env.interpret import conda_builds_from_listing
from devicebench.env.probe import read_conda_meta_listing
from tests.unit.env_cases import warned as _ids

GPU = {"header": "| NVIDIA-SMI 535.161.07    Driver Version: 535.161.07    CUDA Version: 12.2 |",
       "rows": "0, NVIDIA GeForce RTX 3090, 24576, 8.6"}


def _raw(dists: dict, *, conda: list[str] | None = None, gpu: bool = True,
         env: dict | None = None, system: str = "Linux") -> dict:
    doc = {"host": {"system": system, "machine": "x86_64", "python_version": "3.11.8",
                    "python_implementation": "CPython", "conda_env": conda is not None,
                    "python_prefix": "/home/u/miniconda3/envs/e"},
           "distributions": dists, "env_vars": env or {}}
    if conda is not None:
        doc["conda_meta_listing"] = conda
    if gpu:
        doc["nvidia_smi"] = GPU
    return doc


def test_conda_meta_record_names_are_read_and_parsed(tmp_path: Path) -> None:
    meta = tmp_path / "conda-meta"
    meta.mkdir()
    for name in ("pyg-2.5.0-py311_torch_2.2.0_cpu.json", "pytorch-cuda-12.1-ha16c6d3_5.json",
                 "history"):
        (meta / name).write_text("{}", encoding="utf-8")
    listing = read_conda_meta_listing(str(tmp_path), True)
    assert listing == ["pyg-2.5.0-py311_torch_2.2.0_cpu.json", "pytorch-cuda-12.1-ha16c6d3_5.json"]
    assert read_conda_meta_listing(str(tmp_path), False) == []  # not a conda env: not read
    assert read_conda_meta_listing(str(tmp_path / "missing"), True) == []
    builds = conda_builds_from_listing(listing)
    assert builds["pytorch-cuda"] == {"version": "12.1", "build": "ha16c6d3_5"}  # '-' in name
    assert builds["pyg"]["build"] == "py311_torch_2.2.0_cpu"


def test_a_cpu_conda_build_on_an_nvidia_machine_is_named_with_a_build_string_pin() -> None:
    doc = _raw({"torch": "2.2.1", "torch_geometric": "2.5.0"},
               conda=["pyg-2.5.0-py311_torch_2.2.0_cpu.json",
                      "pytorch-2.2.1-py3.11_cuda12.1_cudnn8.9.2_0.json"])
    f = _ids(doc)["conda.cpu-build"]
    assert f.severity == "warning" and "pyg 2.5.0" in f.title
    assert f.fix.startswith("conda install 'pyg=2.5.0=*cu*' -c pyg")
    assert "py311_torch_2.2.0_cpu" in f.observed and "RTX 3090" in f.observed
    # conda-forge's CPU pytorch (cpu_mkl_...) is named too, without a channel
    forge = _raw({"torch": "2.4.1"}, conda=["pytorch-2.4.1-cpu_mkl_py311h6a7d3b1_100.json"])
    assert _ids(forge)["conda.cpu-build"].fix.startswith(  # conda-forge's own build names
        "conda install -c conda-forge 'pytorch=2.4.1=cuda*'  #")


def test_conda_builds_stay_silent_when_cuda_built_or_no_gpu() -> None:
    cuda = _raw({"torch": "2.2.1"}, conda=["pyg-2.5.0-py311_torch_2.2.0_cu121.json",
                                           "pytorch-2.2.1-py3.11_cuda12.1_cudnn8.9.2_0.json"])
    assert "conda.cpu-build" not in _ids(cuda)
    no_gpu = _raw({"torch": "2.2.1"}, conda=["pytorch-2.2.1-py3.11_cpu_0.json"], gpu=False)
    assert "conda.cpu-build" not in _ids(no_gpu)  # a CPU build is right on a CPU machine
    # a package whose build string merely contains the letters (no "cpu" token)
    other = _raw({}, conda=["tensorflow-2.15.0-cuda120py311hcpux_0.json"])
    assert "conda.cpu-build" not in _ids(other)


def test_a_keras2_of_another_minor_than_tensorflow_is_named() -> None:
    f = _ids(_raw({"tensorflow": "2.15.0", "keras": "2.6.0"}, gpu=False))[
        "keras.keras2-release-not-tf"]
    assert "keras 2.6.0" in f.title and f.fix.startswith("pip install 'keras~=2.15.0'")
    assert "keras>=2.15,<2.16" in f.why
    old = _ids(_raw({"tensorflow": "2.16.1", "keras": "2.15.0"}, gpu=False))
    f = old["keras.keras2-with-keras3-tf"]
    assert "keras>=3" in f.fix and "tf-keras~=2.16.0" in f.fix


def test_keras_of_tensorflows_own_release_stays_silent() -> None:
    for dists in ({"tensorflow": "2.15.1", "keras": "2.15.0"},  # same minor, other patch
                  {"tensorflow": "2.18.0", "keras": "3.8.0"},  # Keras 3 with TF >= 2.16
                  {"tensorflow": "2.5.0", "keras": "2.4.3"},  # before keras moved in step
                  {"tensorflow": "2.15.0"}):  # no standalone keras listed
        found = _ids(_raw(dists, gpu=False))
        assert not {"keras.keras2-release-not-tf", "keras.keras2-with-keras3-tf"} & set(found), \
            dists


def test_a_keras3_only_addon_under_legacy_keras_is_named() -> None:
    dists = {"tensorflow": "2.18.0", "tf-keras": "2.18.0", "keras": "3.8.0",
             "keras-tuner": "1.4.7"}
    f = _ids(_raw(dists, env={"TF_USE_LEGACY_KERAS": "1"}, gpu=False))[
        "keras.keras3-addon-on-legacy"]
    assert "keras-tuner" in f.title and f.fix.startswith("unset TF_USE_LEGACY_KERAS")
    win = _ids(_raw(dists, env={"TF_USE_LEGACY_KERAS": "1"}, gpu=False, system="Windows"))
    assert "unset" not in win["keras.keras3-addon-on-legacy"].fix  # cmd.exe has no unset


def test_keras3_addons_stay_silent_without_legacy_keras_or_before_keras3() -> None:
    base = {"tensorflow": "2.18.0", "tf-keras": "2.18.0", "keras": "3.8.0",
            "keras-tuner": "1.4.7"}
    assert "keras.keras3-addon-on-legacy" not in _ids(_raw(base, gpu=False))  # Keras 3 only
    old_tuner = dict(base, **{"keras-tuner": "1.3.5"})
    assert "keras.keras3-addon-on-legacy" not in _ids(
        _raw(old_tuner, env={"TF_USE_LEGACY_KERAS": "1"}, gpu=False))
    tf215 = {"tensorflow": "2.15.0", "keras": "2.15.0", "keras-tuner": "1.4.7"}
    assert "keras.keras3-addon-on-legacy" not in _ids(
        _raw(tf215, env={"TF_USE_LEGACY_KERAS": "1"}, gpu=False))


def test_tensorflow_io_built_for_another_tensorflow_minor_is_named() -> None:
    f = _ids(_raw({"tensorflow": "2.16.1", "tensorflow-io": "0.36.0"}, gpu=False))[
        "stack.addon-built-for-other-release"]
    assert "tensorflow-io 0.36.0" in f.title and "2.15" in f.title
    assert f.fix.startswith("pip install 'tensorflow-io==0.37.*'")
    # a TensorFlow with no tensorflow-io row of its own: keep the add-on's TensorFlow
    f = _ids(_raw({"tensorflow": "2.17.0", "tensorflow-io": "0.37.1"}, gpu=False))[
        "stack.addon-built-for-other-release"]
    assert f.fix.startswith("pip install 'tensorflow==2.16.*'")


def test_tensorflow_io_of_the_same_minor_or_unlisted_stays_silent() -> None:
    for dists in ({"tensorflow": "2.15.1", "tensorflow-io": "0.36.0"},
                  {"tensorflow": "2.11.0", "tensorflow-io": "0.29.0"},
                  {"tensorflow": "2.14.0", "tensorflow-io": "0.35.0"}):  # no verified row
        assert "stack.addon-built-for-other-release" not in _ids(_raw(dists, gpu=False)), dists


def test_a_jaxlib_newer_than_a_pinned_jax_offers_both_directions() -> None:
    doc = _raw({"jax": "0.4.20", "jaxlib": "0.4.31"}, gpu=False)
    f = _ids(doc)["stack.release-skew"]
    assert f.fix.startswith("pip install 'jax==0.4.31'")
    assert "pip install 'jaxlib==0.4.20'" in f.fix  # keeping the jax a project pins
    # an older jaxlib is fixed in one direction only: jax's release
    said = _raw({"jax": "0.4.30", "jaxlib": "0.4.26"}, gpu=False)
    said["frameworks"] = {"jax": {"status": "error", "stderr": "RuntimeError: jaxlib is version "
                                  "0.4.26, but this version of jax requires version >= 0.4.30.\n"}}
    older = _ids(said)["stack.release-skew"]
    assert older.fix.startswith("pip install -U 'jaxlib==0.4.30'") and "jax==" not in older.fix
    assert "stack.release-skew" not in _ids(_raw({"jax": "0.4.31", "jaxlib": "0.4.31"}, gpu=False))


def _wsl(dists: dict, ldconfig: str) -> dict:
    doc = _raw(dists)
    doc["host"]["kernel_release"] = "5.15.90.1-microsoft-standard-WSL2"
    doc["ldconfig"] = ldconfig
    return doc


WSL_LDCONFIG = "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/wsl/lib/libcuda.so.1\n"


def test_an_old_bitsandbytes_under_wsl2_is_pointed_at_usr_lib_wsl_lib() -> None:
    f = _ids(_wsl({"torch": "2.0.0+cu117", "bitsandbytes": "0.37.2"}, WSL_LDCONFIG))[
        "cuda.loader-cannot-find"]
    assert "bitsandbytes 0.37.2" in f.title and "libcuda.so" in f.title
    assert f.fix.startswith("export LD_LIBRARY_PATH=/usr/lib/wsl/lib")


def test_bitsandbytes_stays_silent_off_wsl_when_found_or_newer() -> None:
    linux = _raw({"torch": "2.0.0+cu117", "bitsandbytes": "0.37.2"})
    linux["ldconfig"] = WSL_LDCONFIG.replace("/usr/lib/wsl/lib", "/usr/lib/x86_64-linux-gnu")
    assert "cuda.loader-cannot-find" not in _ids(linux)  # native Linux: not this entry
    found = WSL_LDCONFIG + "\tlibcuda.so (libc6,x86-64) => /usr/lib/wsl/lib/libcuda.so\n"
    assert "cuda.loader-cannot-find" not in _ids(_wsl({"bitsandbytes": "0.37.2"}, found))
    assert "cuda.loader-cannot-find" not in _ids(_wsl({"bitsandbytes": "0.45.0"}, WSL_LDCONFIG))
