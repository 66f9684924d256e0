"""Round 6 of issue 24's environment rules: each family with a case that must fire and one that
must stay silent, replayed from raw probe inputs (``snapshot_from_raw``)."""

from __future__ import annotations

import json

from devicebench.env.checks import run_checks
from devicebench.env.interpret import snapshot_from_raw
from devicebench.env.messages import reported_facts
from tests.unit.env_cases import CORPUS as _DIR
from tests.unit.env_cases import case_raw as _case
from tests.unit.env_cases import finding_ids as _ids


def _linux(**host) -> dict:
    return {"system": "Linux", "machine": "x86_64", "python_version": "3.11.9",
            "kernel_release": "6.5.0-41-generic", "python_prefix": "/home/u/venv",
            "conda_env": False, **host}


def _win(**host) -> dict:
    return {"system": "Windows", "machine": "AMD64", "python_version": "3.12.3",
            "platform": "Windows-11-10.0.22631-SP0", "python_prefix": "C:\\Users\\u\\venv",
            "conda_env": False, **host}


def test_pjrt_struct_size_wording_names_the_installed_plugin() -> None:
    said = reported_facts("Unexpected PJRT_Plugin_Attributes_Args size: expected 32, got 24. "
                          "The plugin is likely built with a later version than the framework. "
                          "This plugin is built with PJRT API version 0.75")
    assert said["pjrt_mismatch"] == {"plugin_api": "0.75", "plugin_built": "later",
                                     "struct": "PJRT_Plugin_Attributes_Args"}
    raw = _case("round6_cases", "weathernext/issues/185")
    f = _ids(raw)["stack.release-skew"]
    assert "libtpu" in f.title and f.fix.startswith("pip install -U 'jax[tpu]==0.6.2'")
    assert "later PJRT API" in f.why
    # silent: the same TPU VM whose jax runs (no plugin message)
    raw["frameworks"]["jax"] = {"status": "ok", "stderr": "", "result": {
        "name": "jax", "status": "ok", "version": "0.6.2",
        "physical_devices": [{"name": "TPU_0", "kind": "GPU", "description": "TPU v5 lite"}],
        "logical_devices": ["TPU_0"], "build": {"default_backend": "tpu"}, "extra": {}}}
    assert "stack.release-skew" not in _ids(raw)


def test_a_linux_driver_libcuda_inside_wsl2_is_named() -> None:
    raw = _case("round6_cases", "genesis-world/issues/114")
    f = _ids(raw)["wsl.linux-driver-libcuda"]
    assert f.severity == "error" and "/usr/lib/x86_64-linux-gnu/libcuda.so.1" in f.title
    assert "apt-get purge" in f.fix and "/usr/lib/wsl/lib" in f.fix
    # silent: WSL2 whose loader finds WSL's own libcuda first
    raw["ldconfig"] = "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/wsl/lib/libcuda.so.1\n"
    assert "wsl.linux-driver-libcuda" not in _ids(raw)
    # silent: the same libcuda path on plain Linux (not WSL)
    raw["host"]["kernel_release"] = "6.5.0-41-generic"
    raw["ldconfig"] = "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
    assert "wsl.linux-driver-libcuda" not in _ids(raw)


def test_torch_230_in_the_per_user_site_packages_is_a_known_regression() -> None:
    raw = _case("round6_cases", "pytorch/issues/125109")
    f = _ids(raw)["windows.dll-load-failed"]
    assert "2.3.0" in f.title and "torch==2.3.1" in f.fix and "125109" in f.source
    # silent (the general VC++ answer instead): the same failure from a venv's site-packages
    raw["frameworks"]["torch"]["result"]["error"] = (
        "OSError: [WinError 126] The specified module could not be found. Error loading "
        "\"C:\\Users\\u\\venv\\Lib\\site-packages\\torch\\lib\\shm.dll\" or one of its "
        "dependencies.")
    f = _ids(raw)["windows.dll-load-failed"]
    assert "2.3.1" not in f.fix and "vc_redist" in f.fix


def test_qt_before_torch_29_on_windows_is_a_warning() -> None:
    raw = {"host": _win(), "distributions": {"torch": "2.9.1", "PyQt5": "5.15.11"}}
    f = _ids(raw)["windows.import-order"]
    assert f.severity == "warning" and "PyQt5" in f.title and "import torch before" in f.fix
    for dists, host in (({"torch": "2.8.0", "PyQt5": "5.15.11"}, _win()),
                        ({"torch": "2.9.1", "PyQt5": "5.15.11"}, _linux()),
                        ({"torch": "2.9.1"}, _win())):
        assert "windows.import-order" not in _ids({"host": host, "distributions": dists})


