"""Issue 24, round 20: rules written against round19_dev, each with cases that must stay
silent. Packages the probe does not import are read from what it has: CuPy's and
CTranslate2's CUDA major against the environment's CUDA (warpx#4621, speech-to-text#12),
Paddle and ONNX Runtime beside CUDA libraries only pip wheels hold (PaddleDetection#7629,
insightface#2344), mmcv's prebuilt-torch ceiling (LLMDet#32), TensorRT's executable stack on
glibc 2.41 systems (REAL-Video-Enhancer#85), JAX's PyPI CUDA plugin on a Jetson (axol#102),
TensorFlow's not-built-for-this-capability line (tensorflow#112272), a toolkit newer than the
driver beside run-time compilers (Kaggle/docker-python#1361), torch's aarch64 cu130 wheels for
sm_110 (openral#167) and 32-bit Python on Windows (pytorch#149823). Raw inputs replay through
snapshot_from_raw."""

from __future__ import annotations

from devicebench.env.checks import load_knowledge, run_checks
from devicebench.env.interpret import snapshot_from_raw
from tests.unit.env_cases import warned as _ids

HOST = {"system": "Linux", "machine": "x86_64", "python_version": "3.11.9",
        "python_implementation": "CPython", "conda_env": False, "python_prefix": "/home/u/venv",
        "os_release_name": "Ubuntu 24.04.1 LTS", "kernel_release": "6.8.0-50-generic"}
SITE = "/home/u/venv/lib/python3.11/site-packages/nvidia"


def _smi(cc: str = "8.6", driver: str = "550.120", cuda: str = "12.4", name: str = "GPU") -> dict:
    return {"header": f"| NVIDIA-SMI {driver}    Driver Version: {driver}    CUDA Version: "
                      f"{cuda}     |", "rows": f"0, {name}, 24576, {cc}"}


def _torch(version: str = "2.5.1+cu124", cuda: str = "12.4", cc: str = "8.6",
           arch: list | None = None) -> dict:
    devices = [{"name": "cpu", "kind": "CPU", "description": "cpu"},
               {"name": "cuda:0", "kind": "GPU", "description": "GPU", "compute_capability": cc}]
    return {"status": "ok", "stderr": "", "result": {
        "name": "torch", "status": "ok", "version": version, "physical_devices": devices,
        "logical_devices": ["cpu", "cuda:0"], "build": {
            "is_cuda_build": True, "cuda_version": cuda, "is_rocm_build": False,
            "arch_list": arch or []}, "extra": {}}}


def _doc(dists: dict, torch: dict | None = None, smi: dict | None = None, host: dict | None = None,
         **extra) -> dict:
    doc = {"host": {**HOST, **(host or {})}, "distributions": {"numpy": "1.26.4", **dists},
           "frameworks": {"torch": torch} if torch else {}}
    if smi is not None:
        doc["nvidia_smi"] = smi
    doc.update(extra)
    return doc


def test_a_cupy_wheel_for_another_cuda_major_is_named_with_the_right_wheel() -> None:
    cudart = "\tlibcudart.so.12 (libc6,x86-64) => /usr/local/cuda/lib64/libcudart.so.12\n"
    libs = {"env_vars": {"CUDA_HOME": "/opt/nvidia/hpc_sdk/Linux_x86_64/23.9/cuda/12.2"},
            "ldconfig": cudart}
    f = _ids(_doc({"cupy-cuda11x": "12.3.0"}, **libs))["cuda.package-for-another-major"]
    assert "cupy-cuda11x" in f.title and "pip install cupy-cuda12x" in f.fix
    assert "cuda.package-for-another-major" not in _ids(_doc({"cupy-cuda12x": "13.0.0"}, **libs))
    # no CUDA found at all: nothing to compare with (a machine that has not installed it yet)
    assert "cuda.package-for-another-major" not in _ids(_doc({"cupy-cuda11x": "12.3.0"}))
    # the CUDA 11 runtime from nvidia-* wheels beside a CUDA 12 system
    both = _doc({"cupy-cuda11x": "12.3.0", "nvidia-cuda-nvrtc-cu11": "11.8.89"}, **libs)
    assert "cuda.package-for-another-major" not in _ids(both)


