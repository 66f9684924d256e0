"""Round 12's general mechanisms (issue 24): step 0, from the eleventh set's held-out misses
(studied after that set was scored), then from the twelfth set's dev half
(``round11_dev``). Each reads what the probe records and stays silent where the cause is
absent.

* a platform a framework publishes no wheels for (``[[platform_wheels_missing]]``: Windows on
  ARM64 for TensorFlow and JAX, and for PyTorch before 2.7) -> ``platform.no-wheels``;
* Docker Desktop's LinuxKit VM (the ``linuxkit`` kernel) where a framework sees no GPU ->
  ``container.docker-desktop-vm`` (no Metal/MPS in a Linux container on a Mac);
* Intel Macs' last TensorFlow (2.16.2) in ``[[platform_ceilings]]`` -> ``platform.last-release``;
* a project's own pins (requirements of a distribution that is not installed) with no wheel
  for this OS (``[[platform_packages]]``) or this Python (``torch_python``,
  ``tensorflow_python``, ``[[package_python]]``) -> ``install.pin-not-for-platform`` /
  ``install.pin-not-for-python``;
* an HSA override that poses as the GPU's own target is no fix: RDNA 3 (gfx1100) on a ROCm
  build older than the first wheels carrying it (ROCm 5.6, ``[[rocm_wheels_since]]``, the
  build's ``+rocmX.Y`` tag read when the probe has no HIP version) -> the newer wheels;
* tensorflow-macos on an Intel Mac is fixed with plain tensorflow up to its last x86_64
  release, not the Metal plugin (which does not exist there);
* JAX's own "jax requires jaxlib to be installed" (``[[framework_says]]`` ``jax.jaxlib-missing``).
"""

from __future__ import annotations

from devicebench.env.checks import run_checks
from devicebench.env.interpret import snapshot_from_raw


def _ids(raw: dict) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in run_checks(snapshot_from_raw(raw)):
        out.setdefault(f.id, []).append(f)
    return out


def _win(machine: str) -> dict:
    return {"system": "Windows", "machine": machine, "python_version": "3.12.7",
            "platform": "Windows-11-10.0.26100-SP0"}


def _torch_ok(version: str, machine: str = "aarch64") -> dict:
    return {"status": "ok", "stderr": "", "result": {
        "name": "torch", "status": "ok", "version": version,
        "physical_devices": [{"name": "cpu", "kind": "CPU", "description": "cpu"}],
        "logical_devices": ["cpu"],
        "build": {"is_cuda_build": False, "cuda_version": "", "mps_built": False}}}


def test_windows_arm64_with_no_framework_is_told_which_have_no_wheels() -> None:
    found = _ids({"host": _win("ARM64"), "distributions": {"numpy": "2.1.3"},
                  "frameworks": {}})["platform.no-wheels"]
    by_title = {f.title: f for f in found}
    assert len(found) == 3
    torch = next(f for t, f in by_title.items() if t.startswith("PyTorch"))
    assert "before 2.7" in torch.title and "download.pytorch.org/whl/cpu" in torch.fix
    assert torch.severity == "warning" and "ARM64" in torch.observed
    tf = next(f for t, f in by_title.items() if t.startswith("TensorFlow"))
    assert "source" in tf.fix and "before" not in tf.title


def test_silent_on_windows_x64_and_once_a_framework_is_installed() -> None:
    assert "platform.no-wheels" not in _ids({"host": _win("AMD64"), "distributions": {},
                                             "frameworks": {}})
    raw = {"host": _win("ARM64"), "distributions": {"torch": "2.7.1", "numpy": "2.1.3"},
           "frameworks": {"torch": _torch_ok("2.7.1")}}
    assert "platform.no-wheels" not in _ids(raw)


def _linux(kernel: str, machine: str = "aarch64") -> dict:
    return {"system": "Linux", "machine": machine, "python_version": "3.10.12",
            "kernel_release": kernel, "os_release_name": "Ubuntu 22.04.3 LTS",
            "in_container": True}


def test_linuxkit_on_aarch64_says_no_mps_in_the_container_and_to_run_natively() -> None:
    raw = {"host": _linux("6.6.16-linuxkit"), "distributions": {"torch": "2.2.0"},
           "frameworks": {"torch": _torch_ok("2.2.0")}}
    (f,) = _ids(raw)["container.docker-desktop-vm"]
    assert f.severity == "warning" and "MPS" in f.title
    assert "natively on macOS" in f.fix and "Apple Silicon" in f.observed


def test_linuxkit_is_silent_without_a_framework_and_other_kernels_are_silent() -> None:
    assert "container.docker-desktop-vm" not in _ids(
        {"host": _linux("6.6.16-linuxkit"), "distributions": {}, "frameworks": {}})
    raw = {"host": _linux("6.5.0-41-generic"), "distributions": {"torch": "2.2.0"},
           "frameworks": {"torch": _torch_ok("2.2.0")}}
    assert "container.docker-desktop-vm" not in _ids(raw)


def _mac_intel() -> dict:
    return {"system": "Darwin", "machine": "x86_64", "python_version": "3.11.9",
            "mac_ver": "14.6", "proc_translated": "0", "cpu_brand": "Intel(R) Core(TM) i7"}


