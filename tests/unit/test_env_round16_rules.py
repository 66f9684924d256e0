"""Issue 24, round 16 (step 0): JAX without its ROCm plugin on an AMD GPU host, from the
fifteenth set's held-out miss (jax-ml/jax#25856). A case it must name and cases that must stay
silent; raw inputs replay through snapshot_from_raw."""

from __future__ import annotations

import copy

from devicebench.env.checks import run_checks
from devicebench.env.interpret import snapshot_from_raw

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


def _ids(doc: dict) -> dict:
    return {f.id: f for f in run_checks(snapshot_from_raw(doc)) if f.severity != "info"}


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