def test_ctranslate2_4_needs_cuda_12_and_3_x_cuda_11() -> None:
    win = {"system": "Windows", "machine": "AMD64", "platform": "Windows-10-10.0.19045-SP0",
           "python_prefix": "C:\\venv"}
    kit = "C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA"
    cuda11 = {"env_vars": {"CUDA_PATH": f"{kit}\\v11.4", "PATH": f"{kit}\\v11.4\\bin;C:\\Windows"}}
    f = _ids(_doc({"ctranslate2": "4.1.0"}, host=win, **cuda11))["cuda.package-for-another-major"]
    assert "ctranslate2" in f.title and "CUDA 12" in f.fix and "ctranslate2<4" in f.fix
    assert "cuda.package-for-another-major" not in _ids(
        _doc({"ctranslate2": "3.24.0"}, host=win, **cuda11))
    cuda12 = {"env_vars": {"CUDA_PATH": f"{kit}\\v12.4"}}
    assert "cuda.package-for-another-major" not in _ids(
        _doc({"ctranslate2": "4.1.0"}, host=win, **cuda12))


def _cudnn_wheel() -> dict:
    return {"wheel_lib_listing": {f"{SITE}/cudnn/lib": ["libcudnn.so.9", "libcudnn_ops.so.9"]}}


def test_paddle_beside_a_cudnn_only_pip_wheels_hold() -> None:
    system = "\tlibcudart.so.12 (libc6,x86-64) => /usr/local/cuda/lib64/libcudart.so.12\n" \
             "\tlibcublas.so.12 (libc6,x86-64) => /usr/local/cuda/lib64/libcublas.so.12\n"
    doc = _doc({"paddlepaddle-gpu": "2.6.2", "nvidia-cudnn-cu12": "9.1.0.70", "torch": "2.5.1"},
               _torch(), _smi(), ldconfig=system, **_cudnn_wheel())
    f = _ids(doc)["cuda.wheel-libs-invisible-to-package"]
    assert "libcudnn.so.9" in f.title and "libcudnn_ops" not in f.title
    assert f"LD_LIBRARY_PATH={SITE}/cudnn/lib" in f.fix and "libcudnn.so " not in f.fix
    assert f"{SITE}/cudnn/lib/libcudnn.so" in f.fix
    # the wheel's directory on LD_LIBRARY_PATH, or a system cuDNN: silent
    on_path = dict(doc, env_vars={"LD_LIBRARY_PATH": f"{SITE}/cudnn/lib"},
                   ld_path_listing={f"{SITE}/cudnn/lib": ["libcudnn.so.9"]})
    assert "cuda.wheel-libs-invisible-to-package" not in _ids(on_path)
    sys_cudnn = dict(doc, ldconfig=system + "\tlibcudnn.so.9 (libc6,x86-64) => "
                                            "/usr/lib/x86_64-linux-gnu/libcudnn.so.9\n")
    assert "cuda.wheel-libs-invisible-to-package" not in _ids(sys_cudnn)
    # torch alone (it loads the wheels by RUNPATH): silent
    no_paddle = dict(doc, distributions={"torch": "2.5.1", "nvidia-cudnn-cu12": "9.1.0.70"})
    assert "cuda.wheel-libs-invisible-to-package" not in _ids(no_paddle)


