"""Issue 24, round 21: rules written against round20_dev, each with cases that must stay
silent. Shared machines and desktop platforms, read from what the probe has: CUDA's "busy or
unavailable" beside nvidia-smi's compute mode (anemoi-core#1333), Windows' path limit in an
install's error (TensorRT#4288), torch.compile without Triton on native Windows
(pytorch#136361), releases broken on one platform (tf-keras#35: TF 2.13 on Apple Silicon;
pytorch#95708: torch 2.0's inductor without OpenMP on macOS), jaxlib's last Intel-macOS
release (pymdp#385) and the torch release that pins an environment's older NCCL wheel
(scientific-computing-examples#157). Raw inputs replay through snapshot_from_raw."""

from __future__ import annotations

from devicebench.env.checks import run_checks
from devicebench.env.interpret import nvidia_smi_from_output, snapshot_from_raw
from tests.unit.env_cases import warned as _ids

LINUX = {"system": "Linux", "machine": "x86_64", "python_version": "3.12.11",
         "python_implementation": "CPython", "conda_env": False, "python_prefix": "/home/u/venv",
         "os_release_name": "Rocky Linux 8.10", "kernel_release": "4.18.0-553.el8_10.x86_64"}
WIN = {"system": "Windows", "machine": "AMD64", "python_version": "3.12.6",
       "python_implementation": "CPython", "platform": "Windows-10-10.0.22631-SP0",
       "python_prefix": "C:\\Users\\u\\proj\\.venv", "conda_env": False}
MAC = {"system": "Darwin", "machine": "arm64", "python_version": "3.11.4",
       "python_implementation": "CPython", "mac_ver": "14.4", "proc_translated": "0",
       "cpu_brand": "Apple M2", "python_prefix": "/Users/u/venv", "conda_env": False}
HEADER = "| NVIDIA-SMI 550.90.07    Driver Version: 550.90.07    CUDA Version: 12.4     |"


def _table(mode: str) -> str:
    return (f"{HEADER}\n|   0  NVIDIA A100-SXM4-40GB          On  |   00000000:07:00.0 Off |  0 |\n"
            f"| N/A   31C    P0    52W /  400W |   4MiB /  40960MiB |      0%   {mode} |\n")


def _torch(version: str = "2.7.1+cu126", first_use: str = "", cuda: bool = True,
           gpu: bool = True) -> dict:
    devices = [{"name": "cpu", "kind": "CPU", "description": "cpu"}]
    if gpu:
        devices.append({"name": "cuda:0", "kind": "GPU", "description": "GPU"})
    extra = {"first_use_error": first_use} if first_use else {}
    return {"status": "ok", "stderr": "", "result": {
        "name": "torch", "status": "ok", "version": version, "physical_devices": devices,
        "logical_devices": [d["name"] for d in devices], "build": {
            "is_cuda_build": cuda, "cuda_version": "12.6" if cuda else "",
            "is_rocm_build": False, "arch_list": []}, "extra": extra}}


def _doc(host: dict, dists: dict, frameworks: dict | None = None, **extra) -> dict:
    doc = {"host": host, "distributions": {"numpy": "1.26.4", **dists},
           "frameworks": frameworks or {}}
    doc.update(extra)
    return doc


BUSY = "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable"


def test_the_compute_mode_column_is_read_from_the_table() -> None:
    assert nvidia_smi_from_output(_table("E. Process"), "0, A100, 40960, 8.0").compute_modes == [
        "E. Process"]
    assert nvidia_smi_from_output(_table("Default"), "").compute_modes == ["Default"]
    assert nvidia_smi_from_output(HEADER, "0, A100, 40960, 8.0").compute_modes == []


