"""Issue 24, round 26 step 0: round24_heldout's misses (seen after its one scoring) written as
general rules, each with cases that must stay silent. A sourced oneAPI beside torch +xpu 2.6's
own SYCL runtime (pytorch#143713), IPEX 2.5 under torch 2.6 (intel-extension-for-pytorch#778),
transformers >= 4.50 with torch-npu before 2.5.1 (LlamaFactory#7986), and tensorflow-rocm's
hosting in the not-a-ROCm-build fix (tensorflow-upstream#2529)."""

from __future__ import annotations

from tests.unit.env_cases import warned as _ids

LINUX = {"system": "Linux", "machine": "x86_64", "python_version": "3.12.3",
         "python_implementation": "CPython", "conda_env": False, "python_prefix": "/usr",
         "os_release_name": "Ubuntu 24.04.1 LTS", "kernel_release": "6.8.0-51-generic"}
ONEAPI = {"ONEAPI_ROOT": "/opt/intel/oneapi", "CMPLR_ROOT": "/opt/intel/oneapi/compiler/2025.0",
          "LD_LIBRARY_PATH": "/opt/intel/oneapi/mkl/2025.0/lib:"
                             "/opt/intel/oneapi/compiler/2025.0/lib"}


def _doc(dists: dict, env: dict | None = None, host: dict | None = None) -> dict:
    return {"host": host or LINUX, "distributions": {"numpy": "1.26.4", **dists},
            "env_vars": env or {}, "frameworks": {}}


def test_oneapi_sourced_beside_torch_xpu_wheels() -> None:
    xpu = {"torch": "2.6.0+xpu", "intel-sycl-rt": "2025.0.4"}
    f = _ids(_doc(xpu, ONEAPI))["xpu.oneapi-sourced-beside-wheels"]
    assert "oneAPI" in f.title and "setvars" in f.fix
    # silent: torch 2.5 (which needed the sourced oneAPI), nothing of oneAPI on the loader's
    # path, a CPU torch, oneAPI's root set without its libraries first
    assert "xpu.oneapi-sourced-beside-wheels" not in _ids(_doc({"torch": "2.5.1+xpu"}, ONEAPI))
    assert "xpu.oneapi-sourced-beside-wheels" not in _ids(_doc(xpu))
    assert "xpu.oneapi-sourced-beside-wheels" not in _ids(_doc({"torch": "2.6.0+cpu"}, ONEAPI))
    assert "xpu.oneapi-sourced-beside-wheels" not in _ids(_doc(
        xpu, {"ONEAPI_ROOT": "/opt/intel/oneapi"}))


def _skewed(found: dict, name: str) -> bool:
    return any(name in f.title for f in found.values() if f.id == "stack.dependency-range")


def test_ipex_2_5_under_torch_2_6() -> None:
    found = _ids(_doc({"torch": "2.6.0+cpu", "intel-extension-for-pytorch": "2.5.0"}))
    f = found["stack.dependency-range"]
    assert "intel-extension-for-pytorch" in f.title and "torch==2.5.1" in f.fix
    for ok in ({"torch": "2.5.1+cpu", "intel-extension-for-pytorch": "2.5.0"},
               {"torch": "2.6.0+cpu", "intel-extension-for-pytorch": "2.6.0"}):
        assert not _skewed(_ids(_doc(ok)), "intel-extension-for-pytorch"), ok


def test_transformers_4_50_with_an_older_torch_npu() -> None:
    host = {**LINUX, "machine": "aarch64", "os_release_name": "Ubuntu 22.04.5 LTS"}
    bad = {"torch": "2.2.0", "torch-npu": "2.2.0", "transformers": "4.51.0"}
    f = _ids(_doc(bad, host=host))["stack.dependency-range"]
    assert "torch-npu" in f.title and "torch-npu==2.5.1" in f.fix
    for ok in ({**bad, "transformers": "4.49.0"}, {**bad, "torch": "2.5.1", "torch-npu": "2.5.1"},
               {"torch": "2.2.0", "transformers": "4.51.0"}):
        assert not _skewed(_ids(_doc(ok, host=host)), "torch-npu"), ok


def test_not_a_rocm_build_fix_names_where_the_wheels_are() -> None:
    doc = _doc({"tensorflow": "2.14.0"}, host={**LINUX, "os_release_name": "CentOS Linux 8"})
    doc["rocminfo"] = ("  Name:                    gfx90a\n"
                       "  Marketing Name:          AMD Instinct MI210\n")
    doc["frameworks"] = {"tensorflow": {"status": "ok", "stderr": "", "result": {
        "name": "tensorflow", "status": "ok", "version": "2.14.0",
        "physical_devices": [{"name": "/physical_device:CPU:0", "kind": "CPU"}],
        "logical_devices": ["/device:CPU:0"],
        "build": {"is_cuda_build": True, "cuda_version": "11.8", "is_rocm_build": False}}}}
    f = _ids(doc)["rocm.tf-not-rocm"]
    assert "repo.radeon.com" in f.fix and "2.14.0.600" in f.fix