def test_onnxruntime_gpu_names_import_torch_and_preload_dlls() -> None:
    doc = _doc({"onnxruntime-gpu": "1.15.1", "torch": "2.0.1"}, _torch("2.0.1+cu117", "11.7"),
               _smi(), wheel_lib_listing={f"{SITE}/cudnn/lib": ["libcudnn.so.8"],
                                          f"{SITE}/cublas/lib": ["libcublas.so.11"]})
    f = _ids(doc)["cuda.wheel-libs-invisible-to-package"]
    assert "onnxruntime-gpu" in f.title and "import torch" in f.fix and "preload_dlls" in f.fix
    mac = dict(doc, host={**HOST, "system": "Darwin", "machine": "arm64"})
    assert "cuda.wheel-libs-invisible-to-package" not in _ids(mac)


def test_mmcv_2_0_beside_torch_2_1_is_named_with_the_index_for_this_torch() -> None:
    doc = _doc({"torch": "2.1.0", "mmcv": "2.0.0"}, _torch("2.1.0+cu121", "12.1"), _smi())
    f = _ids(doc)["extension.prebuilt-for-older-torch"]
    assert "mmcv 2.0.0" in f.title and "dist/cu121/torch2.1/index.html" in f.fix
    for dists in ({"torch": "2.0.1", "mmcv": "2.0.0"}, {"torch": "2.1.0", "mmcv": "2.1.0"}):
        assert "extension.prebuilt-for-older-torch" not in _ids(
            dict(doc, distributions=dists))


def test_tensorrt_before_10_8_on_a_glibc_2_41_system() -> None:
    cachy = {"os_release_name": "CachyOS", "kernel_release": "6.13.2-2-cachyos"}
    doc = _doc({"torch": "2.6.0", "tensorrt": "10.7.0"}, _torch("2.6.0+cu126", "12.6"),
               _smi(), host=cachy)
    f = _ids(doc)["tensorrt.executable-stack-refused"]
    assert "10.8" in f.fix and "CachyOS" in f.observed
    assert "tensorrt.executable-stack-refused" not in _ids(
        dict(doc, distributions={"torch": "2.6.0", "tensorrt": "10.8.0"}))
    assert "tensorrt.executable-stack-refused" not in _ids(dict(doc, host=HOST))  # Ubuntu 24.04


def test_jax_pypi_cuda_plugin_on_a_jetson() -> None:
    tegra = {"machine": "aarch64", "kernel_release": "5.15.148-tegra",
             "os_release_name": "Ubuntu 22.04.5 LTS"}
    dists = {"jax": "0.8.0", "jaxlib": "0.8.0", "jax-cuda12-plugin": "0.8.0"}
    doc = _doc(dists, smi=_smi("8.7", "540.4.0", "12.6", "Orin"), host=tegra)
    f = _ids(doc)["jetson.pypi-cuda-wheel"]
    assert "sm_87" in f.title and "source" in f.fix
    # a Grace-Hopper (SBSA) aarch64 host, or Thor (sm_110, served by the SBSA wheels): silent
    gh = dict(doc, host={**HOST, "machine": "aarch64"}, nvidia_smi=_smi("9.0", name="GH200"))
    assert "jetson.pypi-cuda-wheel" not in _ids(gh)
    thor = dict(doc, nvidia_smi=_smi("11.0", "580.00", "13.0", "NVIDIA Thor"))
    assert "jetson.pypi-cuda-wheel" not in _ids(thor)


def _tf(stderr: str, version: str) -> dict:
    return {"status": "ok", "stderr": stderr, "result": {
        "name": "tensorflow", "status": "ok", "version": version.split("+")[0],
        "physical_devices": [{"name": "/physical_device:GPU:0", "kind": "GPU",
                              "description": "GPU"}], "logical_devices": [],
        "build": {"is_cuda_build": True, "cuda_version": "12.8", "cudnn_version": "9"},
        "extra": {}}}


