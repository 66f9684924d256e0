"""Issue 24, round 16 (step 0): JAX without its ROCm plugin on an AMD GPU host, from the
fifteenth set's held-out miss (jax-ml/jax#25856). A case it must name and cases that must stay
silent; raw inputs replay through snapshot_from_raw."""

from __future__ import annotations

import copy

from tests.unit.env_cases import warned as _ids

MI210 = ("  Name:                    gfx90a\n  Marketing Name:          AMD Instinct MI210\n"
         "  Name:                    gfx90a\n  Marketing Name:          AMD Instinct MI210\n")


def _raw(dists: dict, *, rocminfo: str = MI210, devices: tuple = ("cpu:0", "CPU")) -> dict:
    name, kind = devices
    return {"host": {"system": "Linux", "machine": "x86_64", "python_version": "3.12.3",
                     "python_implementation": "CPython", "conda_env": False,
                     "python_prefix": "/home/u/venv"},
            "distributions": dists, "rocminfo": rocminfo,
            "frameworks": {"jax": {"status": "ok", "stderr": "", "result": {
                "name": "jax", "status": "ok", "version": dists["jax"],
                "physical_devices": [{"name": name, "kind": kind, "description": name}],
                "logical_devices": [name],
                "build": {"default_backend": kind.lower() if kind == "CPU" else "gpu",
                          "jaxlib_version": dists["jaxlib"]}, "extra": {}}}}}


CPU_JAX = {"jax": "0.4.31", "jaxlib": "0.4.31", "numpy": "2.2.1"}


def test_cpu_jax_beside_amd_gpus_is_named_with_the_rocm_plugin() -> None:
    found = _ids(_raw(CPU_JAX))
    f = found["rocm.jax-no-plugin"]
    assert f.severity == "error" and "ROCm" in f.title and "MI210" in f.observed
    assert "jax[rocm]" in f.fix and "jax-rocm60-plugin" in f.fix
    assert f.source.startswith("https://")


def test_silent_with_the_plugin_a_rocm_jaxlib_a_gpu_or_no_amd_gpu() -> None:
    plugin = dict(CPU_JAX, **{"jax-rocm60-plugin": "0.4.31", "jax-rocm60-pjrt": "0.4.31"})
    assert "rocm.jax-no-plugin" not in _ids(_raw(plugin))
    rocm_jaxlib = dict(CPU_JAX, jaxlib="0.4.30+rocm611", jax="0.4.30")
    assert "rocm.jax-no-plugin" not in _ids(_raw(rocm_jaxlib))
    gpu = _raw(CPU_JAX, devices=("rocm:0", "GPU"))
    assert "rocm.jax-no-plugin" not in _ids(gpu)
    assert "rocm.jax-no-plugin" not in _ids(_raw(CPU_JAX, rocminfo=""))
    igpu = ("  Name:                    gfx1103\n"
            "  Marketing Name:          AMD Radeon Graphics\n")
    assert "rocm.jax-no-plugin" not in _ids(_raw(CPU_JAX, rocminfo=igpu))
    no_jax = copy.deepcopy(_raw(CPU_JAX))
    no_jax["distributions"] = {"numpy": "2.2.1"}
    del no_jax["frameworks"]
    assert "rocm.jax-no-plugin" not in _ids(no_jax)


# Round 16's rules from round15_dev.

SOLVER = ("Unable to initialize backend 'cuda': Found cuSOLVER version 11002, but JAX was built "
          "against version 11401, which is newer. The copy of cuSOLVER that is installed must "
          "be at least as new as the version against which JAX was built.\n"
          "An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not "
          "installed. Falling back to cpu.\n")
A100 = {"header": "| NVIDIA-SMI 525.105.17    Driver Version: 525.105.17    CUDA Version: 12.0 |",
        "rows": "0, NVIDIA A100-SXM4-40GB, 40960, 8.0"}


def _jax_raw(stderr: str, jaxlib: str = "0.4.23+cuda11.cudnn86") -> dict:
    doc = _raw({"jax": "0.4.23", "jaxlib": jaxlib}, rocminfo="")
    doc["frameworks"]["jax"]["stderr"] = stderr
    doc["nvidia_smi"] = A100
    return doc


def test_jax_naming_an_older_cuda_library_is_named_and_no_plugin_is_not_claimed() -> None:
    found = _ids(_jax_raw(SOLVER))
    f = found["jax.cuda-lib-older-than-built"]
    assert f.severity == "error" and "cuSOLVER 11002" in f.title and "11401" in f.title
    assert "jax[cuda11_pip]" in f.fix and "LD_LIBRARY_PATH" in f.fix
    assert "jax.no-cuda-plugin" not in found  # the CUDA jaxlib is there; its library is old


def test_silent_without_the_sentence_and_for_cudnn_which_has_its_own_rule() -> None:
    plain = _ids(_jax_raw("An NVIDIA GPU may be present on this machine, but a CUDA-enabled "
                          "jaxlib is not installed. Falling back to cpu.\n", jaxlib="0.4.23"))
    assert "jax.cuda-lib-older-than-built" not in plain and "jax.no-cuda-plugin" in plain
    cudnn = _ids(_jax_raw("Found cuDNN version 8600, but JAX was built against version 8907, "
                          "which is newer.\n"))
    assert "jax.cuda-lib-older-than-built" not in cudnn


FBGEMM = ('OSError: [WinError 126] The specified module could not be found. Error loading '
          '"C:\\\\py\\\\Lib\\\\site-packages\\\\torch\\\\lib\\\\fbgemm.dll" or one of its '
          'dependencies.')


def _win_torch(version: str) -> dict:
    return {"host": {"system": "Windows", "machine": "AMD64", "python_version": "3.11.9",
                     "python_implementation": "CPython", "python_prefix": "C:\\py",
                     "python_executable": "C:\\py\\python.exe"},
            "distributions": {"torch": version},
            "frameworks": {"torch": {"status": "error", "stderr": "", "result": {
                "name": "torch", "status": "error", "error": FBGEMM}}}}


def test_torch_2_4_prereleases_get_the_libomp140_diagnosis() -> None:
    f = _ids(_win_torch("2.4.0.dev20240612+cu121"))["windows.dll-load-failed"]
    assert "libomp140.x86_64.dll" in f.title and "2.4.1" in f.fix


def test_fbgemm_outside_the_2_4_0_window_keeps_the_general_answer() -> None:
    for version in ("2.3.1", "2.4.1", "2.5.0.dev20240801"):
        f = _ids(_win_torch(version))["windows.dll-load-failed"]
        assert "libomp140" not in f.title and "Visual C++" in f.fix, version
