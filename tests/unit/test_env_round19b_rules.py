"""Issue 24, round 19: rules written against round18_dev (the large round's dev half), each
with cases that must stay silent. Packages the probe does not import are read from what it
has: Triton's version against the GPU's compute capability (triton-lang/triton#5950, #10331),
CUDA-extension builders against CUDA_HOME's toolkit (MGM#91), bitsandbytes' release on a ROCm
torch (bitsandbytes#1955), the environment's libstdc++ against the system g++ (keops#423,
ktransformers#439) and an EL7 system runtime (pytorch#115138), an empty
HSA_OVERRIDE_GFX_VERSION (voicebox#864), a +cu torch with no NVIDIA driver visible
(ComfyUI-Nvidia-Docker#57), a system cuDNN known by its major only under TensorFlow 2.15
(tensorflow/docs#2291), and torchaudio's exact pin (Wan2GP#1479). Raw inputs replay through
snapshot_from_raw."""

from __future__ import annotations

import copy

from tests.unit.env_cases import warned as _ids

HOST = {"system": "Linux", "machine": "x86_64", "python_version": "3.11.9",
        "python_implementation": "CPython", "conda_env": False, "python_prefix": "/home/u/venv",
        "os_release_name": "Ubuntu 24.04.1 LTS", "kernel_release": "6.8.0-50-generic"}


def _smi(cc: str = "8.9", driver: str = "570.133.07", cuda: str = "12.8") -> dict:
    return {"header": f"| NVIDIA-SMI {driver}    Driver Version: {driver}    CUDA Version: "
                      f"{cuda}     |", "rows": f"0, NVIDIA GeForce RTX, 16303, {cc}"}


def _torch(version: str = "2.7.1+cu128", cuda: str | None = "12.8", cc: str = "8.9",
           gpu: bool = True, rocm: bool = False) -> dict:
    devices = [{"name": "cpu", "kind": "CPU", "description": "cpu"}]
    if gpu:
        devices.append({"name": "cuda:0", "kind": "GPU", "description": "GPU",
                        "compute_capability": cc})
    return {"status": "ok", "stderr": "", "result": {
        "name": "torch", "status": "ok", "version": version, "physical_devices": devices,
        "logical_devices": [d["name"] for d in devices], "build": {
            "is_cuda_build": not rocm, "cuda_version": cuda, "is_rocm_build": rocm,
            "arch_list": []}, "extra": {}}}


def _doc(dists: dict, torch: dict | None = None, smi: dict | None = None, **extra) -> dict:
    doc = {"host": dict(HOST), "distributions": {"numpy": "2.2.6", **dists},
           "frameworks": {"torch": torch} if torch else {}}
    if smi is not None:
        doc["nvidia_smi"] = smi
    doc.update(extra)
    return doc


def test_a_triton_older_than_the_gpu_is_named_with_its_release_and_ptxas() -> None:
    old = _doc({"torch": "2.7.0.dev20250305+cu128", "pytorch-triton": "3.2.0+git4b3bb1f8"},
               _torch("2.7.0.dev20250305+cu128", cc="12.0"), _smi("12.0"))
    f = _ids(old)["triton.gpu-newer-than-triton"]
    assert "sm_120" in f.title and "3.3.0" in f.fix and "TRITON_PTXAS_PATH" in f.fix
    gb10 = _doc({"torch": "2.10.0+cu130", "pytorch-triton": "3.5.0"},
                _torch("2.10.0+cu130", "13.0", cc="12.1"), _smi("12.1", "580.95.05", "13.0"))
    assert "3.6.0" in _ids(gb10)["triton.gpu-newer-than-triton"].fix


def test_silent_for_a_triton_that_knows_the_gpu_or_a_gpu_not_in_the_table() -> None:
    new = _doc({"torch": "2.7.1+cu128", "triton": "3.3.1"}, _torch(cc="12.0"), _smi("12.0"))
    assert "triton.gpu-newer-than-triton" not in _ids(new)
    ada = _doc({"torch": "2.5.1+cu124", "triton": "3.1.0"}, _torch("2.5.1+cu124", "12.4"),
               _smi())
    assert "triton.gpu-newer-than-triton" not in _ids(ada)
    none = _doc({"torch": "2.7.1+cu128"}, _torch(cc="12.0"), _smi("12.0"))
    assert "triton.gpu-newer-than-triton" not in _ids(none)


def _deepspeed(cuda_home: str, torch_cuda: str = "11.7") -> dict:
    return _doc({"torch": "2.0.1", "deepspeed": "0.12.6"}, _torch("2.0.1", torch_cuda),
                _smi(), env_vars={"CUDA_HOME": cuda_home})


def test_an_extension_builder_with_cuda_home_of_another_major_is_an_error() -> None:
    f = _ids(_deepspeed("/usr/local/cuda-12.2"))["cuda.extension-toolkit-major"]
    assert "12.2" in f.title and "11.7" in f.title
    assert "whl/cu121" in f.fix and "CUDA_HOME=/usr/local/cuda-11.7" in f.fix