def test_tensorflow_not_built_for_the_capability() -> None:
    line = ("W gpu_device.cc] TensorFlow was not built with CUDA kernel binaries compatible "
            "with compute capability 12.0. CUDA kernels will be jit-compiled from PTX, which "
            "could take 30 minutes or longer.\n")
    doc = _doc({"tensorflow": "2.17.0+nv25.2"}, smi=_smi("12.0", "570.86.16", "12.8"))
    doc["frameworks"] = {"tensorflow": _tf(line, "2.17.0+nv25.2")}
    f = _ids(doc)["tensorflow.no-kernels-for-capability"]
    assert "12.0" in f.title and "nvcr.io" in f.fix and "nv25.2" in f.fix
    doc["distributions"]["tensorflow"] = "2.17.0"
    assert "NGC" in _ids(doc)["tensorflow.no-kernels-for-capability"].fix
    doc["frameworks"] = {"tensorflow": _tf("", "2.17.0")}
    assert "tensorflow.no-kernels-for-capability" not in _ids(doc)


def test_a_toolkit_newer_than_the_driver_beside_run_time_compilers() -> None:
    listing = {"/usr/local/cuda/lib64": ["libcudart.so.12", "libcudart.so.12.3.101"]}
    doc = _doc({"cudf": "23.08.00", "numba": "0.58.1", "torch": "2.1.2"},
               _torch("2.1.2", "12.1", "6.0"), _smi("6.0", "535.129.03", "12.2"),
               env_vars={"LD_LIBRARY_PATH": "/usr/local/cuda/lib64"}, ld_path_listing=listing)
    f = _ids(doc)["cuda.toolkit-newer-than-driver-jit"]
    assert "12.3" in f.title and "12.2" in f.fix and "545" in f.fix
    assert "cuda.toolkit-newer-than-driver-jit" not in _ids(
        dict(doc, distributions={"torch": "2.1.2"}))  # no run-time compiler
    assert "cuda.toolkit-newer-than-driver-jit" not in _ids(
        dict(doc, nvidia_smi=_smi("6.0", "545.23.06", "12.3")))
    # another major is the driver check's (cuda.driver-too-old), not this one
    assert "cuda.toolkit-newer-than-driver-jit" not in _ids(
        dict(doc, env_vars={"CUDA_HOME": "/usr/local/cuda-13.0"}, ld_path_listing={}))


def test_torch_on_thor_names_the_aarch64_cu130_wheels_only_on_aarch64() -> None:
    kb = load_knowledge()
    rows = [v for v in kb["torch_variants"] if "11.0" in v["archs"]]
    assert [v["machine"] for v in rows] == ["aarch64"] and rows[0]["source"].startswith("https://")
    arch = ["sm_80", "sm_90", "sm_100", "sm_120"]
    doc = _doc({"torch": "2.9.1+cu128"}, _torch("2.9.1+cu128", "12.8", "11.0", arch),
               _smi("11.0", "580.00", "13.0"), host={"machine": "aarch64"})
    assert "whl/cu130" in _ids(doc)["gpu.arch-not-in-build"].fix
    x86 = dict(doc, host=HOST)
    assert "whl/cu130" not in _ids(x86)["gpu.arch-not-in-build"].fix


def test_a_32_bit_python_on_windows_gets_no_wheels() -> None:
    win32 = {"system": "Windows", "machine": "x86", "platform": "Windows-10-10.0.19045-SP0",
             "python_prefix": "C:\\Python313-32"}
    found = [f for f in run_checks(snapshot_from_raw(_doc({}, host=win32)))
             if f.id == "platform.no-wheels"]
    assert len(found) == 3 and all("32-bit" in f.title and "64-bit" in f.fix for f in found)
    win64 = dict(win32, machine="AMD64")
    assert not [f for f in run_checks(snapshot_from_raw(_doc({}, host=win64)))
                if f.id == "platform.no-wheels"]


def test_every_round20b_entry_cites_its_source() -> None:
    kb = load_knowledge()
    rows = [*kb["cuda_major_packages"], *kb["loader_path_packages"], *kb["prebuilt_torch_max"],
            kb["tensorrt_execstack"], kb["jetson_pypi"], kb["toolkit_jit"]]
    assert all(r["source"].startswith("https://") for r in rows)
