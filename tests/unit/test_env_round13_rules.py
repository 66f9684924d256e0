"""Round 13's general mechanisms (issue 24): step 0, from the twelfth set's held-out misses
(studied after that set was scored), then from the thirteenth set's dev half
(``round12_dev``). Each reads what the probe records and stays silent where the cause is
absent.

* torchaudio's / torchvision's own "compiled with different CUDA versions" sentence
  (``[[framework_says]]`` ``torch.companion-cuda-variant``), fixed from torch's own index;
* JAX's "Unable to load cuSPARSE. Is it installed?" (``jax.cuda-component-unloadable``), and
  LD_LIBRARY_PATH directories shadowing the nvidia-* wheels when the wheels' files were not
  listed: the installed distributions stand for their libraries (``[nvidia_wheel_sonames]``);
* torch's own "sm_XY is not compatible with the current PyTorch installation" overrides the
  assumption that the build's PTX JIT-compiles for the GPU, and the fix names the same
  release built for a CUDA that has the GPU's architecture (``[cuda_for_arch]``, the older
  releases in ``[torch_cuda_indexes]``).

From ``round12_dev`` (10/12 before, 12/12 after):

* an add-on release importing a Keras private module from the path Keras 2.13 moved
  (``[[keras_internal_imports]]``: transformers < 4.30 and keras.engine) ->
  ``keras.addon-imports-moved-internals``;
* PyTorch's MPS working on a macOS older than some MPS ops need (``[[torch_mps.features]]``:
  uint8 ops 13.0, int64 pow 13.2, bfloat16 14.0) -> ``mps.ops-need-newer-macos``.
"""

from __future__ import annotations

from devicebench.env.checks import load_knowledge
from devicebench.env.checks.stack import same_release_build
from tests.unit.env_cases import findings_by_id as _ids

KB = load_knowledge()




def _linux() -> dict:
    return {"system": "Linux", "machine": "x86_64", "python_version": "3.11.9",
            "kernel_release": "6.5.0-41-generic", "os_release_name": "Ubuntu 22.04.4 LTS",
            "python_prefix": "/home/u/venv"}


def _smi(gpu: str = "NVIDIA GeForce RTX 3090, 24576, 8.6") -> dict:
    return {"header": "| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15    CUDA Version: "
                      "12.4     |", "rows": f"0, {gpu}"}


def _torch(version: str, arch: list[str], stderr: str = "", extra: dict | None = None,
           cuda: str = "12.1") -> dict:
    return {"status": "ok", "stderr": stderr, "result": {
        "name": "torch", "status": "ok", "version": version,
        "physical_devices": [{"name": "cpu", "kind": "CPU", "description": "cpu"},
                             {"name": "cuda:0", "kind": "GPU",
                              "description": "NVIDIA GeForce RTX 3090",
                              "compute_capability": "8.6"}],
        "logical_devices": ["cpu", "cuda:0"],
        "build": {"is_cuda_build": True, "cuda_version": cuda, "arch_list": arch},
        "extra": extra or {}}}


def test_torchvision_cuda_variant_sentence_is_named_with_torchs_index() -> None:
    err = ("RuntimeError: Detected that PyTorch and torchvision were compiled with different "
           "CUDA major versions. PyTorch has CUDA Version=12.1 and torchvision has CUDA "
           "Version=11.8. Please reinstall the torchvision that matches your PyTorch install.")
    raw = {"host": _linux(), "nvidia_smi": _smi(),
           "distributions": {"torch": "2.3.1+cu121", "torchvision": "0.18.1+cu118"},
           "frameworks": {"torch": _torch("2.3.1+cu121", ["sm_80", "sm_86", "sm_90"],
                                          extra={"extension_errors": {"torchvision": err}})}}
    (f,) = _ids(raw)["torch.companion-cuda-variant"]
    assert f.severity == "error" and "torchvision" in f.title and "11.8" in f.title
    assert "whl/cu121" in f.fix and "torch==2.3.1+cu121" in f.fix


def test_a_companion_of_another_torch_release_is_not_called_a_cuda_variant() -> None:
    err = "OSError: libtorchaudio.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"
    raw = {"host": _linux(), "nvidia_smi": _smi(),
           "distributions": {"torch": "2.3.1+cu121", "torchaudio": "2.1.0+cu121"},
           "frameworks": {"torch": _torch("2.3.1+cu121", ["sm_80", "sm_86", "sm_90"],
                                          extra={"extension_errors": {"torchaudio": err}})}}
    assert "torch.companion-cuda-variant" not in _ids(raw)