def test_silent_for_one_cuda_major_no_builder_or_no_cuda_home() -> None:
    assert "cuda.extension-toolkit-major" not in _ids(_deepspeed("/usr/local/cuda-11.8"))
    assert "cuda.extension-toolkit-major" not in _ids(_deepspeed("/usr/local/cuda"))
    plain = _deepspeed("/usr/local/cuda-12.2")
    del plain["distributions"]["deepspeed"]
    assert "cuda.extension-toolkit-major" not in _ids(plain)


def _bnb(version: str, rocm: bool = True) -> dict:
    torch = ("2.7.1+rocm6.3" if rocm else "2.7.1+cu128")
    return _doc({"torch": torch, "bitsandbytes": version},
                _torch(torch, None if rocm else "12.8", rocm=rocm),
                None if rocm else _smi(), rocminfo="  Name:                    gfx1201\n"
                "  Marketing Name:          AMD Radeon RX 9070 XT\n" if rocm else "")


def test_bitsandbytes_without_a_rocm_library_on_a_rocm_torch() -> None:
    f = _ids(_bnb("0.46.0"))["rocm.bitsandbytes-no-rocm-library"]
    assert "gfx1201" in f.title and "-DCOMPUTE_BACKEND=hip" in f.fix and "from source" in f.fix


def test_silent_for_bitsandbytes_on_cuda_or_a_later_release() -> None:
    assert "rocm.bitsandbytes-no-rocm-library" not in _ids(_bnb("0.46.0", rocm=False))
    assert "rocm.bitsandbytes-no-rocm-library" not in _ids(_bnb("0.48.1"))


def _conda(listing: list[str], os_name: str = "Ubuntu 24.04.2 LTS",
           dists: dict | None = None, ldconfig: str = "") -> dict:
    doc = _doc(dists if dists is not None else {"torch": "2.7.1", "pykeops": "2.3"},
               _torch("2.7.1", "12.6"), _smi(), env_lib_listing=listing, ldconfig=ldconfig,
               env_vars={"CONDA_PREFIX": "/home/u/miniconda3/envs/k"})
    doc["host"].update(conda_env=True, python_prefix="/home/u/miniconda3/envs/k",
                       os_release_name=os_name)
    return doc


def test_an_env_libstdcxx_older_than_the_system_compiler_with_a_builder() -> None:
    f = _ids(_conda(["libstdc++.so.6", "libstdc++.so.6.0.29"]))[
        "libstdcxx.env-older-than-system-compiler"]
    assert "GLIBCXX_3.4.29" in f.title and "GLIBCXX_3.4.32" in f.title
    assert "libstdcxx-ng>=13" in f.fix


def test_silent_for_a_new_enough_env_runtime_no_builder_or_an_older_os() -> None:
    key = "libstdcxx.env-older-than-system-compiler"
    assert key not in _ids(_conda(["libstdc++.so.6", "libstdc++.so.6.0.33"]))
    assert key not in _ids(_conda(["libstdc++.so.6.0.29"], dists={"torch": "2.7.1"}))
    assert key not in _ids(_conda(["libstdc++.so.6.0.29"], os_name="Ubuntu 22.04.4 LTS"))
    assert key not in _ids(_conda([]))
    venv = _conda(["libstdc++.so.6.0.29"])
    venv["host"]["conda_env"] = False
    assert key not in _ids(venv)


def test_an_el7_system_runtime_in_a_conda_env_without_its_own() -> None:
    line = "\tlibstdc++.so.6 (libc6,x86-64) => /lib64/libstdc++.so.6\n"
    f = _ids(_conda([], "Oracle Linux Server 7.9", {"torch": "2.1.1+cu118"}, line))[
        "libstdcxx.el7-system-runtime"]
    assert "GCC 4.8" in f.title and "LD_LIBRARY_PATH=$CONDA_PREFIX/lib" in f.fix
    # silent: the env has its own runtime, or the OS is not EL7
    assert "libstdcxx.el7-system-runtime" not in _ids(
        _conda(["libstdc++.so.6.0.30"], "CentOS Linux 7", {"torch": "2.1.1"}, line))
    assert "libstdcxx.el7-system-runtime" not in _ids(
        _conda([], "Rocky Linux 8.9", {"torch": "2.1.1"}, line))


def _rocm_override(value: str | None, gpu: bool = False) -> dict:
    doc = _doc({"torch": "2.9.1+rocm7.2.0"}, _torch("2.9.1+rocm7.2.0", "", gpu=gpu,
                                                   rocm=True))
    if value is not None:
        doc["env_vars"] = {"HSA_OVERRIDE_GFX_VERSION": value}
    return doc


def test_an_empty_hsa_override_with_no_gpu_seen_is_an_error() -> None:
    f = _ids(_rocm_override(""))["rocm.override-empty"]
    assert f.fix.startswith("unset HSA_OVERRIDE_GFX_VERSION")


def test_silent_for_a_set_override_an_absent_one_or_a_gpu_seen() -> None:
    for doc in (_rocm_override("11.0.0"), _rocm_override(None), _rocm_override("", gpu=True)):
        assert "rocm.override-empty" not in _ids(doc)


