"""Issue 24, round 19 (step 0): the eighteenth set's held-out misses as general rules.
NVIDIA's own TensorFlow builds (``nvidia-tensorflow 1.15.5+nvYY.MM``) read for the CUDA their
NGC release is based on, the CUDA runtime's 'driver version is insufficient for CUDA runtime
version' read as a driver older than the build in any framework (NVIDIA/tensorflow#89), and a
Linux driver's libcuda shadowing WSL's reported with no framework probed or none seeing a GPU
(NVIDIA/cuml#6218, #5624). Each with cases that must stay silent; raw inputs replay through
snapshot_from_raw."""

from __future__ import annotations

from tests.unit.env_cases import warned as _ids

HOST = {"system": "Linux", "machine": "x86_64", "python_version": "3.8.16",
        "python_implementation": "CPython", "conda_env": False, "python_prefix": "/home/u/venv"}
INSUFFICIENT = ("InternalError: cudaGetDevice() failed. Status: CUDA driver version is "
                "insufficient for CUDA runtime version")


def _smi(driver: str, cuda: str) -> dict:
    return {"header": f"| NVIDIA-SMI {driver}    Driver Version: {driver}    CUDA Version: "
                      f"{cuda}     |", "rows": "0, NVIDIA GeForce RTX 3070, 8192, 8.6"}


def _nvtf(version: str, driver: str = "470.182.03", cuda: str = "11.4",
          error: str = INSUFFICIENT) -> dict:
    return {"host": HOST, "nvidia_smi": _smi(driver, cuda),
            "distributions": {"nvidia-tensorflow": version, "numpy": "1.23.5"},
            "frameworks": {"tensorflow": {"status": "ok", "stderr": "", "result": {
                "name": "tensorflow", "status": "error", "error": error}}}}


def test_an_nvidia_tensorflow_release_tag_is_its_build_cuda_for_the_driver_check() -> None:
    for tag in ("1.15.5+nv23.3", "1.15.5+nv23.03"):
        f = _ids(_nvtf(tag))["cuda.driver-too-old"]
        assert "CUDA 12.1" in f.observed and "nvidia-tensorflow" in f.observed
        assert "525.60.13" in f.fix
        # the newest release read here whose CUDA the 470 driver (CUDA 11.4) runs
        assert "pip install 'nvidia-tensorflow==1.15.5+nv21.10'" in f.fix
        assert "tensorflow-wheel-release-notes" in f.source
    # no duplicate: the message rule leaves it to the driver check
    assert "cuda.driver-older-than-runtime" not in _ids(_nvtf("1.15.5+nv23.3"))


def test_silent_for_an_nvidia_tensorflow_release_the_driver_runs() -> None:
    ok = _nvtf("1.15.5+nv23.3", driver="535.154.05", cuda="12.2", error="")
    ok["frameworks"]["tensorflow"] = {"status": "ok", "stderr": "", "result": {
        "name": "tensorflow", "status": "ok", "version": "1.15.5", "physical_devices": [
            {"name": "/physical_device:GPU:0", "kind": "GPU", "description": "gpu"}],
        "logical_devices": [], "build": {}, "extra": {}}}
    found = _ids(ok)
    assert "cuda.driver-too-old" not in found and "cuda.driver-older-than-runtime" not in found
    # a release not read here gets no CUDA invented; the plain tensorflow wheel has no tag
    raw = _nvtf("1.15.5+nv22.12", error="ImportError: libcudart.so.11.0: cannot open")
    assert "cuda.driver-too-old" not in _ids(raw)
    assert "cuda.driver-older-than-runtime" not in _ids(raw)