def test_busy_or_unavailable_on_an_exclusive_process_gpu_names_one_gpu_per_rank() -> None:
    smi = {"header": _table("E. Process"), "rows": "0, NVIDIA A100-SXM4-40GB, 40960, 8.0"}
    ranks = {"LOCAL_RANK": "1", "SLURM_LOCALID": "1", "SLURM_NTASKS": "4"}
    f = _ids(_doc(LINUX, {"torch": "2.7.1"}, {"torch": _torch(first_use=BUSY)},
                  nvidia_smi=smi, env_vars=ranks))["gpu.devices-busy"]
    assert f.severity == "error" and "Exclusive_Process" in f.observed
    assert "LOCAL_RANK" in f.fix and "another rank" in f.title
    # Prohibited mode: no process may use it; the fix is the mode (or another GPU)
    smi_p = {"header": _table("Prohibited"), "rows": "0, NVIDIA A100-SXM4-40GB, 40960, 8.0"}
    f = _ids(_doc(LINUX, {"torch": "2.7.1"}, {"torch": _torch(first_use=BUSY)},
                  nvidia_smi=smi_p))["gpu.devices-busy"]
    assert "-c DEFAULT" in f.fix and "LOCAL_RANK" not in f.fix


def test_an_exclusive_process_gpu_that_works_is_silent() -> None:
    smi = {"header": _table("E. Process"), "rows": "0, NVIDIA A100-SXM4-40GB, 40960, 8.0"}
    ok = _doc(LINUX, {"torch": "2.7.1"}, {"torch": _torch()}, nvidia_smi=smi)
    assert "gpu.devices-busy" not in _ids(ok)
    other = _doc(LINUX, {"torch": "2.7.1"}, {"torch": _torch(
        first_use="RuntimeError: CUDA error: out of memory")}, nvidia_smi=smi)
    assert "gpu.devices-busy" not in _ids(other)


def test_winerror_206_in_an_install_names_the_path_limit() -> None:
    failed = {"status": "error", "stderr": "", "result": {
        "name": "torch", "status": "error", "error": "ModuleNotFoundError: No module named "
        "'torch' (pip stopped with OSError: [WinError 206] The filename or extension is too "
        "long: 'C:\\\\a\\\\torch-2.13.0.dist-info\\\\licenses\\\\third_party')"}}
    host = {**WIN, "python_prefix": "C:\\actions-runner\\_work\\_temp\\conda_environment_1"}
    f = _ids(_doc(host, {}, {"torch": failed}))["windows.path-too-long"]
    assert f.severity == "error" and "LongPathsEnabled" in f.fix and "short" in f.fix
    other = {"status": "error", "stderr": "", "result": {
        "name": "torch", "status": "error", "error": "OSError: [WinError 126] The specified "
        "module could not be found. Error loading c10.dll"}}
    assert "windows.path-too-long" not in _ids(_doc(WIN, {"torch": "2.5.1"}, {"torch": other}))


def test_torch_compile_without_triton_on_native_windows() -> None:
    smi = {"header": HEADER, "rows": "0, NVIDIA GeForce RTX 3080, 10240, 8.6"}
    doc = _doc(WIN, {"torch": "2.6.0+cu124"}, {"torch": _torch("2.6.0+cu124")}, nvidia_smi=smi)
    f = _ids(doc, infos=True)["torch.compile-no-triton-on-windows"]
    assert f.severity == "info" and "triton-windows" in f.fix and "WSL2" in f.fix
    # silent: triton-windows installed, a CPU build, no GPU seen, torch 1.x, Linux
    assert "torch.compile-no-triton-on-windows" not in _ids(
        _doc(WIN, {"torch": "2.6.0+cu124", "triton-windows": "3.2.0.post13"},
             {"torch": _torch("2.6.0+cu124")}, nvidia_smi=smi), infos=True)
    for torch in (_torch("2.6.0+cpu", cuda=False, gpu=False), _torch("2.6.0", gpu=False),
                  _torch("1.13.1+cu117")):
        assert "torch.compile-no-triton-on-windows" not in _ids(
            _doc(WIN, {"torch": torch["result"]["version"]}, {"torch": torch}, nvidia_smi=smi),
            infos=True)
    assert "torch.compile-no-triton-on-windows" not in _ids(
        _doc(LINUX, {"torch": "2.6.0+cu124"}, {"torch": _torch("2.6.0+cu124")}, nvidia_smi=smi),
        infos=True)


