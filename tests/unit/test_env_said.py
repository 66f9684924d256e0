"""The table of the frameworks' own diagnostic sentences (``[[framework_says]]``, issue 24
class 2): each row matches its sentence as the frameworks print it, quotes it, and stays
silent on what healthy machines print."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devicebench.env.checks import load_knowledge, run_checks
from devicebench.env.checks.said import check_framework_says, drop_said_covered
from devicebench.env.finding import Finding
from devicebench.env.interpret import snapshot_from_raw
from devicebench.env.snapshot import EnvSnapshot, FrameworkProbe, HostInfo

KB = load_knowledge()
ROWS = {r["id"]: r for r in KB["framework_says"]}

# One sample per row, in the frameworks' own wording (line breaks where they print them).
SAMPLES = {
    "cuda.system-not-ready": (
        "jax", "E cuda_driver.cc:152] failed call to cuInit: INTERNAL: CUDA error: Failed call "
               "to cuInit: CUDA_ERROR_SYSTEM_NOT_READY: system not yet initialized"),
    "torch.companion-cuda-variant": (
        "torch", "torchaudio: RuntimeError: Detected that PyTorch and TorchAudio were compiled "
                 "with different CUDA versions. PyTorch has CUDA version 11.8 whereas "
                 "TorchAudio has CUDA version 11.7. Please install the TorchAudio version "
                 "that matches your PyTorch version."),
    "jax.cuda-component-unloadable": (
        "jax", "RuntimeError: Unable to use CUDA because of the following issues with CUDA "
               "components:\nUnable to load cuSPARSE. Is it installed?"),
    "jax.jaxlib-missing": (
        "jax", "ModuleNotFoundError: jax requires jaxlib to be installed. See "
               "https://github.com/google/jax#installation for installation instructions."),
    "libstdcxx.too-old": (
        "torch", "ImportError: /lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.30' "
                 "not found (required by /home/u/envs/t/lib/python3.11/site-packages/torch/lib/"
                 "libtorch_python.so)"),
    "xformers.built-for-another-torch": (
        "torch", "WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was "
                 "built for:\n    PyTorch 2.0.1+cu118 with CUDA 1108 (you have 2.0.1+cu117)\n"
                 "    Python  3.10.11 (you have 3.10.11)\n  Please reinstall xformers"),
    "numpy.compiled-for-numpy1": (
        "torch", "\nA module that was compiled using NumPy 1.x cannot be run in\nNumPy 2.0.0 "
                 "as it may crash. To support both 1.x and 2.x\nversions of NumPy, ..."),
    "numpy.abi-import-failed": (
        "torch", "UserWarning: Failed to initialize NumPy: _ARRAY_API not found (Triggered "
                 "internally at ../torch/csrc/utils/tensor_numpy.cpp:84.)"),
    "numpy.built-for-newer-numpy": (
        "tensorflow", "ValueError: numpy.dtype size changed, may indicate binary "
                      "incompatibility. Expected 96 from C header, got 88 from PyObject"),
    "cudnn.torch-runtime-mismatch": (
        "torch", "RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against "
                 "(8, 9, 2) but found runtime version (8, 5, 0). PyTorch already comes "
                 "bundled with cuDNN."),
    "tf.cpu-lacks-instructions": (
        "tensorflow", "The TensorFlow library was compiled to use AVX instructions, but these "
                      "aren't available on your machine.\nAborted (core dumped)"),
    "openmp.duplicate-runtime": (
        "torch", "OMP: Error #15: Initializing libiomp5md.dll, but found libiomp5md.dll "
                 "already initialized.\nOMP: Hint This means that multiple copies ..."),
    "cuda.forward-compat-unsupported": (
        "torch", "UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount()."
                 " Did you run some cuda functions before calling NumCudaDevices() that might "
                 "have already set an error? Error 804: forward compatibility was attempted on"
                 " non supported HW"),
    "cuda.driver-module-mismatch": (
        "tensorflow", "E0000 cuda_driver.cc:282] failed call to cuInit: "
                      "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: system has unsupported display "
                      "driver / cuda driver combination"),
    "cuda.init-unknown-error": (
        "torch", "UserWarning: CUDA initialization: CUDA unknown error - this may be due to an "
                 "incorrectly set up environment, e.g. changing env variable "
                 "CUDA_VISIBLE_DEVICES after program start."),
    "cuda.torch-says-driver-too-old": (
        "torch", "UserWarning: CUDA initialization: The NVIDIA driver on your system is too "
                 "old (found version 11040)."),
    "jax.no-cuda-plugin": (
        "jax", "WARNING:2024-05-01 12:00:00,000:jax._src.xla_bridge:909: An NVIDIA GPU may be "
               "present on this machine, but a CUDA-enabled jaxlib is not installed. Falling "
               "back to cpu."),
    "jax.cuda-lib-older-than-built": (
        "jax", "Unable to initialize backend 'cuda': Found cuSOLVER version 11002, but JAX was "
               "built against version 11401, which is newer. The copy of cuSOLVER that is "
               "installed must be at least as new as the version against which JAX was built."),
    "windows.path-too-long": (  # round 21 (TensorRT#4288)
        "torch", "ERROR: Could not install packages due to an OSError: [WinError 206] The "
                 "filename or extension is too long: 'C:\\a\\torch-2.13.0.dist-info'"),
    "windows.path-too-long-likely": (  # round 22 step 0 (light-the-torch#176); a Windows row
        "torch", "ERROR: Could not install packages due to an OSError: [Errno 2] No such file "
                 "or directory: 'C:\\\\env\\\\Lib\\\\site-packages\\\\torch-2.13.0.dist-info"
                 "\\\\licenses\\\\third_party\\\\LICENSE'"),
    "bitsandbytes.no-library-for-cuda": (  # round 22 step 0 (bitsandbytes#934)
        "torch", "CUDA SETUP: Detected CUDA version 122\nCUDA SETUP: Required library version "
                 "not found: libbitsandbytes_cuda122_nocublaslt.so. Maybe you need to compile "
                 "it from source?"),
}

# What healthy machines print: no row may match it.
HEALTHY_SAID = (
    "I0000 00:00:1700000000.000000 cpu_feature_guard.cc:210] This TensorFlow binary is "
    "optimized to use available CPU instructions in performance-critical operations.\n"
    "To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild "
    "TensorFlow with the appropriate compiler flags.\n"
    "W0000 tensorflow/compiler/tf2tensorrt/utils/py_utils.cc:38] TF-TRT Warning: Could not "
    "find TensorRT\n"
    "E0000 cuda_dnn.cc:8310] Unable to register cuDNN factory: Attempting to register factory "
    "for plugin cuDNN when one has already been registered\n"
    "I0000 successful NUMA node read from SysFS had negative value (-1)\n"
    "UserWarning: A NumPy version >=1.22.4 and <2.3.0 is required for this version of SciPy\n"
)


def _snap(framework: str, stderr: str, dists: dict[str, str] | None = None,
          system: str = "Linux") -> EnvSnapshot:
    version = {"torch": "2.3.1+cu121", "tensorflow": "2.15.0", "jax": "0.4.28"}[framework]
    raw = {"host": {"system": system, "machine": "x86_64", "python_version": "3.11.9"},
           "distributions": {framework: version, "numpy": "2.0.0", **(dists or {})},
           "frameworks": {framework: {
               "status": "ok", "stderr": stderr,
               "result": {"name": framework, "status": "ok", "version": version,
                          "physical_devices": [{"name": "cpu", "kind": "CPU"}],
                          "build": {"cuda_version": "12.1"}}}}}
    return snapshot_from_raw(raw)


def _said(snap: EnvSnapshot) -> list[Finding]:
    return [f for f in run_checks(snap) if f.id in ROWS]


def test_every_row_has_a_sample_and_a_source() -> None:
    assert set(SAMPLES) == set(ROWS)
    for row in ROWS.values():
        assert row["source"].startswith("https://"), row["id"]
        assert row["severity"] in ("error", "warning")


@pytest.mark.parametrize("rid", sorted(SAMPLES))
def test_each_row_reads_its_sentence_and_quotes_it(rid: str) -> None:
    framework, text = SAMPLES[rid]
    system = ROWS[rid].get("os", "Linux")  # a row for one OS's messages is read there only
    found = {f.id: f for f in check_framework_says(_snap(framework, text, system=system), KB)}
    assert rid in found, found
    f = found[rid]
    assert "printed: \"" in f.observed and f.fix and "{" not in f.title + f.fix + f.why


def test_healthy_output_matches_no_row() -> None:
    for framework in ("tensorflow", "torch", "jax"):
        assert check_framework_says(_snap(framework, HEALTHY_SAID), KB) == []


def test_numpy_sentence_wrapped_over_lines_names_the_version_and_the_fix() -> None:
    found = _said(_snap("torch", SAMPLES["numpy.compiled-for-numpy1"][1]
                        + "\n" + SAMPLES["numpy.abi-import-failed"][1]))
    assert [f.id for f in found] == ["numpy.compiled-for-numpy1"]  # the consequence is folded
    assert "NumPy 2.0.0" in found[0].title and "numpy<2" in found[0].fix


def test_row_limited_to_one_framework_stays_silent_for_another() -> None:
    text = SAMPLES["cudnn.torch-runtime-mismatch"][1]
    assert [f.id for f in check_framework_says(_snap("torch", text), KB)] == [
        "cudnn.torch-runtime-mismatch"]
    assert check_framework_says(_snap("tensorflow", text), KB) == []


def test_jax_plugin_row_is_silent_when_the_plugin_is_installed() -> None:
    text = SAMPLES["jax.no-cuda-plugin"][1]
    assert check_framework_says(_snap("jax", text, {"jax-cuda12-plugin": "0.4.28"}), KB) == []
    found = check_framework_says(_snap("jax", text), KB)
    assert "jax[cuda12]" in found[0].fix


def test_a_quote_whose_cause_another_finding_names_is_dropped() -> None:
    said = check_framework_says(_snap("torch", SAMPLES["cuda.torch-says-driver-too-old"][1]),
                                KB)
    other = Finding("cuda.driver-too-old", "error", "driver too old", observed="", why="",
                    fix="update it")
    assert drop_said_covered(said) == said
    assert drop_said_covered([other, *said]) == [other]


def test_snapshot_saved_before_said_existed_falls_back_to_kept_lines() -> None:
    probe = FrameworkProbe(name="torch", status="ok", version="2.2.0",
                           messages=["OMP: Error #15: Initializing libiomp5md.dll, but found "
                                     "libiomp5md.dll already initialized."])
    snap = EnvSnapshot(host=HostInfo(os="Windows"), frameworks={"torch": probe})
    assert [f.id for f in check_framework_says(snap, KB)] == ["openmp.duplicate-runtime"]


def test_rocm_override_cause_names_the_variable_and_is_silent_once_set() -> None:
    path = Path(__file__).resolve().parent.parent / "fixtures/env_corpus/round8_cases.json"
    case = next(c for c in json.loads(path.read_text("utf-8"))["cases"]
                if c["url"].endswith("InvokeAI/issues/3967"))
    found = [f for f in run_checks(snapshot_from_raw(case["raw"]))
             if f.id == "rocm.gfx-not-in-build"]
    assert "HSA_OVERRIDE_GFX_VERSION" in found[0].why
    raw = dict(case["raw"], env_vars={"HSA_OVERRIDE_GFX_VERSION": "10.3.0"})
    assert "rocm.gfx-not-in-build" not in {f.id for f in run_checks(snapshot_from_raw(raw))}


def _round8(tail: str) -> dict:
    path = Path(__file__).resolve().parent.parent / "fixtures/env_corpus/round8_cases.json"
    return next(c for c in json.loads(path.read_text("utf-8"))["cases"]
                if c["url"].endswith(tail))["raw"]


def test_rdna4_on_a_rocm63_build_is_fixed_with_the_rocm64_wheels_not_an_override() -> None:
    raw = _round8("ComfyUI/issues/7400")
    found = [f for f in run_checks(snapshot_from_raw(raw)) if f.id == "rocm.gfx-not-in-build"]
    assert "whl/rocm6.4" in found[0].fix and "HSA_OVERRIDE_GFX_VERSION=" not in found[0].fix
    # silent case: a ROCm 6.4 build that still lacks the target gets no "newer wheels" fix
    raw = json.loads(json.dumps(raw))
    raw["frameworks"]["torch"]["result"]["build"]["hip_version"] = "6.4.43482"
    found = [f for f in run_checks(snapshot_from_raw(raw)) if f.id == "rocm.gfx-not-in-build"]
    assert found and "whl/rocm6.4" not in found[0].fix


# -- rules written against round9_dev (the tenth set's development half) --------------------

def _raw(system: str = "Linux", dists: dict[str, str] | None = None, **extra: object) -> dict:
    host = {"system": system, "machine": "x86_64" if system == "Linux" else "AMD64",
            "python_version": "3.11.9"}
    host.update(extra.pop("host", {}))
    return {"host": host, "distributions": dists or {}, "frameworks": {}, **extra}


def _ids(raw: dict) -> dict[str, Finding]:
    return {f.id: f for f in run_checks(snapshot_from_raw(raw))}


def test_error_804_in_a_container_is_fixed_on_the_host_driver_not_by_a_reboot() -> None:
    text = SAMPLES["cuda.forward-compat-unsupported"][1]
    bare = check_framework_says(_snap("torch", text), KB)[0]
    assert "reboot" in bare.fix
    snap = _snap("torch", text)
    snap.host.in_container = True
    inside = check_framework_says(snap, KB)[0]
    assert "host's NVIDIA driver to one for CUDA 12.1" in inside.fix and "reboot" not in inside.fix


def test_ipex_of_another_torch_minor_is_named_without_a_torch_index() -> None:
    found = _ids(_raw(dists={"torch": "2.7.1+cpu", "intel-extension-for-pytorch": "2.8.0"}))
    f = found["stack.release-skew"]
    assert "intel-extension-for-pytorch==2.7.*" in f.fix and "download.pytorch.org" not in f.fix
    # silent: the matching pair (an XPU release number keeps the torch minor)
    for ipex in ("2.7.0", "2.7.10+xpu"):
        raw = _raw(dists={"torch": "2.7.1+cpu", "intel-extension-for-pytorch": ipex})
        assert "stack.release-skew" not in _ids(raw)


def test_torchaudio_of_another_torch_release_is_named_with_the_torch_index() -> None:
    f = _ids(_raw(dists={"torch": "2.10.0+cu130", "torchaudio": "2.11.0+cu130"}))[
        "stack.release-skew"]
    # round 19: from 2.1 on the numbers are the same, patch included: the exact release
    assert "torchaudio==2.10.0'" in f.fix and "whl/cu130" in f.fix
    for torch, audio in (("2.10.0+cu130", "2.10.0+cu130"), ("1.13.1", "0.13.1"),
                         ("2.0.1", "2.0.2")):
        assert "stack.release-skew" not in _ids(_raw(dists={"torch": torch, "torchaudio": audio}))


def test_two_packages_bundling_intel_openmp_on_windows_warn_and_stay_silent_elsewhere() -> None:
    dists = {"torch": "2.2.1", "ctranslate2": "4.1.0"}
    f = _ids(_raw("Windows", dists))["runtime.bundled-twice"]
    assert f.severity == "warning" and "libiomp5md.dll" in f.title + f.fix
    assert "runtime.bundled-twice" not in _ids(_raw("Linux", dists))  # Linux wheels: libgomp
    assert "runtime.bundled-twice" not in _ids(_raw("Windows", {"torch": "2.2.1"}))


def test_rocm_under_wsl_outside_amds_distributions_is_named_and_ubuntu_stays_silent() -> None:
    kernel = "5.15.153.1-microsoft-standard-WSL2"
    rocminfo = ("WSL environment detected.\nCall returned HSA_STATUS_ERROR_OUT_OF_RESOURCES: "
                "The runtime failed to allocate the necessary resources.\n")
    raw = _raw(host={"os_release_name": "Oracle Linux Server 9.4", "kernel_release": kernel},
               rocminfo=rocminfo)
    f = _ids(raw)["rocm.wsl-distro-unsupported"]
    assert f.severity == "error" and "Ubuntu 22.04" in f.fix
    ubuntu = _raw(host={"os_release_name": "Ubuntu 22.04.4 LTS", "kernel_release": kernel},
                  rocminfo=rocminfo)
    assert "rocm.wsl-distro-unsupported" not in _ids(ubuntu)
    native = _raw(host={"os_release_name": "Oracle Linux Server 9.4",
                        "kernel_release": "5.14.0-427.el9.x86_64"}, rocminfo=rocminfo)
    assert "rocm.wsl-distro-unsupported" not in _ids(native)


def _torch_with(extra: dict) -> dict:
    raw = _raw(dists={"torch": "2.3.0", "flash-attn": "2.5.6", "torchvision": "0.17.2"})
    raw["frameworks"] = {"torch": {"status": "ok", "stderr": "", "result": {
        "name": "torch", "status": "ok", "version": "2.3.0+cu121",
        "physical_devices": [{"name": "cpu", "kind": "CPU"}],
        "build": {"cuda_version": "12.1"}, "extra": extra}}}
    return raw


def test_an_extension_built_for_another_torch_is_named_from_its_own_import_error() -> None:
    err = ("ImportError: /x/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so: undefined symbol: "
           "_ZN3c104cuda9SetDeviceEi")
    f = _ids(_torch_with({"extension_errors": {"flash_attn_2_cuda": err}}))["torch.extension-abi"]
    assert "flash-attn 2.5.6" in f.title and "--no-build-isolation flash-attn" in f.fix
    assert "_ZN3c104cuda9SetDeviceEi" in f.observed
    # silent: another import error (a missing dependency) is not an ABI mismatch
    missing = "ModuleNotFoundError: No module named 'einops'"
    other = {"extension_errors": {"flash_attn_2_cuda": missing}}
    assert "torch.extension-abi" not in _ids(_torch_with(other))
    # torchvision's own error is left to the release-pairing rule, which names both versions
    nms_error = "RuntimeError: operator torchvision::nms does not exist"
    nms = {"extension_errors": {"torchvision": nms_error}}
    found = _ids(_torch_with(nms))
    assert "stack.release-skew" in found and "torch.extension-abi" not in found


def test_torchs_swallowed_cudnn_error_is_read_by_the_message_table() -> None:
    err = ("RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (8, 7, 0) "
           "but found runtime version (8, 2, 4). PyTorch already comes bundled with cuDNN.")
    assert "cudnn.torch-runtime-mismatch" in _ids(_torch_with({"cudnn_error": err}))
    assert "cudnn.torch-runtime-mismatch" not in _ids(_torch_with({}))


def test_the_worker_imports_installed_extensions_and_keeps_their_errors(tmp_path, monkeypatch
                                                                        ) -> None:
    from devicebench.backends.extensions import import_extensions

    (tmp_path / "ext_broken.py").write_text("raise ImportError('x.so: undefined symbol: _Zfoo')\n")
    (tmp_path / "ext_exits.py").write_text("raise SystemExit(127)\n")
    (tmp_path / "ext_fine.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    extra: dict = {}
    pending: list = []
    import_extensions("torch", extra, lambda: pending.append(extra.get("extension_pending")),
                      modules=("ext_broken", "ext_exits", "ext_fine", "ext_not_installed"))
    assert extra == {
        "extension_errors": {"ext_broken": "ImportError: x.so: undefined symbol: _Zfoo",
                             "ext_exits": "SystemExit: 127"},
        "extensions_imported": ["ext_fine"]}
    # saved before each import, naming it, and once at the end (a crash leaves its name)
    assert pending == ["ext_broken", "ext_exits", "ext_fine", None]


def test_xformers_built_for_another_torch_names_both_and_is_silent_on_other_xformers_lines(
        ) -> None:
    found = _said(_snap("torch", SAMPLES["xformers.built-for-another-torch"][1]))
    assert [f.id for f in found] == ["xformers.built-for-another-torch"]
    assert "2.0.1+cu118" in found[0].title and "2.0.1+cu117" in found[0].title
    assert "download.pytorch.org/whl" in found[0].fix
    # what a healthy run or an unrelated xformers note prints: no row
    assert _said(_snap("torch", "A matching Triton is not available, some optimizations will "
                                "not be enabled. Error caught was: No module named 'triton'"
                                "\nxFormers not available")) == []