def _jax(stderr: str) -> dict:
    return {"status": "ok", "stderr": stderr, "result": {
        "name": "jax", "status": "ok", "version": "0.6.2",
        "physical_devices": [{"name": "TFRT_CPU_0", "kind": "CPU", "description": "cpu"}],
        "logical_devices": ["TFRT_CPU_0"], "build": {"default_backend": "cpu"}}}


_UNABLE = ("RuntimeError: Unable to use CUDA because of the following issues with CUDA "
           "components:\nUnable to load cuSPARSE. Is it installed?\n")
_NVIDIA = {"jax": "0.6.2", "jaxlib": "0.6.2", "jax-cuda12-plugin": "0.6.2",
           "jax-cuda12-pjrt": "0.6.2", "nvidia-cusparse-cu12": "12.5.10.65",
           "nvidia-nvjitlink-cu12": "12.9.86"}


def test_ld_library_path_shadowing_the_installed_nvidia_wheels_without_their_listing() -> None:
    sdk = "/opt/nvidia/hpc_sdk/Linux_x86_64/24.5/cuda/12.4/lib64"
    raw = {"host": _linux(), "nvidia_smi": _smi("NVIDIA A100-SXM4-80GB, 81920, 8.0"),
           "distributions": _NVIDIA, "env_vars": {"LD_LIBRARY_PATH": f"/usr/local/lib:{sdk}"},
           "ld_path_listing": {sdk: ["libnvJitLink.so.12", "libcudart.so.12"]},
           "frameworks": {"jax": _jax(_UNABLE)}}
    found = _ids(raw)
    (f,) = found["cuda.ld-library-path-shadows-wheels"]
    assert "libnvJitLink.so.12" in f.observed and "nvidia-* distributions" in f.observed
    assert "libcudart.so.12" not in f.observed  # no nvidia-cuda-runtime-cu12 installed
    assert f.fix.startswith("export LD_LIBRARY_PATH=/usr/local/lib ")
    assert "jax.cuda-component-unloadable" not in found  # the shadow finding names it


def test_unable_to_load_without_a_shadow_says_reinstall_and_stays_silent_when_healthy() -> None:
    raw = {"host": _linux(), "nvidia_smi": _smi("NVIDIA A100-SXM4-80GB, 81920, 8.0"),
           "distributions": {"jax": "0.6.2", "jaxlib": "0.6.2", "jax-cuda12-plugin": "0.6.2"},
           "frameworks": {"jax": _jax(_UNABLE)}}
    found = _ids(raw)
    (f,) = found["jax.cuda-component-unloadable"]
    assert "cuSPARSE" in f.title and "jax[cuda12]" in f.fix
    assert "cuda.ld-library-path-shadows-wheels" not in found
    # the same directories on LD_LIBRARY_PATH with no nvidia-* wheel installed: no shadow
    sdk = "/opt/nvidia/hpc_sdk/Linux_x86_64/24.5/cuda/12.4/lib64"
    raw.update(env_vars={"LD_LIBRARY_PATH": sdk}, ld_path_listing={sdk: ["libnvJitLink.so.12"]})
    raw["frameworks"] = {"jax": _jax("")}
    assert "cuda.ld-library-path-shadows-wheels" not in _ids(raw)


_SM86 = ("UserWarning: \nNVIDIA GeForce RTX 3090 with CUDA capability sm_86 is not compatible "
         "with the current PyTorch installation.\nThe current PyTorch install supports CUDA "
         "capabilities sm_37 sm_50 sm_60 sm_61 sm_70 sm_75 compute_37.\n")


def test_torchs_own_sm_warning_overrides_the_ptx_assumption() -> None:
    arch = ["sm_37", "sm_50", "sm_60", "sm_61", "sm_70", "sm_75", "compute_37"]
    raw = {"host": _linux(), "nvidia_smi": _smi(),
           "distributions": {"torch": "1.7.1+cu101"},
           "frameworks": {"torch": _torch("1.7.1+cu101", arch, _SM86, cuda="10.1")}}
    (f,) = _ids(raw)["gpu.arch-not-in-build"]
    assert "sm_86" in f.title and "torch==1.7.1+cu110" in f.fix and "torch_stable" in f.fix
    raw["frameworks"]["torch"] = _torch("1.7.1+cu101", arch, "", cuda="10.1")
    assert "gpu.arch-not-in-build" not in _ids(raw)  # PTX, and torch said nothing: silent