def test_a_cu_tagged_torch_with_no_driver_visible_names_the_container_request() -> None:
    doc = _doc({"torch": "2.7.1+cu128"}, _torch(gpu=False))
    f = _ids(doc)["cuda.build-without-driver"]
    assert "container" in f.why and "--gpus all" in f.fix


def test_silent_with_nvidia_smi_a_plain_pypi_torch_a_gpu_or_wsl() -> None:
    key = "cuda.build-without-driver"
    assert key not in _ids(_doc({"torch": "2.7.1+cu128"}, _torch(gpu=False), _smi()))
    assert key not in _ids(_doc({"torch": "2.7.1"}, _torch("2.7.1", gpu=False)))
    assert key not in _ids(_doc({"torch": "2.7.1+cpu"}, _torch("2.7.1+cpu", None, gpu=False)))
    wsl = _doc({"torch": "2.7.1+cu128"}, _torch(gpu=False))
    wsl["host"]["kernel_release"] = "5.15.167.4-microsoft-standard-WSL2"
    assert key not in _ids(wsl)


def _tf(ldconfig: str, dists: dict | None = None, version: str = "2.15.0") -> dict:
    doc = _doc({"tensorflow": version, **(dists or {})}, smi=_smi("8.6", "535.129.03", "12.2"),
               ldconfig=ldconfig)
    doc["frameworks"] = {"tensorflow": {"status": "ok", "stderr": "", "result": {
        "name": "tensorflow", "status": "ok", "version": version, "physical_devices": [
            {"name": "/physical_device:GPU:0", "kind": "GPU", "description": "gpu"}],
        "logical_devices": [], "build": {"is_cuda_build": True, "cuda_version": "12.2",
                                         "cudnn_version": "8"}, "extra": {}}}}
    return doc


SYS_CUDNN8 = "\tlibcudnn.so.8 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcudnn.so.8\n"


def test_tf_on_a_system_cudnn_of_unknown_minor_names_the_tested_one() -> None:
    f = _ids(_tf(SYS_CUDNN8))["tensorflow.system-cudnn-minor-unknown"]
    assert "8.9" in f.title and "tensorflow[and-cuda]==2.15.*" in f.fix


def test_silent_with_the_cudnn_wheel_a_minor_in_the_soname_or_no_system_cudnn() -> None:
    key = "tensorflow.system-cudnn-minor-unknown"
    assert key not in _ids(_tf(SYS_CUDNN8, {"nvidia-cudnn-cu12": "8.9.4.25"}))
    assert key not in _ids(_tf(SYS_CUDNN8 + SYS_CUDNN8.replace("so.8 ", "so.8.9.4 ")))
    assert key not in _ids(_tf(""))
    doc = copy.deepcopy(_tf(SYS_CUDNN8))
    doc["frameworks"]["tensorflow"]["result"]["physical_devices"] = []
    assert key not in _ids(doc)


def test_torchaudio_of_another_release_is_pinned_to_torch_exact_release() -> None:
    doc = _doc({"torch": "2.6.0+cu124", "torchaudio": "2.9.1"}, _torch("2.6.0+cu124", "12.4"),
               _smi())
    f = _ids(doc)["stack.release-skew"]
    assert "'torchaudio==2.6.0'" in f.fix and "whl/cu124" in f.fix
    # before 2.0 the numbers differ (0.13 <-> 1.13): the pin stays a minor one
    old = _doc({"torch": "1.13.1+cu117", "torchaudio": "0.12.1"}, _torch("1.13.1+cu117",
                                                                        "11.7"), _smi())
    assert "'torchaudio==0.13.*'" in _ids(old)["stack.release-skew"].fix
    # torch 2.0.1's torchaudio is 2.0.2: before 2.1 the pin stays a minor one
    two = _doc({"torch": "2.0.1+cu118", "torchaudio": "2.1.0"}, _torch("2.0.1+cu118", "11.8"),
               _smi())
    assert "'torchaudio==2.0.*'" in _ids(two)["stack.release-skew"].fix


def _jax(plugin: str, driver: str, cuda: str) -> dict:
    return _doc({"jax": plugin, "jaxlib": plugin, "jax-cuda12-plugin": plugin,
                 "jax-cuda12-pjrt": plugin}, smi=_smi("8.0", driver, cuda))


def test_a_jax_cuda12_plugin_from_0_4_34_on_a_525_driver() -> None:
    f = _ids(_jax("0.4.35", "525.85.12", "12.0"))["jax.plugin-needs-newer-driver"]
    assert "535" in f.fix and "jax[cuda12]==0.4.33" in f.fix


def test_silent_for_0_4_33_or_a_535_driver() -> None:
    assert "jax.plugin-needs-newer-driver" not in _ids(_jax("0.4.33", "525.85.12", "12.0"))
    assert "jax.plugin-needs-newer-driver" not in _ids(_jax("0.4.35", "535.129.03", "12.2"))
