"""The install-fit rules of issue 24's second corpus, each on a small raw snapshot: Windows
DLLs, CPU-only PyTorch wheels, cuDNN wheels shared between frameworks, NumPy 2 ABI,
LD_LIBRARY_PATH shadowing, jax-metal releases, WSL2's libcuda, GPU minimums, same-major
CUDA binary compatibility."""

from __future__ import annotations

from devicebench.env.checks import load_knowledge, run_checks
from devicebench.env.checks.installs import torch_cuda_index
from devicebench.env.checks.stack import runs_on
from devicebench.env.interpret import snapshot_from_raw
from devicebench.env.messages import reported_facts

LINUX = {"system": "Linux", "machine": "x86_64", "python_version": "3.11.9",
         "kernel_release": "6.5.0-41-generic", "python_prefix": "/v"}
WSL = dict(LINUX, kernel_release="5.15.153.1-microsoft-standard-WSL2")
WINDOWS = {"system": "Windows", "machine": "AMD64", "python_version": "3.11.9",
           "platform": "Windows-11-10.0.22631-SP0", "python_prefix": "C:\\v"}


def smi(driver: str, cuda: str, cc: str = "8.6") -> dict:
    return {"header": f"| NVIDIA-SMI {driver}    Driver Version: {driver}    CUDA Version: "
                      f"{cuda}     |", "rows": f"0, NVIDIA GeForce RTX 3060, 12288, {cc}"}


def torch_cpu(version: str) -> dict:
    return {"status": "ok", "stderr": "", "result": {
        "name": "torch", "status": "ok", "version": version,
        "physical_devices": [{"name": "cpu", "kind": "CPU", "description": "cpu"}],
        "logical_devices": ["cpu"], "build": {"is_cuda_build": False, "cuda_version": ""}}}


def ids(raw: dict) -> dict:
    return {f.id: f for f in run_checks(snapshot_from_raw(raw))}


def test_windows_dll_failure_is_parsed_and_named_per_release() -> None:
    err = ('OSError: [WinError 126] The specified module could not be found. Error loading '
           '"C:\\v\\Lib\\site-packages\\torch\\lib\\fbgemm.dll" or one of its dependencies.')
    assert reported_facts(err)["dll_load_failed"]["dll"] == "fbgemm.dll"
    raw = {"host": WINDOWS, "distributions": {"torch": "2.4.0+cu121"},
           "nvidia_smi": smi("555.99", "12.5"),
           "frameworks": {"torch": {"status": "ok", "result": {
               "name": "torch", "status": "error", "error": err}}}}
    f = ids(raw)["windows.dll-load-failed"]
    assert f.severity == "error" and "libomp140" in f.title
    assert "torch>=2.4.1" in f.fix and "whl/cu124" in f.fix
    # another release: the general cause (the Visual C++ runtime)
    raw["distributions"] = {"torch": "2.3.1+cu121"}
    assert "vc_redist" in ids(raw)["windows.dll-load-failed"].fix


def test_cpu_only_torch_is_answered_with_a_cuda_index_the_driver_runs() -> None:
    kb = load_knowledge()
    old = snapshot_from_raw({"host": WINDOWS, "nvidia_smi": smi("475.14", "11.4")})
    assert torch_cuda_index(old, kb, "2.4.1+cpu") == "cu118"  # CUDA 12 needs >= 527.41
    new = snapshot_from_raw({"host": LINUX, "nvidia_smi": smi("550.54.15", "12.4")})
    assert torch_cuda_index(new, kb, "2.5.1") == "cu124"
    assert torch_cuda_index(snapshot_from_raw({"host": LINUX}), kb, "2.5.1") == ""
    raw = {"host": WINDOWS, "distributions": {"torch": "2.4.1"},
           "nvidia_smi": smi("475.14", "11.4"), "frameworks": {"torch": torch_cpu("2.4.1+cpu")}}
    f = ids(raw)["gpu.not-seen"]
    assert "whl/cu118" in f.fix and '"torch==2.4.1"' in f.fix  # cmd.exe: double quotes


def test_a_cudnn_wheel_of_another_major_than_torch_pins() -> None:
    raw = {"host": LINUX, "distributions": {"torch": "2.1.1", "nvidia-cudnn-cu12": "9.5.1.17"}}
    f = ids(raw)["stack.dependency-range"]
    assert "torch 2.1.1" in f.title and f.fix.startswith("pip install 'torch>=2.4'")
    ok = {"host": LINUX, "distributions": {"torch": "2.5.1", "nvidia-cudnn-cu12": "9.1.0.70"}}
    assert "stack.dependency-range" not in ids(ok)


