"""Doctor's checks against fixture snapshots and small constructed snapshots."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import devicebench.env.checks as checks_pkg
from devicebench.env.checks import load_knowledge, run_checks
from devicebench.env.checks._util import at_least, major_minor, matches, shorten
from devicebench.env.finding import SEVERITIES, Finding
from devicebench.env.interpret import RawHost, host_from_raw
from devicebench.env.snapshot import (
    BlasInfo,
    DeviceInfo,
    EnvSnapshot,
    FrameworkProbe,
    HostInfo,
    NvidiaGpu,
    NvidiaSmi,
    load_snapshot,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "snapshots"

CPU = DeviceInfo(name="/physical_device:CPU:0", kind="CPU", description="cpu")
METAL = DeviceInfo(name="/physical_device:GPU:0", kind="GPU", description="METAL")
CUDA0 = DeviceInfo(name="/physical_device:GPU:0", kind="GPU", description="NVIDIA A100")


# -- helpers ------------------------------------------------------------------------------
def fixture(name: str) -> list[Finding]:
    return run_checks(load_snapshot(FIXTURES / name))


def pairs(findings: list[Finding]) -> set[tuple[str, str]]:
    return {(f.id, f.severity) for f in findings}


def ids(findings: list[Finding]) -> list[str]:
    return [f.id for f in findings]


def only(findings: list[Finding], fid: str) -> Finding:
    found = [f for f in findings if f.id == fid]
    assert len(found) == 1, f"expected one {fid}, got {ids(findings)}"
    return found[0]


def probe(name: str, version: str, devices=(CPU,), status: str = "ok", **kw) -> FrameworkProbe:
    return FrameworkProbe(
        name=name, version=version, status=status, physical_devices=list(devices), **kw
    )


def linux(
    dists=None, env=None, frameworks=None, smi=None, blas=None, python="3.11.9", arch="x86_64"
) -> EnvSnapshot:
    return EnvSnapshot(
        host=HostInfo(os="Linux", machine=arch, python_arch=arch, python_version=python),
        distributions=dict(dists or {}),
        env_vars=dict(env or {}),
        frameworks=dict(frameworks or {}),
        nvidia_smi=smi,
        blas=blas or BlasInfo(),
    )


def mac(
    dists=None, env=None, frameworks=None, python="3.11.9", macos="14.6", **raw
) -> EnvSnapshot:
    """An Apple Silicon snapshot whose host is what the probe makes of these raw inputs."""
    fields = dict(
        system="Darwin",
        machine="arm64",
        mac_ver=macos,
        proc_translated="0",
        cpu_brand="Apple M1 Max",
        python_version=python,
    )
    fields.update(raw)
    return EnvSnapshot(
        host=host_from_raw(RawHost(**fields)),
        distributions=dict(dists or {}),
        env_vars=dict(env or {}),
        frameworks=dict(frameworks or {}),
    )


def smi(driver: str = "550.54.15", cuda: str = "12.4", error: str = "") -> NvidiaSmi:
    gpus = [] if error else [NvidiaGpu(index=0, name="NVIDIA A100", compute_capability="8.0")]
    return NvidiaSmi(driver_version=driver, cuda_version=cuda, gpus=gpus, error=error)


# -- fixtures: the situations in the issue --------------------------------------------------
FIXTURE_EXPECTED = {
    "m1_tf218_metal110.json": {
        ("metal.symbol-not-found", "error"),
        ("framework.import-failed", "error"),
        ("keras.jax-missing", "info"),
        ("keras.torch-missing", "info"),
    },
    "m2_tf219_metal120.json": {
        ("keras.xla-off-apple-gpu", "info"),
        ("gpu.not-seen", "info"),  # JAX on the CPU without jax-metal: worth knowing only
    },
    "rosetta_intel_python.json": {
        ("env.rosetta", "error"),
        ("framework.import-failed", "error"),
        ("keras.jax-missing", "info"),
        ("keras.torch-missing", "info"),
    },
    "linux_nvidia_tf_cpu_only.json": {
        ("gpu.not-seen", "warning"),
        ("tf.onednn", "info"),
        ("keras.jax-missing", "info"),
        ("keras.torch-missing", "info"),
    },
    "linux_driver_older_than_cuda.json": {
        ("cuda.driver-too-old", "error"),
        ("gpu.not-seen", "warning"),
        ("tf.onednn", "info"),
        ("keras.jax-missing", "info"),
    },
}


@pytest.mark.parametrize("name", sorted(FIXTURE_EXPECTED))
def test_fixture_finding_ids_and_severities(name: str) -> None:
    findings = fixture(name)
    assert pairs(findings) == FIXTURE_EXPECTED[name]
    order = [SEVERITIES.index(f.severity) for f in findings]
    assert order == sorted(order), "errors first, then warnings, then info"
    for f in findings:
        assert f.observed and f.why, f.id


def test_fixture_files_are_all_covered() -> None:
    covered = set(FIXTURE_EXPECTED) | {"h200_jax_torch_cuda13.json"}  # recorded on the H200
    assert {p.name for p in FIXTURES.glob("*.json")} == covered


def test_m1_tf218_metal110_names_the_pair_and_the_symbol() -> None:
    findings = fixture("m1_tf218_metal110.json")
    bad = only(findings, "metal.symbol-not-found")
    assert "2.18.0" in bad.observed and "1.1.0" in bad.observed
    assert "tensorflow-metal==1.2.0" in bad.fix and "81987" in bad.source
    crash = only(findings, "framework.import-failed")
    assert "crashed" in crash.observed and "Symbol not found" in crash.observed
    assert "metal.symbol-not-found" in crash.related
    assert "tensorflow-metal==1.2.0" in crash.fix


def test_m2_healthy_has_no_errors_or_warnings() -> None:
    findings = fixture("m2_tf219_metal120.json")
    assert [f for f in findings if f.severity in ("error", "warning")] == []
    xla = only(findings, "keras.xla-off-apple-gpu")
    assert "2.19.0" in xla.observed and "METAL" in xla.observed and "3.9.2" in xla.observed
    assert "JAX" in only(findings, "gpu.not-seen").observed


def test_rosetta_fixture() -> None:
    findings = fixture("rosetta_intel_python.json")
    assert findings[0].id == "env.rosetta"
    ros = findings[0]
    assert "x86_64" in ros.observed and "3.11.7" in ros.observed and "M2 Pro" in ros.observed
    assert "arch -arm64" in ros.fix
    crash = only(findings, "framework.import-failed")
    assert "env.rosetta" in crash.related and "2.16.2" in crash.observed


def test_linux_tf_cpu_only_fixture() -> None:
    gpu = only(fixture("linux_nvidia_tf_cpu_only.json"), "gpu.not-seen")
    assert "RTX 3090" in gpu.observed and "2.19.0" in gpu.observed
    assert "tensorflow-cpu" in gpu.why
    assert "tensorflow[and-cuda]==2.19.0" in gpu.fix and "pip uninstall" in gpu.fix


def test_linux_driver_older_than_cuda_fixture() -> None:
    findings = fixture("linux_driver_older_than_cuda.json")
    too_old = [f for f in findings if f.id == "cuda.driver-too-old"]
    assert len(too_old) == 2
    tf, torch = sorted(too_old, key=lambda f: f.observed)
    assert "PyTorch" in tf.observed or "PyTorch" in torch.observed
    for f in too_old:
        assert "470.82.01" in f.observed and "11.4" in f.observed
        assert "525.60.13" in f.fix
    assert any("12.5.1" in f.observed for f in too_old)
    assert any("12.4" in f.observed and "PyTorch" in f.observed for f in too_old)
    not_seen = [f for f in findings if f.id == "gpu.not-seen"]
    assert len(not_seen) == 2
    assert all("cuda.driver-too-old" in f.related for f in not_seen)


# -- version helpers ------------------------------------------------------------------------
def test_versions_compare_with_packaging() -> None:
    assert matches("2.19.3", ">=2.18,<2.20") and not matches("2.20.0", ">=2.18,<2.20")
    assert not matches("2.20.0rc0", "<2.20")  # a pre-release of the excluded version
    assert matches("2.11.0+cu130", ">=2.1") and not matches("", ">=1") and not matches("x", "")
    assert at_least("2.16.0rc0", "2.16") and not at_least("2.15.1", "2.16")
    assert at_least("580.159.04", "580") and not at_least("470.82.01", "525.60.13")
    assert major_minor("12") == (12, 0) and major_minor("dev") == ()


def test_shorten_keeps_the_exception_line() -> None:
    tb = "Traceback (most recent call last):\n" + "  frame\n" * 200 + "ValueError: boom"
    assert shorten(tb) == "ValueError: boom"
    assert shorten("x" * 1000).startswith("…") and len(shorten("x" * 1000)) == 601


# -- tensorflow-metal --------------------------------------------------------------------
def test_metal_120_with_tf_220_is_an_error() -> None:
    f = only(
        run_checks(mac({"tensorflow": "2.20.0", "tensorflow-metal": "1.2.0"})), "metal.tf-too-new"
    )
    assert f.severity == "error"
    assert "2.20.0" in f.observed and "1.2.0" in f.observed
    assert "<2.20" in f.fix and "126380" in f.source


def test_metal_120_with_tf_219_is_fine() -> None:
    findings = run_checks(mac({"tensorflow": "2.19.0", "tensorflow-metal": "1.2.0"}))
    assert not [f for f in findings if f.id.startswith("metal.")]


def test_metal_120_on_python_313_has_no_wheel() -> None:
    snap = mac({"tensorflow": "2.19.0", "tensorflow-metal": "1.2.0"}, python="3.13.1")
    f = only(run_checks(snap), "metal.python-unsupported")
    assert f.severity == "error" and "3.13" in f.observed and "1.2.0" in f.observed
    assert "python3.12 -m venv" in f.fix


def test_metal_120_on_python_312_is_fine() -> None:
    snap = mac({"tensorflow": "2.19.0", "tensorflow-metal": "1.2.0"}, python="3.12.8")
    assert "metal.python-unsupported" not in ids(run_checks(snap))


def test_metal_110_on_python_312_has_no_wheel() -> None:
    snap = mac({"tensorflow": "2.17.0", "tensorflow-metal": "1.1.0"}, python="3.12.1")
    assert "3.12" in only(run_checks(snap), "metal.python-unsupported").observed


def test_metal_110_with_tf_217_on_py311_is_fine() -> None:
    findings = run_checks(mac({"tensorflow": "2.17.0", "tensorflow-metal": "1.1.0"}))
    assert not [f for f in findings if f.id.startswith("metal.")]


def test_metal_110_with_tf_219_is_a_version_mismatch_error() -> None:
    findings = run_checks(mac({"tensorflow": "2.19.0", "tensorflow-metal": "1.1.0"}))
    assert "metal.symbol-not-found" in ids(findings)  # 1.1.0 fails on every TF >= 2.18
    assert "metal.version-mismatch" not in ids(findings)  # the specific report wins


def test_metal_older_than_tf_is_mismatch_error_and_newer_is_warning() -> None:
    newer_tf = only(
        run_checks(mac({"tensorflow": "2.15.0", "tensorflow-metal": "1.0.0"})),
        "metal.version-mismatch",
    )
    assert newer_tf.severity == "error" and "2.15.0" in newer_tf.observed
    assert "1.0.0" in newer_tf.observed
    older_tf = only(
        run_checks(mac({"tensorflow": "2.13.1", "tensorflow-metal": "1.1.0"})),
        "metal.version-mismatch",
    )
    assert older_tf.severity == "warning" and "2.13.1" in older_tf.observed


def test_metal_needs_macos_12() -> None:
    snap = mac({"tensorflow": "2.19.0", "tensorflow-metal": "1.2.0"}, macos="11.7.10")
    f = only(run_checks(snap), "metal.macos-too-old")
    assert f.severity == "error" and "11.7.10" in f.observed


def test_tensorflow_macos_shim_is_a_warning_not_a_conflict() -> None:
    findings = run_checks(mac({"tensorflow": "2.16.2", "tensorflow-macos": "2.16.2"}))
    f = only(findings, "metal.tensorflow-macos")
    assert f.severity == "warning" and "2.16.2" in f.observed
    assert "pip uninstall -y tensorflow-macos tensorflow" in f.fix and "tensorflow-metal" in f.fix
    assert "tf.multiple-distributions" not in ids(findings)


def test_tensorflow_macos_with_other_tensorflow_version_conflicts() -> None:
    findings = run_checks(mac({"tensorflow": "2.15.0", "tensorflow-macos": "2.12.0"}))
    f = only(findings, "tf.multiple-distributions")
    assert f.severity == "error" and "2.12.0" in f.observed and "2.15.0" in f.observed


# -- Rosetta, several TF distributions ------------------------------------------------------
def test_rosetta_only_when_translated() -> None:
    assert "env.rosetta" not in ids(run_checks(mac({"tensorflow": "2.19.0"})))
    # What an x86_64 Python under Rosetta reads: machine x86_64, proc_translated 1.
    translated = mac({"tensorflow": "2.19.0"}, machine="x86_64", proc_translated="1")
    assert translated.host.rosetta and translated.host.machine == "arm64"
    assert only(run_checks(translated), "env.rosetta").severity == "error"
    # An Intel Mac: no proc_translated oid (sysctl fails), machine x86_64: not Rosetta.
    intel = mac({"tensorflow": "2.19.0"}, machine="x86_64", proc_translated=None)
    assert not intel.host.rosetta and "env.rosetta" not in ids(run_checks(intel))


def test_tensorflow_and_tensorflow_cpu_of_different_versions() -> None:
    snap = linux({"tensorflow": "2.19.0", "tensorflow-cpu": "2.18.0"})
    f = only(run_checks(snap), "tf.multiple-distributions")
    assert f.severity == "error"
    assert "2.19.0" in f.observed and "2.18.0" in f.observed
    assert f.fix.startswith("pip uninstall -y tensorflow tensorflow-cpu && pip install")


def test_tensorflow_and_tensorflow_cpu_of_same_version_is_a_warning() -> None:
    f = only(
        run_checks(linux({"tensorflow": "2.19.0", "tensorflow-cpu": "2.19.0"})),
        "tf.multiple-distributions",
    )
    assert f.severity == "warning"


def test_tensorflow_intel_metapackage_of_same_version_is_fine() -> None:
    snap = linux({"tensorflow": "2.15.0", "tensorflow-intel": "2.15.0"})
    assert "tf.multiple-distributions" not in ids(run_checks(snap))


# -- Keras 2 / Keras 3 -------------------------------------------------------------------
@pytest.mark.parametrize("value", ["1", "true", "True"])
def test_legacy_keras_without_tf_keras_is_an_error(value: str) -> None:
    snap = linux({"tensorflow": "2.19.0", "keras": "3.9.2"}, env={"TF_USE_LEGACY_KERAS": value})
    f = only(run_checks(snap), "keras.legacy-without-tf-keras")
    assert f.severity == "error"
    assert value in f.observed and "2.19.0" in f.observed
    assert "tf-keras~=2.19.0" in f.fix


def test_legacy_keras_with_tf_keras_is_fine() -> None:
    snap = linux({"tensorflow": "2.19.0", "tf-keras": "2.19.0"}, env={"TF_USE_LEGACY_KERAS": "1"})
    assert not [f for f in run_checks(snap) if f.id.startswith("keras.") and "tf-keras" in f.id]
    assert "keras.legacy-without-tf-keras" not in ids(run_checks(snap))


def test_legacy_keras_value_tf_ignores_is_not_an_error() -> None:
    snap = linux({"tensorflow": "2.19.0"}, env={"TF_USE_LEGACY_KERAS": "yes"})
    assert "keras.legacy-without-tf-keras" not in ids(run_checks(snap))


def test_legacy_keras_is_ignored_before_tf_216() -> None:
    snap = linux({"tensorflow": "2.15.1"}, env={"TF_USE_LEGACY_KERAS": "1"})
    assert "keras.legacy-without-tf-keras" not in ids(run_checks(snap))


def test_tf_keras_installed_but_unused_is_info() -> None:
    snap = linux({"tensorflow": "2.19.0", "tf-keras": "2.19.0", "keras": "3.9.2"})
    f = only(run_checks(snap), "keras.tf-keras-unused")
    assert f.severity == "info" and "2.19.0" in f.observed and "unset" in f.observed
    assert "TF_USE_LEGACY_KERAS=1" in f.fix


def test_tf_keras_with_misspelt_switch_is_a_warning() -> None:
    snap = linux({"tensorflow": "2.19.0", "tf-keras": "2.19.0"}, env={"TF_USE_LEGACY_KERAS": "yes"})
    f = only(run_checks(snap), "keras.tf-keras-unused")
    assert f.severity == "warning" and "'yes'" in f.observed


def test_tf_keras_version_mismatch_when_in_use() -> None:
    snap = linux({"tensorflow": "2.19.0", "tf-keras": "2.17.0"}, env={"TF_USE_LEGACY_KERAS": "1"})
    f = only(run_checks(snap), "keras.tf-keras-version-mismatch")
    assert f.severity == "warning" and "2.17.0" in f.observed and "2.19.0" in f.observed


# -- GPUs that frameworks do not see ----------------------------------------------------
@pytest.mark.parametrize("value", ["", "-1"])
def test_cuda_visible_devices_hides_the_gpu(value: str) -> None:
    tf = probe("tensorflow", "2.19.0", build={"is_cuda_build": True, "cuda_version": "12.5.1"})
    snap = linux(
        {"tensorflow": "2.19.0"},
        env={"CUDA_VISIBLE_DEVICES": value},
        frameworks={"tensorflow": tf},
        smi=smi("560.35.03", "12.6"),
    )
    f = only(run_checks(snap), "gpu.not-seen")
    assert f.severity == "warning" and "CUDA_VISIBLE_DEVICES" in f.why
    assert f.fix == "unset CUDA_VISIBLE_DEVICES" and "NVIDIA A100" in f.observed


def test_gpu_seen_means_no_finding() -> None:
    tf = probe(
        "tensorflow",
        "2.19.0",
        devices=(CPU, CUDA0),
        build={"is_cuda_build": True, "cuda_version": "12.5.1"},
    )
    snap = linux(
        {"tensorflow": "2.19.0"}, frameworks={"tensorflow": tf}, smi=smi("560.35.03", "12.6")
    )
    assert "gpu.not-seen" not in ids(run_checks(snap))
    assert "cuda.driver-too-old" not in ids(run_checks(snap))


def test_no_gpu_hardware_means_no_gpu_finding() -> None:
    snap = linux({"tensorflow": "2.19.0"}, frameworks={"tensorflow": probe("tensorflow", "2.19.0")})
    assert "gpu.not-seen" not in ids(run_checks(snap))


def test_cpu_only_torch_and_jax_on_nvidia() -> None:
    snap = linux(
        {"torch": "2.6.0", "jax": "0.5.3", "jaxlib": "0.5.3"},
        frameworks={
            "torch": probe(
                "torch",
                "2.6.0+cpu",
                devices=(DeviceInfo(name="cpu", kind="CPU"),),
                build={"cuda_version": None},
            ),
            "jax": probe("jax", "0.5.3", devices=(DeviceInfo(name="TFRT_CPU_0", kind="CPU"),)),
        },
        smi=smi(),
    )
    found = [f for f in run_checks(snap) if f.id == "gpu.not-seen"]
    assert len(found) == 2
    torch_f = next(f for f in found if "PyTorch" in f.observed)
    jax_f = next(f for f in found if "JAX" in f.observed)
    assert "2.6.0+cpu" in torch_f.observed and "CPU-only" in torch_f.why
    assert "jax[cuda12]" in jax_f.fix


@pytest.mark.parametrize(
    ("tf_v", "python", "expected_fix"),
    [
        ("2.19.0", "3.11.9", "pip install tensorflow-metal==1.2.0"),
        ("2.17.0", "3.11.9", "pip install tensorflow-metal==1.1.0"),
        ("2.19.0", "3.13.1", "python3.12 -m venv"),
    ],
)
def test_mac_tf_without_metal_plugin(tf_v: str, python: str, expected_fix: str) -> None:
    snap = mac(
        {"tensorflow": tf_v}, python=python, frameworks={"tensorflow": probe("tensorflow", tf_v)}
    )
    f = only(run_checks(snap), "gpu.not-seen")
    assert f.severity == "warning" and "not installed" in f.why
    assert expected_fix in f.fix and tf_v in f.observed


def test_mac_torch_without_mps() -> None:
    snap = mac({"torch": "2.4.1"}, frameworks={"torch": probe("torch", "2.4.1")}, macos="12.1")
    f = only(run_checks(snap), "gpu.not-seen")
    assert f.severity == "warning" and "12.3" in f.why


@pytest.mark.parametrize(("torch_v", "macos", "needs", "older"), [
    ("2.6.0", "12.7.6", "13.0", "torch<2.5"),   # pytorch#139425: 2.5+ needs macOS 13
    ("2.10.0.dev20251008", "13.7.4", "14.0", "torch<2.10"),  # pytorch#164943
])
def test_mps_macos_minimum_is_per_torch_release(torch_v: str, macos: str, needs: str,
                                                older: str) -> None:
    snap = mac({"torch": torch_v}, frameworks={"torch": probe("torch", torch_v)}, macos=macos)
    f = only(run_checks(snap), "gpu.not-seen")
    assert f"needs macOS {needs}+ (this is macOS {macos})" in f.why and older in f.fix
    ok = mac({"torch": torch_v}, frameworks={"torch": probe("torch", torch_v)}, macos="15.1")
    assert "needs macOS" not in only(run_checks(ok), "gpu.not-seen").why


# -- CUDA build vs driver -------------------------------------------------------------------
def _cuda_snap(build: str, driver: str, cuda: str, name: str = "tensorflow") -> EnvSnapshot:
    p = probe(name, "2.19.0", devices=(CPU, CUDA0), build={"cuda_version": build})
    return linux({name: "2.19.0"}, frameworks={name: p}, smi=smi(driver, cuda))


def test_newer_cuda_minor_than_driver_is_a_warning() -> None:
    f = only(run_checks(_cuda_snap("12.5.1", "535.104.05", "12.2")), "cuda.minor-version-compat")
    assert f.severity == "warning" and "12.5.1" in f.observed and "12.2" in f.observed


def test_cuda_within_driver_support_is_fine() -> None:
    for build, driver, cuda in [("12.2", "535.104.05", "12.2"), ("12.5", "560.35.03", "12.6")]:
        found = ids(run_checks(_cuda_snap(build, driver, cuda)))
        assert "cuda.driver-too-old" not in found and "cuda.minor-version-compat" not in found


def test_newer_cuda_major_than_driver_is_an_error() -> None:
    f = only(run_checks(_cuda_snap("13.0", "550.54.15", "12.4", "torch")), "cuda.driver-too-old")
    assert f.severity == "error" and "13.0" in f.observed and "550.54.15" in f.observed
    assert ">= 580" in f.fix


def test_driver_below_family_minimum_is_an_error() -> None:
    f = only(run_checks(_cuda_snap("11.8", "450.51.06", "11.0")), "cuda.driver-too-old")
    assert "450.80.02" in f.observed


def test_nvidia_smi_failure_is_reported() -> None:
    err = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    f = only(run_checks(linux(smi=smi(error=err))), "nvidia.smi-failed")
    assert f.severity == "warning" and "couldn't communicate" in f.observed


# -- numpy BLAS -----------------------------------------------------------------------------
def test_unknown_blas_is_not_reported_missing() -> None:
    # numpy < 1.26 cannot say (the probe records ""): unknown, not "no BLAS" (issue 24, #12).
    snap = linux({"numpy": "1.24.4"}, blas=BlasInfo(name="", numpy_version="1.24.4"))
    assert "numpy.blas-unoptimised" not in ids(run_checks(snap))


@pytest.mark.parametrize("name", ["unknown", "none", "blas", "cblas"])
def test_unoptimised_blas_is_a_warning(name: str) -> None:
    snap = linux({"numpy": "2.1.3"}, blas=BlasInfo(name=name, numpy_version="2.1.3"))
    f = only(run_checks(snap), "numpy.blas-unoptimised")
    assert f.severity == "warning" and "2.1.3" in f.observed


@pytest.mark.parametrize(
    "name", ["scipy-openblas", "openblas64", "mkl", "accelerate", "blis", "flexiblas"]
)
def test_optimised_blas_is_fine(name: str) -> None:
    snap = linux({"numpy": "2.1.3"}, blas=BlasInfo(name=name, numpy_version="2.1.3"))
    assert "numpy.blas-unoptimised" not in ids(run_checks(snap))


def test_blas_not_checked_without_numpy() -> None:
    assert "numpy.blas-unoptimised" not in ids(run_checks(linux()))


# -- backends, oneDNN, XLA on Apple ------------------------------------------------------
def test_missing_jax_and_torch_are_info() -> None:
    findings = run_checks(linux({"tensorflow": "2.19.0", "keras": "3.9.2"}))
    assert only(findings, "keras.jax-missing").severity == "info"
    assert "pip install jax" in only(findings, "keras.jax-missing").fix
    assert "pip install torch" in only(findings, "keras.torch-missing").fix
    full = run_checks(linux({"tensorflow": "2.19.0", "jax": "0.5.3", "torch": "2.6.0"}))
    assert not {"keras.jax-missing", "keras.torch-missing"} & set(ids(full))


def test_other_backends_need_keras_3() -> None:
    f = only(run_checks(linux({"tensorflow": "2.15.0", "keras": "2.15.0"})), "keras.jax-missing")
    assert "keras>=3" in f.fix


def test_onednn_default_on_linux_x86() -> None:
    f = only(run_checks(linux({"tensorflow": "2.19.0"})), "tf.onednn")
    assert f.severity == "info" and "unset" in f.observed and "2.19.0" in f.observed
    assert "TF_ENABLE_ONEDNN_OPTS=0" in f.fix and " on" in f.title


def test_onednn_turned_off() -> None:
    snap = linux({"tensorflow": "2.19.0"}, env={"TF_ENABLE_ONEDNN_OPTS": "0"})
    f = only(run_checks(snap), "tf.onednn")
    assert "off" in f.title and "TF_ENABLE_ONEDNN_OPTS=0" in f.observed
    assert "TF_ENABLE_ONEDNN_OPTS=1" in f.fix


def test_onednn_off_by_default_before_tf_29_and_absent_off_x86() -> None:
    assert "off" in only(run_checks(linux({"tensorflow": "2.8.0"})), "tf.onednn").title
    assert "tf.onednn" not in ids(run_checks(linux({"tensorflow": "2.19.0"}, arch="aarch64")))
    assert "tf.onednn" not in ids(run_checks(mac({"tensorflow": "2.19.0"})))


def test_xla_info_only_when_tf_sees_the_apple_gpu() -> None:
    seen = mac(
        {"tensorflow": "2.19.0", "tensorflow-metal": "1.2.0"},
        frameworks={"tensorflow": probe("tensorflow", "2.19.0", devices=(CPU, METAL))},
    )
    assert only(run_checks(seen), "keras.xla-off-apple-gpu").severity == "info"
    unseen = mac(
        {"tensorflow": "2.19.0", "tensorflow-metal": "1.2.0"},
        frameworks={"tensorflow": probe("tensorflow", "2.19.0")},
    )
    assert "keras.xla-off-apple-gpu" not in ids(run_checks(unseen))
    unprobed = mac({"tensorflow": "2.19.0", "tensorflow-metal": "1.2.0"})
    assert "keras.xla-off-apple-gpu" in ids(run_checks(unprobed))


# -- import failures, nothing installed -------------------------------------------------
@pytest.mark.parametrize(
    ("status", "error", "fix_part"),
    [
        ("error", "ImportError: libcudnn.so.9: cannot open shared object file", "and-cuda"),
        ("timeout", "", "python -c 'import tensorflow'"),
        ("error", "ImportError: numpy.core.multiarray failed to import", "numpy<2"),
    ],
)
def test_probe_failure_carries_error_and_hint(status: str, error: str, fix_part: str) -> None:
    tf = probe("tensorflow", "2.19.0", status=status, error=error)
    f = only(
        run_checks(linux({"tensorflow": "2.19.0"}, frameworks={"tensorflow": tf})),
        "framework.import-failed",
    )
    assert f.severity == "error" and status in f.observed and "2.19.0" in f.observed
    assert error in f.observed and fix_part in f.fix


@pytest.mark.parametrize("status", ["ok", "skipped"])
def test_probe_ok_or_skipped_is_not_a_failure(status: str) -> None:
    tf = probe("tensorflow", "2.19.0", status=status)
    snap = linux({"tensorflow": "2.19.0"}, frameworks={"tensorflow": tf})
    assert "framework.import-failed" not in ids(run_checks(snap))


def test_no_framework_installed() -> None:
    f = only(run_checks(linux({"numpy": "2.1.3"})), "frameworks.none")
    assert f.severity == "warning" and "devicebench[tensorflow]" in f.fix
    mac_fix = only(run_checks(mac()), "frameworks.none").fix  # the pair, for this Python
    assert "tensorflow-metal==1.2.0" in mac_fix and "tensorflow>=2.18" in mac_fix
    assert "frameworks.none" not in ids(run_checks(linux({"torch": "2.6.0"})))


# -- the machinery ---------------------------------------------------------------------
def test_a_broken_check_becomes_a_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(snap, kb):
        raise KeyError("boom")

    monkeypatch.setattr(checks_pkg, "CHECKS", [broken, *checks_pkg.CHECKS])
    findings = run_checks(linux())
    f = only(findings, "doctor.check-failed")
    assert "boom" in f.observed and "frameworks.none" in ids(findings)


def test_knowledge_base_is_cached_and_cites_sources() -> None:
    kb = load_knowledge()
    assert kb is load_knowledge()
    for section, body in kb.items():
        if isinstance(body, dict):
            cited = [v for k, v in body.items() if "source" in k]
            assert cited and all(v.startswith("https://") for v in cited), section
    for bad in kb["metal"]["known_bad"]:
        assert bad["id"].startswith("metal.") and bad["source"].startswith("https://")
    families = {f["major"]: f["min_driver_linux"] for f in kb["cuda"]["families"]}
    assert families == {11: "450.80.02", 12: "525.60.13", 13: "580"}
    rel = {r["version"]: r for r in kb["metal"]["releases"]}
    assert rel["1.2.0"]["python"] == ">=3.9,<3.13"
    assert rel["1.1.0"]["python"] == ">=3.9,<3.12"


def test_checks_import_no_framework() -> None:
    code = (
        "import sys\n"
        "from devicebench.env.checks import run_checks\n"
        "from devicebench.env.snapshot import load_snapshot\n"
        f"for p in sorted(__import__('pathlib').Path({str(FIXTURES)!r}).glob('*.json')):\n"
        "    run_checks(load_snapshot(p))\n"
        "print(sorted(m for m in ('tensorflow', 'torch', 'jax', 'keras') if m in sys.modules))\n"
    )
    root = Path(checks_pkg.__file__).resolve().parents[3]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True
    )
    assert out.stdout.strip() == "[]"


# -- fixtures built by the probe's own functions from raw inputs recorded on real machines ---
RAW = Path(__file__).resolve().parent.parent / "fixtures" / "raw"


def raw_fixture(name: str) -> EnvSnapshot:
    import json

    from devicebench.env.interpret import snapshot_from_raw

    return snapshot_from_raw(json.loads((RAW / f"{name}.json").read_text()))


def bad(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.id, f.severity) for f in findings if f.severity in ("error", "warning")]


@pytest.mark.parametrize(
    "name", ["mac_m3_macos145_tf219_metal120", "mac_m1_macos151_tf218_metal120"]
)
def test_healthy_macs_have_no_errors_or_warnings(name: str) -> None:
    snap = raw_fixture(name)
    assert snap.host.os_version.startswith("macOS ") and snap.host.macos_version[0].isdigit()
    findings = run_checks(snap)
    assert bad(findings) == []
    assert "keras.xla-off-apple-gpu" in ids(findings)


def test_every_recorded_raw_fixture_is_covered() -> None:
    assert {p.stem for p in RAW.glob("*.json")} == {
        "mac_m3_macos145_tf219_metal120",
        "mac_m1_macos151_tf218_metal120",
        "mac_bigsur_metal_built_for_12",
        "mac_wrong_arch_tf291",
        "linux_tf23_cudnn8_system",
        "linux_jupyter_conda_libs_tf212",
        "linux_cpu_vm_tf_jax_torch",
        "linux_cpu_vm_requires",  # this VM's Requires-Dist (tests/unit/test_env_pip_check.py)
    }
    for p in RAW.glob("*.json"):
        assert "source" in p.read_text()


def test_h200_cuda_box_only_error_is_the_keras_backend() -> None:
    snap = load_snapshot(FIXTURES / "h200_jax_torch_cuda13.json")
    findings = run_checks(snap)
    assert bad(findings) == [("keras.backend-missing", "error")]
    f = findings[0]
    assert "'tensorflow'" in f.observed and "TensorFlow is not installed" in f.observed
    assert f.fix.startswith("export KERAS_BACKEND=jax")
    snap.env_vars["KERAS_BACKEND"] = "jax"
    assert bad(run_checks(snap)) == []  # with a backend that is installed: a healthy box


def test_macos_version_compares_as_a_version_not_a_string() -> None:
    # "macOS 14.5" read by a leading-digits parser was "too old" on every Mac.
    for ver in ("12.1", "14.5", "15.0.1", "26.0"):
        snap = mac({"tensorflow": "2.19.0", "tensorflow-metal": "1.2.0"}, macos=ver)
        assert "metal.macos-too-old" not in ids(run_checks(snap)), ver
    old = mac({"tensorflow": "2.19.0", "tensorflow-metal": "1.2.0"}, macos="12.0.1")
    assert only(run_checks(old), "metal.macos-too-old").severity == "error"


def test_old_snapshots_with_macos_in_os_version_are_migrated() -> None:
    for text, expected in (("macOS 14.5", "14.5"), ("14.4.1", "14.4.1"), ("junk", "")):
        snap = EnvSnapshot.from_dict(
            {"schema_version": 1, "host": {"os": "Darwin", "os_version": text}}
        )
        assert snap.host.macos_version == expected


def test_torch_mps_macos_check_uses_the_version() -> None:
    torch_only = {"torch": "2.4.0"}
    old = mac(torch_only, frameworks={"torch": probe("torch", "2.4.0")}, macos="12.2")
    assert "MPS backend needs macOS 12.3" in only(run_checks(old), "gpu.not-seen").why
    new = mac(torch_only, frameworks={"torch": probe("torch", "2.4.0")}, macos="14.5")
    assert "needs macOS" not in only(run_checks(new), "gpu.not-seen").why


def test_metal_plugin_built_for_newer_macos_is_os_too_old() -> None:
    findings = run_checks(raw_fixture("mac_bigsur_metal_built_for_12"))
    too_old = only(findings, "metal.macos-too-old")
    assert "11.6" in too_old.observed and "upgrade macOS to 12.0" in too_old.fix
    crash = only(findings, "framework.import-failed")
    assert "metal.macos-too-old" in crash.related and "not a version mismatch" in crash.why
    assert "upgrade macOS" in crash.fix
    assert "metal.version-mismatch" not in ids(findings)
    assert not any("tensorflow-metal==1.2.0" in f.fix for f in findings)


def test_built_for_message_on_a_new_enough_macos_is_not_os_too_old() -> None:
    err = (
        "Symbol not found: _X\n"
        "  Referenced from: libmetal_plugin.dylib (which was built for Mac OS X 12.0)"
    )
    snap = mac(
        {"tensorflow": "2.18.0", "tensorflow-metal": "1.1.0"},
        macos="15.1",
        frameworks={"tensorflow": probe("tensorflow", "2.18.0", status="crashed", error=err)},
    )
    crash = only(run_checks(snap), "framework.import-failed")
    assert "metal.symbol-not-found" in crash.related and "upgrade macOS" not in crash.fix


def test_wrong_architecture_names_the_installed_distribution() -> None:
    crash = only(run_checks(raw_fixture("mac_wrong_arch_tf291")), "framework.import-failed")
    assert "tensorflow 2.9.1" in crash.why and "x86_64" in crash.why
    assert crash.fix.startswith("pip uninstall -y tensorflow &&")
    assert "'tensorflow-macos==2.9.*'" in crash.fix  # TF <= 2.12 on Apple Silicon
    err = (
        "ImportError: ... (mach-o file, but is an incompatible architecture "
        "(have 'x86_64', need 'arm64'))"
    )
    snap = mac(
        {"tensorflow-macos": "2.12.0"},
        frameworks={"tensorflow": probe("tensorflow", "", status="error", error=err)},
    )
    crash = only(run_checks(snap), "framework.import-failed")
    assert crash.fix.startswith("pip uninstall -y tensorflow-macos &&")
    assert "tensorflow-macos 2.12.0" in crash.why


def test_other_import_errors_are_not_read_as_wrong_architecture() -> None:
    err = "ImportError: dlopen(_pywrap_tensorflow_internal.so): image not found"
    snap = mac(
        {"tensorflow": "2.16.2"},
        frameworks={"tensorflow": probe("tensorflow", "", status="error", error=err)},
    )
    assert "architecture" not in only(run_checks(snap), "framework.import-failed").why


@pytest.mark.parametrize(
    ("python", "macos", "tf", "expected", "blocker"),
    [
        ("3.12.4", "14.5", "2.19.0", "1.2.0", ""),
        ("3.11.9", "14.5", "2.17.0", "1.1.0", ""),
        ("3.12.4", "14.5", "2.17.0", None, "tensorflow"),  # 1.1.0 has no cp312 wheel
        ("3.13.1", "15.1", "", None, "python"),
        ("3.9.6", "11.7", "", None, "macos"),
        ("3.9.6", "12.0", "2.8.0", "0.4.0", ""),
        ("3.9.6", "12.0", "2.9.0", None, "tensorflow"),  # 0.5.0 needs macOS 12.1
        ("3.12.4", "14.5", "2.20.0", None, "tensorflow"),  # known bad with 1.2.0
    ],
)
def test_metal_version_table(python, macos, tf, expected, blocker) -> None:
    from devicebench.env.checks.apple import metal_choice

    choice = metal_choice(load_knowledge(), python=python, macos=macos, tensorflow=tf)
    assert (choice.release or {}).get("version") == expected
    assert choice.blocker == blocker


def test_python_313_without_metal_wheel_is_explained() -> None:
    snap = mac(
        {"tensorflow": "2.20.0"},
        python="3.13.1",
        frameworks={"tensorflow": probe("tensorflow", "2.20.0")},
    )
    f = only(run_checks(snap), "gpu.not-seen")
    assert "no tensorflow-metal release has a wheel for Python 3.13" in f.why
    assert "python3.12 -m venv" in f.fix and "KERAS_BACKEND=torch" in f.fix
    near = mac(
        {"tensorflow": "2.19.0"}, python="3.12.4",
        frameworks={"tensorflow": probe("tensorflow", "2.19.0")},
    )
    assert only(run_checks(near), "gpu.not-seen").fix == "pip install tensorflow-metal==1.2.0"


def test_keras3_with_tf_215_is_an_error() -> None:
    snap = mac({"tensorflow-macos": "2.15.0", "tensorflow-metal": "1.1.0", "keras": "3.0.5"})
    f = only(run_checks(snap), "keras.keras3-with-old-tf")
    assert f.severity == "error" and "keras~=2.15.0" in f.fix and "2.15.0" in f.observed
    assert "62825" in f.source
    linux_case = linux({"tensorflow": "2.13.1", "keras": "3.1.1"})  # keras#19390
    assert "keras~=2.13.0" in only(run_checks(linux_case), "keras.keras3-with-old-tf").fix
    for fine in ({"tensorflow": "2.16.1", "keras": "3.0.5"}, {"tensorflow": "2.15.0",
                                                           "keras": "2.15.0"}):
        assert "keras.keras3-with-old-tf" not in ids(run_checks(linux(fine)))


@pytest.mark.parametrize(
    ("dists", "env", "config", "expected_fix"),
    [
        ({"keras": "3.15.1", "jax": "0.11.2", "torch": "2.11.0"}, {}, "", "KERAS_BACKEND=jax"),
        ({"keras": "3.15.1", "torch": "2.11.0"}, {"KERAS_BACKEND": "jax"}, "", "=torch"),
        ({"keras": "3.15.1", "jax": "0.4.30"}, {"KERAS_BACKEND": "pytorch"}, "", "=jax"),
        ({"keras": "3.15.1", "jax": "0.4.30"}, {}, "tensorflow", "keras.json"),
    ],
)
def test_keras_backend_not_installed_is_an_error(dists, env, config, expected_fix) -> None:
    snap = linux(dists, env=env)
    snap.keras_config_backend = config
    f = only(run_checks(snap), "keras.backend-missing")
    assert f.severity == "error" and expected_fix in f.fix


@pytest.mark.parametrize(
    ("dists", "env"),
    [
        ({"keras": "3.15.1", "tensorflow": "2.19.0"}, {}),
        ({"keras": "3.15.1", "jax": "0.4.30", "torch": "2.5.0"}, {"KERAS_BACKEND": "torch"}),
        ({"keras": "2.15.0", "jax": "0.4.30"}, {}),  # Keras 2 has no backend switch
        ({"keras": "3.15.1"}, {}),  # no framework at all: frameworks.none says it
    ],
)
def test_keras_backend_installed_is_fine(dists, env) -> None:
    assert "keras.backend-missing" not in ids(run_checks(linux(dists, env=env)))


# -- Linux GPU diagnosis: each cause with its own fix -------------------------------------
def test_tf_built_for_cudnn7_on_a_cudnn8_system() -> None:
    f = only(run_checks(raw_fixture("linux_tf23_cudnn8_system")), "gpu.not-seen")
    assert "GTX 960M" in f.observed  # GPUs listed although the driver lacks compute_cap
    assert "cuDNN 7" in f.why and "libcudnn.so.8" in f.why
    assert "cudatoolkit=10.1 cudnn=7.6" in f.fix and "and-cuda]" not in f.fix.split("#")[0]


def test_conda_libraries_invisible_to_a_jupyter_kernel() -> None:
    snap = raw_fixture("linux_jupyter_conda_libs_tf212")
    f = only(run_checks(snap), "gpu.not-seen")
    assert "conda environment" in f.why and "LD_LIBRARY_PATH=unset" in f.why
    assert "export LD_LIBRARY_PATH=/home/gg4u/miniconda3/envs/tf/lib" in f.fix
    assert "kernel.json" in f.fix
    # Near miss: the same machine with the env's lib/ on LD_LIBRARY_PATH -> not this cause.
    snap.env_vars["LD_LIBRARY_PATH"] = "/home/gg4u/miniconda3/envs/tf/lib"
    assert "conda environment" not in only(run_checks(snap), "gpu.not-seen").why


def test_missing_cuda_libraries_fix_depends_on_tf_version() -> None:
    log = ["Could not load dynamic library 'libcudart.so.12'; dlerror: no such file"]
    for tf_v, expected in (("2.15.0", "tensorflow[and-cuda]==2.15.0"),
                           ("2.11.0", "cudatoolkit=11.2 cudnn=8.1")):
        tf = probe("tensorflow", tf_v, build={"is_cuda_build": True}, load_errors=log)
        f = only(run_checks(linux({"tensorflow": tf_v}, frameworks={"tensorflow": tf},
                                  smi=smi())), "gpu.not-seen")
        assert expected in f.fix and "not found" in f.why, tf_v
        if tf_v == "2.11.0":
            assert "and-cuda]" not in f.fix.split("#")[0]


def test_jax_plugin_for_newer_cuda_than_driver() -> None:
    jax = probe("jax", "0.7.0")
    snap = linux({"jax": "0.7.0", "jaxlib": "0.7.0", "jax-cuda13-plugin": "0.7.0"},
                 frameworks={"jax": jax}, smi=smi("550.54.15", "12.4"))
    findings = run_checks(snap)
    too_old = only(findings, "cuda.driver-too-old")
    assert too_old.observed.startswith("JAX 0.7.0 is built for CUDA 13")
    ok = linux({"jax": "0.7.0", "jaxlib": "0.7.0", "jax-cuda12-plugin": "0.7.0"},
               frameworks={"jax": probe("jax", "0.7.0", devices=(CUDA0,))},
               smi=smi("550.54.15", "12.4"))
    assert "cuda.driver-too-old" not in ids(run_checks(ok))


def test_jax_plugin_version_mismatch_is_named() -> None:
    snap = linux({"jax": "0.4.31", "jaxlib": "0.4.31", "jax-cuda12-plugin": "0.4.30"},
                 frameworks={"jax": probe("jax", "0.4.31")}, smi=smi())
    f = only(run_checks(snap), "gpu.not-seen")
    assert "jax-cuda12-plugin 0.4.30 does not match jaxlib 0.4.31" in f.why
    assert "jax[cuda12]" in f.fix


# -- probe functions on recorded raw inputs -----------------------------------------------
def test_nvidia_smi_and_ldconfig_parsing() -> None:
    from devicebench.env.interpret import (
        cuda_libs_from_ldconfig,
        load_errors_from_log,
        nvidia_smi_from_output,
    )

    smi_ = nvidia_smi_from_output(
        "| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04   CUDA Version: 13.0     |",
        "0, NVIDIA H200, 143771, 9.0",
    )
    assert (smi_.driver_version, smi_.cuda_version) == ("580.159.04", "13.0")
    assert smi_.gpus[0].name == "NVIDIA H200" and smi_.gpus[0].compute_capability == "9.0"
    assert nvidia_smi_from_output(None, None).error
    libs = cuda_libs_from_ldconfig(
        "1342 libs found in cache `/etc/ld.so.cache'\n"
        "\tlibcudnn.so.8 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcudnn.so.8\n"
        "\tlibc.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => /lib/x86_64-linux-gnu/libc.so.6\n"
    )
    assert libs == {"libcudnn.so.8": "/usr/lib/x86_64-linux-gnu/libcudnn.so.8"}
    assert load_errors_from_log("I tensorflow ... Successfully opened dynamic library x") == []


# -- snapshot validation -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("patch", "field", "expected"),
    [
        ({"host": {"os_version": None}}, "host.os_version", "expected a string, got null"),
        ({"host": {"cpu_cores_logical": "8"}}, "host.cpu_cores_logical", "an integer"),
        ({"host": {"cpu_cores_logical": True}}, "host.cpu_cores_logical", "an integer"),
        ({"created_at": None}, "created_at", "a string"),
        ({"distributions": {"tensorflow": 2.19}}, "distributions.tensorflow", "a string"),
        ({"frameworks": {"tensorflow": {"import_seconds": "fast"}}},
         "frameworks.tensorflow.import_seconds", "a number"),
        ({"frameworks": {"jax": {"physical_devices": [{"kind": None}]}}},
         "frameworks.jax.physical_devices[0].kind", "a string"),
        ({"nvidia_smi": {"gpus": "A100"}}, "nvidia_smi.gpus", "a list"),
    ],
)
def test_bad_snapshot_fields_are_named(patch, field, expected) -> None:
    from devicebench.errors import SnapshotError

    with pytest.raises(SnapshotError) as info:
        EnvSnapshot.from_dict({"schema_version": 1, **patch})
    text = str(info.value)
    assert f"field {field}:" in text and expected in text, text


def test_nullable_snapshot_fields_accept_null() -> None:
    snap = EnvSnapshot.from_dict({"schema_version": 1, "nvidia_smi": None,
                                  "host": {"rosetta": None, "ram_bytes": None}})
    assert snap.nvidia_smi is None and snap.host.rosetta is None