def test_the_same_release_build_is_the_oldest_cuda_with_the_arch() -> None:
    assert same_release_build("1.7.1+cu101", "8.6", KB).startswith(
        "pip install 'torch==1.7.1+cu110'")
    assert "torch==2.0.1' --index-url https://download.pytorch.org/whl/cu118" in \
        same_release_build("2.0.1+cu117", "9.0", KB)  # sm_90 from CUDA 11.8
    assert same_release_build("2.7.0+cu126", "12.0", KB).endswith("whl/cu128")
    assert same_release_build("2.5.1+cu121", "12.0", KB) == ""  # no cu128 build of 2.5
    assert same_release_build("1.7.1", "7.5", KB).endswith("torch_stable.html")


def _tf(version: str) -> dict:
    return {"status": "ok", "stderr": "", "result": {
        "name": "tensorflow", "status": "ok", "version": version,
        "physical_devices": [{"name": "/physical_device:CPU:0", "kind": "CPU"}],
        "build": {"is_cuda_build": False}}}


def _win() -> dict:
    return {"system": "Windows", "machine": "AMD64", "python_version": "3.10.11",
            "platform": "Windows-10-10.0.22631-SP0"}


def test_old_transformers_beside_a_keras_that_moved_keras_engine() -> None:
    raw = {"host": _win(), "distributions": {"tensorflow": "2.15.0", "keras": "2.15.0",
                                              "transformers": "4.26.1"},
           "frameworks": {"tensorflow": _tf("2.15.0")}}
    (f,) = _ids(raw)["keras.addon-imports-moved-internals"]
    assert f.severity == "warning" and "keras.engine" in f.title
    assert "transformers>=4.30.0" in f.fix and "keras.src.engine" in f.why


def test_silent_for_a_fixed_transformers_or_a_keras_before_the_move() -> None:
    raw = {"host": _win(), "distributions": {"tensorflow": "2.15.0", "keras": "2.15.0",
                                              "transformers": "4.38.2"},
           "frameworks": {"tensorflow": _tf("2.15.0")}}
    assert "keras.addon-imports-moved-internals" not in _ids(raw)
    raw["distributions"].update(tensorflow="2.12.0", keras="2.12.0", transformers="4.26.1")
    raw["frameworks"] = {"tensorflow": _tf("2.12.0")}
    assert "keras.addon-imports-moved-internals" not in _ids(raw)


def _mac(ver: str, mps_device: bool = True) -> dict:
    devs = [{"name": "cpu", "kind": "CPU", "description": "cpu"}]
    if mps_device:
        devs.append({"name": "mps", "kind": "MPS", "description": "Apple GPU (MPS)"})
    return {"host": {"system": "Darwin", "machine": "arm64", "python_version": "3.10.13",
                     "mac_ver": ver, "proc_translated": "0", "cpu_brand": "Apple M1"},
            "distributions": {"torch": "2.1.0"},
            "frameworks": {"torch": {"status": "ok", "stderr": "", "result": {
                "name": "torch", "status": "ok", "version": "2.1.0", "physical_devices": devs,
                "build": {"is_cuda_build": False, "mps_built": True}}}}}


def test_mps_on_macos_13_0_names_the_ops_that_need_a_newer_macos() -> None:
    (f,) = _ids(_mac("13.0.1"))["mps.ops-need-newer-macos"]
    assert f.severity == "warning" and "13.2" in f.title and "14.0" in f.title
    assert "13.0," not in f.title  # 13.0's own ops run on 13.0.1
    assert "update macOS to 14.0" in f.fix and "int64" in f.why


def test_mps_rule_silent_on_current_macos_and_without_the_mps_device() -> None:
    assert "mps.ops-need-newer-macos" not in _ids(_mac("14.5"))
    assert "mps.ops-need-newer-macos" not in _ids(_mac("12.2.1", mps_device=False))