def test_numpy2_under_a_package_built_for_numpy1() -> None:
    raw = {"host": LINUX, "distributions": {"numpy": "2.0.0", "opencv-python": "4.9.0.80"}}
    f = ids(raw)["stack.dependency-range"]
    assert "opencv-python" in f.title and "numpy<2" in f.fix
    new = {"host": LINUX, "distributions": {"numpy": "2.0.0", "opencv-python": "4.10.0.84"}}
    assert "stack.dependency-range" not in ids(new)


def test_ld_library_path_copies_of_wheel_libraries_are_a_warning() -> None:
    raw = {"host": LINUX, "distributions": {"torch": "2.2.0"},
           "env_vars": {"LD_LIBRARY_PATH": "/usr/local/cuda/lib64:/opt/x"},
           "ld_path_listing": {"/usr/local/cuda/lib64": ["libcublas.so.12"]},
           "wheel_lib_listing": {"/v/lib/python3.11/site-packages/nvidia/cublas/lib":
                                 ["libcublas.so.12"]}}
    f = ids(raw)["cuda.ld-library-path-shadows-wheels"]
    assert f.severity == "warning" and f.fix.startswith("export LD_LIBRARY_PATH=/opt/x")
    raw["ld_path_listing"] = {"/usr/local/cuda/lib64": ["libcudart.so.12"]}  # no wheel copy
    assert "cuda.ld-library-path-shadows-wheels" not in ids(raw)


def test_jax_metal_outside_the_jax_releases_it_works_with() -> None:
    mac = {"system": "Darwin", "machine": "arm64", "mac_ver": "15.3", "proc_translated": "0",
           "cpu_brand": "Apple M1", "python_version": "3.12.8"}
    bad = ids({"host": mac, "distributions": {"jax": "0.5.2", "jaxlib": "0.5.1",
                                              "jax-metal": "0.1.1"}})
    assert "'jaxlib==0.5.0'" in bad["stack.release-skew"].fix
    good = ids({"host": mac, "distributions": {"jax": "0.5.0", "jaxlib": "0.5.0",
                                               "jax-metal": "0.1.1"}})
    assert "stack.release-skew" not in good


def test_wsl2_without_the_driver_libcuda_on_the_loader_path() -> None:
    said = ("I external/tsl/tsl/cuda/cudart_stub.cc:32] Could not find cuda drivers on your "
            "machine, GPU will not be used.\n")
    jax = {"status": "ok", "stderr": said, "result": {
        "name": "jax", "status": "ok", "version": "0.4.23",
        "physical_devices": [{"name": "cpu:0", "kind": "CPU", "description": "cpu"}]}}
    raw = {"host": WSL, "distributions": {"jax": "0.4.23"}, "frameworks": {"jax": jax}}
    f = ids(raw)["wsl.libcuda-not-on-path"]
    assert f.severity == "warning" and "/usr/lib/wsl/lib" in f.fix  # no nvidia-smi evidence
    raw["ldconfig"] = "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/wsl/lib/libcuda.so.1\n"
    assert "wsl.libcuda-not-on-path" not in ids(raw)
    quiet = dict(jax, stderr="")  # a WSL2 box without an NVIDIA GPU: nothing to say
    assert "wsl.libcuda-not-on-path" not in ids({"host": WSL, "frameworks": {"jax": quiet}})


def test_a_gpu_older_than_jax_supports() -> None:
    raw = {"host": LINUX, "distributions": {"jax": "0.4.10", "jaxlib": "0.4.10+cuda11.cudnn86"},
           "nvidia_smi": smi("470.182.03", "11.4", "3.7")}
    f = ids(raw)["gpu.below-framework-minimum"]
    assert "3.7" in f.title and "5.2" in f.observed
    assert "gpu.below-framework-minimum" not in ids(dict(raw, nvidia_smi=smi("550.1", "12.4")))
    cpu_only = dict(raw, distributions={"jax": "0.4.10", "jaxlib": "0.4.10"})
    assert "gpu.below-framework-minimum" not in ids(cpu_only)


def test_cuda_binaries_run_on_the_same_major_and_a_higher_minor() -> None:
    assert runs_on("sm_60", "6.1") and runs_on("sm_80", "8.6") and runs_on("sm_120", "12.0")
    assert not runs_on("sm_86", "8.0") and not runs_on("sm_90", "12.0")
    assert not runs_on("compute_90", "9.0")
