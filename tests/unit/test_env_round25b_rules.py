"""Issue 24, round 25: rules written against round24_dev (checks/accelerators.py and knowledge
entries), each with cases that must stay silent. An Intel XPU stack in a conda environment with
its own libstdc++ (pytorch#147226, intel-extension-for-transformers#1276), PyTorch +xpu nightlies
published as CPU builds (pytorch#150260), TensorFlow for ROCm ignoring a gfx target its build
does not list (rocm_lab#16), an MPS nightly older than its CPU fallback (PyTorch Forums 152189),
a torch_npu build not released for the CANN in use (Ascend/pytorch#37), and vllm-ascend's
torch-npu development build (vllm-ascend#340)."""

from __future__ import annotations

from tests.unit.env_cases import warned as _ids

LINUX = {"system": "Linux", "machine": "x86_64", "python_version": "3.10.16",
         "python_implementation": "CPython", "conda_env": True,
         "python_prefix": "/home/u/miniconda3/envs/xpu",
         "os_release_name": "Ubuntu 24.04.2 LTS", "kernel_release": "6.11.0-17-generic"}
CPU_TORCH = {"status": "ok", "stderr": "", "result": {
    "name": "torch", "status": "ok", "version": "2.6.0",
    "physical_devices": [{"name": "cpu", "kind": "CPU", "description": "cpu"}],
    "logical_devices": ["cpu"], "build": {"is_cuda_build": False, "mps_built": False}}}


def _doc(dists: dict, host: dict | None = None, **extra) -> dict:
    doc = {"host": host or LINUX, "distributions": {"numpy": "1.26.4", **dists},
           "frameworks": {"torch": CPU_TORCH}}
    doc.update(extra)
    return doc


CXX29 = ["libstdc++.so", "libstdc++.so.6", "libstdc++.so.6.0.29", "libgcc_s.so.1"]


def test_xpu_stack_in_a_conda_env_with_an_older_libstdcxx() -> None:
    found = _ids(_doc({"torch": "2.6.0+xpu", "intel-sycl-rt": "2025.0.2"},
                      env_lib_listing=CXX29))
    f = found["xpu.conda-libstdcxx"]
    assert f.severity == "warning" and "GLIBCXX_3.4.32" in f.observed
    assert "libstdcxx-ng" in f.fix and "libstdc++" in f.fix
    # IPEX's XPU build on Ubuntu 22.04 (its libstdc++ as old as the env's): IPEX's known issue
    host = {**LINUX, "os_release_name": "Ubuntu 22.04.3 LTS"}
    assert "xpu.conda-libstdcxx" in _ids(_doc(
        {"torch": "2.1.0a0+cxx11.abi", "intel-extension-for-pytorch": "2.1.10+xpu"}, host,
        env_lib_listing=CXX29))


def test_xpu_libstdcxx_stays_silent() -> None:
    # no libstdc++ of its own in the env, a CPU torch, a CPU IPEX, outside conda, a newer env
    assert "xpu.conda-libstdcxx" not in _ids(_doc({"torch": "2.6.0+xpu"},
                                                  env_lib_listing=["libgcc_s.so.1"]))
    assert "xpu.conda-libstdcxx" not in _ids(_doc({"torch": "2.6.0+cpu"},
                                                  env_lib_listing=CXX29))
    assert "xpu.conda-libstdcxx" not in _ids(_doc(
        {"torch": "2.5.0", "intel-extension-for-pytorch": "2.5.0+cpu"}, env_lib_listing=CXX29))
    venv = {**LINUX, "conda_env": False, "python_prefix": "/home/u/venv"}
    assert "xpu.conda-libstdcxx" not in _ids(_doc({"torch": "2.6.0+xpu"}, venv,
                                                  env_lib_listing=CXX29))
    newer = ["libstdc++.so.6", "libstdc++.so.6.0.33"]
    assert "xpu.conda-libstdcxx" not in _ids(_doc({"torch": "2.6.0+xpu"}, env_lib_listing=newer))


def test_xpu_nightly_published_as_a_cpu_build() -> None:
    f = _ids(_doc({"torch": "2.8.0.dev20250327+xpu"}))["xpu.cpu-nightly"]
    assert "_is_compiled" in f.fix and "dev20250321" in f.fix
    for ok in ("2.8.0.dev20250321+xpu", "2.8.0.dev20250415+xpu", "2.7.0+xpu",
               "2.8.0.dev20250327+cpu"):
        assert "xpu.cpu-nightly" not in _ids(_doc({"torch": ok})), ok


def _tf(said: str) -> dict:
    return {"status": "ok", "stderr": said, "result": {
        "name": "tensorflow", "status": "ok", "version": "2.13.0",
        "physical_devices": [{"name": "/physical_device:CPU:0", "kind": "CPU"}],
        "logical_devices": ["/device:CPU:0"], "build": {"is_rocm_build": True}}}


IGNORED = ("2023-10-31 01:21:04.591507: I tensorflow/core/common_runtime/gpu/gpu_device.cc:2015]"
           " Ignoring visible gpu device (device: 0, name: Radeon RX 7900 XT, pci bus id: "
           "0000:03:00.0) with AMDGPU version : gfx1100. The supported AMDGPU versions are "
           "{listed}.\n")