def test_the_runtime_s_insufficient_driver_message_is_read_in_any_framework() -> None:
    # an nvidia-tensorflow release without a row: the message alone speaks
    f = _ids(_nvtf("1.15.5+nv22.12"))["cuda.driver-older-than-runtime"]
    assert f.severity == "error" and "driver" in f.title.lower()
    assert "470.182.03" in f.observed and "insufficient" in f.observed
    assert "update the NVIDIA driver" in f.fix and "for CUDA 11.4 or older" in f.fix
    assert "nvidia-tensorflow==1.15.5+nv21.10" in f.fix
    assert "cudaErrorInsufficientDriver" in f.source
    # torch whose build is not reported, in its log; no nvidia-smi in a container
    torch = {"host": HOST, "distributions": {"torch": "2.1.0", "numpy": "1.26.4"},
             "frameworks": {"torch": {"status": "ok", "stderr": "", "result": {
                 "name": "torch", "status": "error", "error": "RuntimeError: cuda runtime "
                 "error (35) : CUDA driver version is insufficient for CUDA runtime version"}}}}
    g = _ids(torch)["cuda.driver-older-than-runtime"]
    assert "the NVIDIA driver" in g.observed and "install a torch build for an older CUDA" in g.fix


def test_silent_without_the_message() -> None:
    for error in ("ImportError: libcudnn.so.8: cannot open shared object file",
                  "InternalError: CUDA runtime implicit initialization on GPU:0 failed"):
        assert "cuda.driver-older-than-runtime" not in _ids(_nvtf("1.15.5+nv22.12", error=error))


WSL_HOST = dict(HOST, kernel_release="5.15.167.4-microsoft-standard-WSL2",
                os_release_name="Ubuntu 24.04.1 LTS")
LINUX_LIBCUDA = "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
WSL_LIBCUDA = "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/wsl/lib/libcuda.so.1\n"


def _wsl(dists: dict, ldconfig: str, frameworks: dict | None = None) -> dict:
    raw = {"host": WSL_HOST, "nvidia_smi": _smi("565.77", "12.7"),
           "distributions": dict({"numpy": "2.0.2"}, **dists), "ldconfig": ldconfig}
    if frameworks is not None:
        raw["frameworks"] = frameworks
    return raw


def _torch(gpu: bool, status: str = "ok") -> dict:
    devices = [{"name": "cuda:0", "kind": "GPU", "description": "RTX 4090"}] if gpu else []
    result = {"name": "torch", "status": status, "version": "2.5.1+cu124",
              "physical_devices": devices, "logical_devices": [],
              "build": {"is_cuda_build": True, "cuda_version": "12.4"}, "extra": {}}
    if status != "ok":
        result = {"name": "torch", "status": status, "error": "RuntimeError: CUDA unknown error"}
    return {"torch": {"status": "ok", "stderr": "", "result": result}}


def test_a_linux_driver_libcuda_in_wsl2_is_named_with_no_framework_probed() -> None:
    for ldconfig in (LINUX_LIBCUDA + WSL_LIBCUDA, LINUX_LIBCUDA):
        f = _ids(_wsl({"cuml-cu12": "24.12.0", "numba-cuda": "0.0.17"}, ldconfig))[
            "wsl.linux-driver-libcuda"]
        assert f.severity == "error" and "libcuda" in f.title
        assert "no framework the probe imports" in f.observed and "cuml-cu12" in f.observed
        assert "/usr/lib/wsl/lib" in f.fix
    # a probed framework that failed outright is named too
    g = _ids(_wsl({"torch": "2.5.1"}, LINUX_LIBCUDA, _torch(False, "error")))
    assert "PyTorch failed" in g["wsl.linux-driver-libcuda"].observed


def test_silent_when_wsl_s_libcuda_comes_first_or_a_framework_sees_the_gpu() -> None:
    quiet = [_wsl({"cuml-cu12": "24.12.0"}, WSL_LIBCUDA + LINUX_LIBCUDA),
             _wsl({"torch": "2.5.1"}, LINUX_LIBCUDA, _torch(True)),
             dict(_wsl({"cuml-cu12": "24.12.0"}, LINUX_LIBCUDA), host=HOST)]  # not WSL
    for raw in quiet:
        assert "wsl.linux-driver-libcuda" not in _ids(raw), raw["ldconfig"]