def test_a_cpu_tensorflow_in_a_conda_env_is_traced_to_conda() -> None:
    raw = _case("round6_cases", "tensorflow-feedstock/issues/365")
    f = _ids(raw)["gpu.not-seen"]
    assert "installed by conda" in f.why and f.fix.startswith("conda remove -y tensorflow")
    # silent on provenance: the same CPU build in a venv (a source build, say)
    raw["host"]["conda_env"] = False
    f = _ids(raw)["gpu.not-seen"]
    assert "conda" not in f.why and not f.fix.startswith("conda")


def test_torchvision_of_another_variant_than_torch() -> None:
    raw = _case("round5_cases", "pytorch/issues/122494")
    f = _ids(raw)["stack.variant-mismatch"]
    assert "torchvision 0.17.1 is a CUDA build" in f.title and "CPU build" in f.title
    assert f.fix.endswith("--index-url https://download.pytorch.org/whl/cpu  # all three "
                          "from the same index") and "'torchvision==0.17.1'" in f.fix
    quiet = [({"torch": "2.2.1", "torchvision": "0.17.1"}, _linux()),
             ({"torch": "2.2.1+cpu", "torchvision": "0.17.1+cpu"}, _linux()),
             ({"torch": "2.2.1+cpu", "torchvision": "0.17.1"}, _linux(conda_env=True)),
             ({"torch": "2.2.1", "torchvision": "0.17.1"}, _win()),
             ({"torch": "2.5.1+cu124", "torchvision": "0.20.1"}, _linux())]
    for dists, host in quiet:
        assert "stack.variant-mismatch" not in _ids({"host": host, "distributions": dists}), dists


def test_the_workers_no_kernel_image_error_beats_the_builds_ptx() -> None:
    raw = _case("round5_cases", "Spatial-Transform-Decoupling/issues/14")
    f = _ids(raw)["gpu.arch-not-in-build"]
    assert "sm_86" in f.title and "compute_37" in f.why and "--index-url" in f.fix
    # silent: the same build whose first CUDA op ran (its PTX JIT-compiled)
    raw["frameworks"]["torch"]["result"]["extra"] = {}
    assert "gpu.arch-not-in-build" not in _ids(raw)


def test_a_missing_cuda_runtime_is_named_with_the_version_tf_was_built_for() -> None:
    raw = _case("round5_cases", "tensorflow/issues/69838")
    f = _ids(raw)["gpu.not-seen"]
    assert "libcudart.so.11.0 (the CUDA 11.8 / cuDNN 8 libraries TensorFlow 2.13.1 was built " \
           "with) not found" in f.why


def test_a_sandbox_that_hides_the_gpu_is_named() -> None:
    raw = _case("round5_cases", "openai/codex/issues/10199")
    f = _ids(raw)["host.sandboxed"]
    assert f.severity == "warning" and "sandbox" in f.title and "CODEX_SANDBOX=seatbelt" in \
        f.observed
    # silent: MPS available inside the same sandbox, or no marker variable at all
    result = raw["frameworks"]["torch"]["result"]
    result["physical_devices"].append({"name": "mps:0", "kind": "MPS", "description": "mps"})
    assert "host.sandboxed" not in _ids(raw)
    result["physical_devices"].pop()
    raw["env_vars"] = {}
    assert "host.sandboxed" not in _ids(raw)


def test_the_probe_records_the_sandbox_marker() -> None:
    from devicebench.env.snapshot import TRACKED_ENV_VARS

    assert "CODEX_SANDBOX" in TRACKED_ENV_VARS


def test_fixes_on_windows_double_quote_requirements() -> None:
    # cmd.exe passes single quotes to pip literally ("Invalid requirement"); every printed
    # fix on a Windows corpus case uses double quotes, and prose apostrophes are kept.
    every = [c for p in sorted(_DIR.glob("*cases.json"))
             for c in json.loads(p.read_text(encoding="utf-8"))["cases"]]
    for case in [c for c in every if c["raw"]["host"]["system"] == "Windows"]:
        for f in run_checks(snapshot_from_raw(case["raw"])):
            if "WSL2" not in f.fix:
                assert "'torch" not in f.fix and "'tensorflow" not in f.fix, (case["url"], f.fix)
    raw = _case("round6_cases", "pytorch/issues/125109")
    assert 'pip install --user -U "torch==2.3.1"' in _ids(raw)["windows.dll-load-failed"].fix
    from devicebench.env.checks._util import fit_fix_to_platform

    assert fit_fix_to_platform("pip install 'numpy<2'  # the wheel's own", "Linux") == \
        "pip install 'numpy<2'  # the wheel's own"
    assert fit_fix_to_platform("pip install 'numpy<2'  # the wheel's own", "Windows") == \
        'pip install "numpy<2"  # the wheel\'s own'