def test_an_intel_mac_is_told_tensorflow_2_16_2_is_its_last_release() -> None:
    found = _ids({"host": _mac_intel(), "distributions": {"numpy": "1.26.4"}})
    f = next(x for x in found["platform.last-release"] if "TensorFlow" in x.title)
    assert "TensorFlow" in f.title and "2.16.2" in f.title and "'tensorflow==2.16.2'" in f.fix
    installed = {"host": _mac_intel(), "distributions": {"tensorflow": "2.16.2", "torch": "2.2.2",
                                                          "numpy": "1.26.4"}}
    assert "platform.last-release" not in _ids(installed)
    arm = dict(_mac_intel(), machine="arm64", cpu_brand="Apple M2")
    assert "platform.last-release" not in _ids({"host": arm, "distributions": {}})


def test_a_project_pin_with_no_wheel_for_this_python_is_named_with_a_python_that_has_one() -> None:
    raw = {"host": _win("AMD64") | {"python_version": "3.11.3"}, "distributions": {},
           "requires": {"someapp": ["torch-directml==0.1.13.1.dev230301"]}}
    (f,) = _ids(raw)["install.pin-not-for-python"]
    assert "Python 3.11" in f.title and "py -3.10 -m venv" in f.fix
    ok = {"host": _win("AMD64") | {"python_version": "3.10.11"}, "distributions": {},
          "requires": {"someapp": ["torch-directml==0.1.13.1.dev230301", "torch==2.0.0"]}}
    assert "install.pin-not-for-python" not in _ids(ok)
    newer = {"host": _win("AMD64") | {"python_version": "3.12.4"}, "distributions": {},
             "requires": {"someapp": ["torch-directml==0.2.5.dev240914"]}}
    assert "install.pin-not-for-python" not in _ids(newer)


def test_a_project_asking_for_jax_cuda_on_windows_is_sent_to_wsl2_and_linux_is_silent() -> None:
    raw = {"host": _win("AMD64"), "distributions": {},
           "requires": {"someapp": ["jax[cuda12_pip]==0.4.23"]}}
    (f,) = _ids(raw)["install.pin-not-for-platform"]
    assert "Windows" in f.title and f.fix.startswith("run the project in WSL2")
    linux = {"host": _linux("6.5.0-41-generic", "x86_64") | {"in_container": False},
             "distributions": {}, "requires": {"someapp": ["jax[cuda12_pip]==0.4.23"]}}
    assert "install.pin-not-for-platform" not in _ids(linux)
    installed = {"host": _win("AMD64"), "distributions": {"someapp": "1.0"},
                 "requires": {"someapp": ["jax[cuda12_pip]==0.4.23"]}}
    assert "install.pin-not-for-platform" not in _ids(installed)


def _rocm_torch(version: str, arch: list[str]) -> dict:
    return _torch_ok(version) | {"result": _torch_ok(version)["result"] | {
        "build": {"is_cuda_build": False, "is_rocm_build": True, "arch_list": arch}}}


def test_rdna3_on_a_rocm_54_build_gets_newer_wheels_not_an_override_to_itself() -> None:
    old = ["gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030"]
    raw = {"host": _linux("5.15.0-76-generic", "x86_64") | {"in_container": False},
           "rocminfo": "  Name:  gfx1100\n  Marketing Name:  Radeon RX 7900 XT\n",
           "distributions": {"torch": "1.13.1+rocm5.4.2"},
           "frameworks": {"torch": _rocm_torch("1.13.1+rocm5.4.2", old)}}
    (f,) = _ids(raw)["rocm.gfx-not-in-build"]
    assert "whl/rocm5.6" in f.fix and "HSA_OVERRIDE" not in f.fix
    sibling = dict(raw, rocminfo=raw["rocminfo"].replace("gfx1100", "gfx1101"))
    (g,) = _ids(sibling)["rocm.gfx-not-in-build"]
    assert "HSA_OVERRIDE_GFX_VERSION=11.0.0" in g.fix  # gfx1101 poses as gfx1100: still the fix
    new = dict(raw, frameworks={"torch": _rocm_torch("2.1.0+rocm5.6", old + ["gfx1100"])})
    assert "rocm.gfx-not-in-build" not in _ids(new)


def test_tensorflow_macos_on_an_intel_mac_is_fixed_with_plain_tensorflow() -> None:
    raw = {"host": _mac_intel(), "distributions": {"tensorflow-macos": "2.12.0"}}
    (f,) = _ids(raw)["metal.tensorflow-macos"]
    assert "pip install 'tensorflow==2.16.2'" in f.fix and "metal" not in f.fix.lower()[:60]
    arm = {"host": dict(_mac_intel(), machine="arm64", cpu_brand="Apple M2"),
           "distributions": {"tensorflow-macos": "2.12.0"}}
    assert "2.16.2'" not in _ids(arm)["metal.tensorflow-macos"][0].fix


def test_jax_without_jaxlib_is_named_and_other_jax_import_errors_are_not() -> None:
    said = ("ModuleNotFoundError: jax requires jaxlib to be installed. See "
            "https://github.com/google/jax")
    raw = {"host": _mac_intel(), "distributions": {"jax": "0.4.14"},
           "frameworks": {"jax": {"status": "error", "stderr": "", "result": {
               "name": "jax", "status": "error", "error": said}}}}
    (f,) = _ids(raw)["jax.jaxlib-missing"]
    assert "jaxlib" in f.title and "jax[cpu]" in f.fix
    other = dict(raw, frameworks={"jax": {"status": "error", "stderr": "", "result": {
        "name": "jax", "status": "error", "error": "ImportError: cannot import name 'ml_dtypes'"}}})
    assert "jax.jaxlib-missing" not in _ids(other)