def _tf(version: str) -> dict:
    return {"status": "ok", "stderr": "", "result": {
        "name": "tensorflow", "status": "ok", "version": version,
        "physical_devices": [{"name": "/physical_device:CPU:0", "kind": "CPU",
                              "description": "CPU"}],
        "logical_devices": ["/device:CPU:0"], "build": {"is_cuda_build": False}, "extra": {}}}


def test_release_platform_bugs_need_the_release_and_the_platform() -> None:
    f = _ids(_doc(MAC, {"tensorflow": "2.13.0"}, {"tensorflow": _tf("2.13.0")}))[
        "tensorflow.legacy-optimizer-on-apple-silicon"]
    assert "2.13.0" in f.title and "2.14" in f.fix
    for version in ("2.12.0", "2.14.1"):
        assert "tensorflow.legacy-optimizer-on-apple-silicon" not in _ids(
            _doc(MAC, {"tensorflow": version}, {"tensorflow": _tf(version)}))
    linux = {**LINUX, "machine": "aarch64"}
    assert "tensorflow.legacy-optimizer-on-apple-silicon" not in _ids(
        _doc(linux, {"tensorflow": "2.13.0"}, {"tensorflow": _tf("2.13.0")}))
    mps = _torch("2.0.0", cuda=False, gpu=False)
    f = _ids(_doc(MAC, {"torch": "2.0.0"}, {"torch": mps}))["torch.compile-needs-openmp-on-macos"]
    assert "omp" in f.title and "libomp" in f.fix
    assert "torch.compile-needs-openmp-on-macos" not in _ids(
        _doc(MAC, {"torch": "2.5.1"}, {"torch": _torch("2.5.1", cuda=False, gpu=False)}))
    assert "torch.compile-needs-openmp-on-macos" not in _ids(
        _doc(LINUX, {"torch": "2.0.0"}, {"torch": _torch("2.0.0")}))


def test_jaxlib_s_last_intel_mac_release() -> None:
    intel = {**MAC, "machine": "x86_64", "proc_translated": None, "python_version": "3.12.9",
             "cpu_brand": "Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz"}
    found = [f for f in run_checks(snapshot_from_raw(_doc(intel, {})))
             if f.id == "platform.last-release" and "JAX" in f.title]
    assert found and "x86_64" in found[0].title and "'jax==0.4.38'" in found[0].fix
    silent = [f for f in run_checks(snapshot_from_raw(_doc(MAC, {})))
              if f.id == "platform.last-release"]
    assert silent == []


def test_an_older_nccl_wheel_names_the_torch_release_that_pins_it() -> None:
    failed = {"status": "error", "stderr": "", "result": {
        "name": "torch", "status": "error", "error": "ImportError: /usr/local/lib/python3.12/"
        "site-packages/torch/lib/libtorch_cuda.so: undefined symbol: ncclCommResume"}}
    dists = {"torch": "2.13.0", "nvidia-nccl-cu12": "2.21.5", "nvidia-nccl-cu13": "2.29.2"}
    f = _ids(_doc(LINUX, dists, {"torch": failed}))["torch.nccl-older-than-build"]
    assert "'torch==2.5.1'" in f.fix and "scientific-computing-examples" in f.source
    # an NCCL wheel no torch release is read to pin: the fix stays as it was
    dists["nvidia-nccl-cu12"] = "2.26.2"
    f = _ids(_doc(LINUX, dists, {"torch": failed}))["torch.nccl-older-than-build"]
    assert "torch==" not in f.fix