def test_tensorflow_rocm_ignoring_a_target_its_build_lacks() -> None:
    host = {**LINUX, "conda_env": False, "python_prefix": "/home/u/venv"}
    doc = _doc({"tensorflow-rocm": "2.13.0.570"}, host)
    doc["frameworks"] = {"tensorflow": _tf(IGNORED.format(listed="gfx1030, gfx900, gfx90a"))}
    f = _ids(doc)["tensorflow.rocm-arch-not-built"]
    assert f.severity == "error" and "gfx1100" in f.title and "tensorflow-upstream" in f.fix
    # silent: the target glued into the list (that is rocm.tf-supported-list-broken's), and a
    # TensorFlow that said nothing of the kind
    doc["frameworks"] = {"tensorflow": _tf(IGNORED.format(listed="gfx1030gfx1100, gfx900"))}
    assert "tensorflow.rocm-arch-not-built" not in _ids(doc)
    doc["frameworks"] = {"tensorflow": _tf("")}
    assert "tensorflow.rocm-arch-not-built" not in _ids(doc)


def _mac_torch(version: str) -> dict:
    host = {"system": "Darwin", "machine": "arm64", "python_version": "3.9.12",
            "python_implementation": "CPython", "mac_ver": "13.4", "proc_translated": "0",
            "conda_env": False, "python_prefix": "/Users/u/venv"}
    torch = {"status": "ok", "stderr": "", "result": {
        "name": "torch", "status": "ok", "version": version,
        "physical_devices": [{"name": "cpu", "kind": "CPU"}, {"name": "mps", "kind": "MPS"}],
        "logical_devices": ["cpu", "mps"], "build": {"is_cuda_build": False, "mps_built": True}}}
    return {"host": host, "distributions": {"torch": version, "numpy": "1.22.3"},
            "frameworks": {"torch": torch}}


def test_mps_nightly_before_the_cpu_fallback() -> None:
    f = _ids(_mac_torch("1.12.0.dev20220518"))["mps.no-cpu-fallback"]
    assert "PYTORCH_ENABLE_MPS_FALLBACK" in f.fix and "nightly" in f.fix
    for ok in ("1.12.0.dev20220601", "1.12.0", "2.1.0", "1.13.0.dev20220801"):
        assert "mps.no-cpu-fallback" not in _ids(_mac_torch(ok)), ok


ASCEND = {**LINUX, "machine": "aarch64", "os_release_name": "EulerOS 2.0 (SP10)",
          "python_prefix": "/root/miniconda3/envs/mindie"}


def test_torch_npu_not_the_build_for_its_cann() -> None:
    env = {"ASCEND_HOME_PATH": "/usr/local/Ascend/ascend-toolkit/8.0.RC1"}
    doc = _doc({"torch": "2.1.0", "torch-npu": "2.1.0.post4"}, ASCEND, env_vars=env)
    f = _ids(doc)["ascend.torch-npu-not-for-cann"]
    assert "2.1.0.post5" in f.fix and "torch_npu" in f.title
    # silent: the paired build, a CANN path that names no release ("latest"), a CANN with no
    # row, another torch, no torch_npu
    doc["distributions"]["torch-npu"] = "2.1.0.post5"
    assert "ascend.torch-npu-not-for-cann" not in _ids(doc)
    doc["distributions"]["torch-npu"] = "2.1.0.post4"
    for home in ("/usr/local/Ascend/ascend-toolkit/latest",
                 "/usr/local/Ascend/ascend-toolkit/8.1.RC1"):
        doc["env_vars"] = {"ASCEND_HOME_PATH": home}
        assert "ascend.torch-npu-not-for-cann" not in _ids(doc), home
    doc["env_vars"] = env
    doc["distributions"]["torch"] = "2.3.1"
    assert "ascend.torch-npu-not-for-cann" not in _ids(doc)
    assert "ascend.torch-npu-not-for-cann" not in _ids(_doc({"torch": "2.1.0"}, ASCEND,
                                                            env_vars=env))


def test_vllm_ascend_needs_its_torch_npu_development_build() -> None:
    base = {"torch": "2.5.1", "vllm": "0.7.3", "vllm-ascend": "0.7.3rc1"}
    found = _ids(_doc({**base, "torch-npu": "2.5.1rc1"}, ASCEND))
    f = found["stack.dependency-range"]
    assert "torch-npu" in f.title and "2.5.1.dev20250320" in f.fix
    for ok in ("2.5.1.dev20250320", "2.5.1", "2.5.1.post1.dev20250619"):
        assert "stack.dependency-range" not in _ids(_doc({**base, "torch-npu": ok}, ASCEND)), ok
    # an older vllm-ascend (0.7.1rc1) is outside the entry's range
    assert "stack.dependency-range" not in _ids(_doc(
        {**base, "vllm-ascend": "0.7.1rc1", "torch-npu": "2.5.1rc1"}, ASCEND))
