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


def _snap(framework: str, stderr: str, dists: dict[str, str] | None = None) -> EnvSnapshot:
    version = {"torch": "2.3.1+cu121", "tensorflow": "2.15.0", "jax": "0.4.28"}[framework]
    raw = {"host": {"system": "Linux", "machine": "x86_64", "python_version": "3.11.9"},
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
    found = {f.id: f for f in check_framework_says(_snap(framework, text), KB)}
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
