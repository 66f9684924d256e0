"""Issue 24 round 4: ROCm read from rocminfo (classes 7, 8, 10), built-with tags (class 1).

Each mechanism is shown firing on a snapshot built from raw probe inputs and staying silent
on its healthy neighbour."""

from __future__ import annotations

from devicebench.env.checks import run_checks
from devicebench.env.interpret import snapshot_from_raw

LINUX = {"system": "Linux", "machine": "x86_64", "python_version": "3.12.3",
         "kernel_release": "6.8.0-54-generic", "os_release_name": "Ubuntu 24.04.2 LTS"}
RX7600 = "  Name:   gfx1102\n  Marketing Name:   AMD Radeon RX 7600 XT\n"
IGPU = "  Name:   gfx1036\n  Marketing Name:   AMD Radeon Graphics\n"
ROCM61 = ["gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100"]


def _torch(version: str, *, rocm: bool, cuda: str = "", gpus: int = 0, arch=(),
           status: str = "ok") -> dict:
    if status != "ok":
        return {"status": status, "result": None, "stderr": "Segmentation fault (core dumped)\n",
                "describe": "worker died with signal SIGSEGV"}
    devices = [{"name": "cpu", "kind": "CPU", "description": "cpu"}] + [
        {"name": f"cuda:{i}", "kind": "GPU", "description": "AMD GPU"} for i in range(gpus)]
    return {"status": "ok", "stderr": "", "result": {
        "name": "torch", "status": "ok", "version": version, "physical_devices": devices,
        "logical_devices": [d["name"] for d in devices],
        "build": {"is_cuda_build": bool(cuda), "cuda_version": cuda, "is_rocm_build": rocm,
                  "arch_list": list(arch), "hip_version": "6.2" if rocm else ""},
        "extra": {}}}


def _findings(raw: dict) -> dict:
    return {f.id: f for f in run_checks(snapshot_from_raw(raw))}


def test_an_unsupported_target_is_named_from_rocminfo_even_when_the_worker_crashed() -> None:
    # ROCm/legacy-rocm-build#4380: a dGPU (gfx1102) beside an iGPU; the worker segfaults.
    raw = {"host": LINUX, "rocminfo": RX7600 + IGPU,
           "distributions": {"torch": "2.5.1+rocm6.2"},
           "frameworks": {"torch": _torch("2.5.1+rocm6.2", rocm=True, status="crashed")}}
    f = _findings(raw)["rocm.gfx-not-in-build"]
    assert f.severity == "error" and "gfx1102" in f.title
    assert "HSA_OVERRIDE_GFX_VERSION=11.0.0 HIP_VISIBLE_DEVICES=0" in f.fix
    # with no Python framework at all (a HIP program), rocminfo alone still names it
    bare = _findings({"host": LINUX, "rocminfo": "  Name:   gfx1031\n  Marketing Name:   AMD "
                      "Radeon RX 6700 XT\n"})["rocm.gfx-not-in-build"]
    assert bare.severity == "warning" and "HSA_OVERRIDE_GFX_VERSION=10.3.0" in bare.fix
    # silent: a supported target, or the override already set
    ok = {"host": LINUX, "rocminfo": "  Name:   gfx1100\n  Marketing Name:   RX 7900 XTX\n",
          "distributions": {"torch": "2.5.1+rocm6.2"},
          "frameworks": {"torch": _torch("2.5.1+rocm6.2", rocm=True, gpus=1, arch=ROCM61)}}
    assert "rocm.gfx-not-in-build" not in _findings(ok)
    done = dict(raw, env_vars={"HSA_OVERRIDE_GFX_VERSION": "11.0.0"}, rocminfo=RX7600)
    assert "rocm.gfx-not-in-build" not in _findings(done)


def test_an_override_on_a_machine_with_two_amd_gpus_is_a_warning() -> None:
    # ROCm/legacy-rocm-build#5696: a leftover override makes the gfx1151 report gfx1201.
    two = ("  Name:   gfx1201\n  Marketing Name:   AMD Radeon AI PRO R9700\n"
           "  Name:   gfx1201\n  Marketing Name:   Radeon 8060S Graphics\n")
    raw = {"host": LINUX, "rocminfo": two, "env_vars": {"HSA_OVERRIDE_GFX_VERSION": "12.0.1"}}
    f = _findings(raw)["rocm.override-all-gpus"]
    assert f.severity == "warning" and f.fix.startswith("unset HSA_OVERRIDE_GFX_VERSION")
    one = dict(raw, rocminfo="  Name:   gfx1031\n  Marketing Name:   RX 6700 XT\n")
    assert "rocm.override-all-gpus" not in _findings(one)  # the override's intended use


def test_rocminfo_permission_error_and_a_cuda_torch_on_an_amd_gpu() -> None:
    denied = {"host": LINUX, "rocminfo": "ROCk module is loaded\nUnable to open /dev/kfd "
              "read-write: Permission denied\n", "distributions": {"torch": "2.9.1+rocm6.4"},
              "frameworks": {"torch": _torch("2.9.1+rocm6.4", rocm=True, arch=ROCM61)}}
    f = _findings(denied)["rocm.kfd-permission"]
    assert f.severity == "error" and "render" in f.fix
    cuda = {"host": dict(LINUX, python_version="3.7.16"), "rocminfo": "  Name:   gfx1030\n",
            "distributions": {"torch": "1.13.1"},
            "frameworks": {"torch": _torch("1.13.1", rocm=False, cuda="11.7")}}
    f = _findings(cuda)["rocm.torch-not-rocm"]
    assert "download.pytorch.org/whl/rocm" in f.fix and "Python >= 3.9" in f.fix
    rocm = dict(cuda, distributions={"torch": "2.5.1+rocm6.2"},
                frameworks={"torch": _torch("2.5.1+rocm6.2", rocm=True, gpus=1, arch=ROCM61)})
    found = _findings(rocm)
    assert "rocm.torch-not-rocm" not in found and "rocm.kfd-permission" not in found


def test_wsl_rocm_wheels_and_wsl1() -> None:
    wsl = dict(LINUX, kernel_release="5.15.167.4-microsoft-standard-WSL2")
    raw = {"host": wsl, "rocminfo": "  Name:   gfx1100\n",
           "distributions": {"torch": "2.5.1+rocm6.2"},
           "frameworks": {"torch": _torch("2.5.1+rocm6.2", rocm=True)}}
    f = _findings(raw)["rocm.wsl-wheels"]
    assert "libhsa-runtime64" in f.fix and "repo.radeon.com" in f.fix
    seeing = dict(raw, frameworks={"torch": _torch("2.5.1+rocm6.2", rocm=True, gpus=1)})
    assert "rocm.wsl-wheels" not in _findings(seeing)
    wsl1 = {"host": dict(LINUX, kernel_release="4.4.0-19041-Microsoft"),
            "distributions": {"torch": "2.0.0"},
            "frameworks": {"torch": _torch("2.0.0", rocm=False, cuda="11.7")}}
    f = _findings(wsl1)["host.wsl1"]
    assert f.severity == "error" and "--set-version" in f.fix
    snap = snapshot_from_raw(wsl1)
    assert not snap.host.wsl and snapshot_from_raw(raw).host.wsl  # WSL 1 is not WSL 2
    assert "host.wsl1" not in _findings(raw)


def test_a_cudnn_wheel_of_another_major_than_jaxlib_was_built_for() -> None:
    # jax-ml/jax#20519: jaxlib 0.4.25+cuda12.cudnn89 beside the cuDNN 9.0 wheel.
    raw = {"host": LINUX, "distributions": {"jax": "0.4.25", "jaxlib": "0.4.25+cuda12.cudnn89",
                                            "nvidia-cudnn-cu12": "9.0.0.312"}}
    f = _findings(raw)["build.library-older-than-tag"]
    assert "cuDNN 8.9" in f.title and f.fix.startswith("pip install 'nvidia-cudnn-cu12==8.9.*'")
    fine = dict(raw, distributions=dict(raw["distributions"], **{"nvidia-cudnn-cu12": "8.9.7.29"}))
    assert "build.library-older-than-tag" not in _findings(fine)
    # no wheel: the soname the loader finds stands in (major version only)
    system = {"host": LINUX, "distributions": {"jaxlib": "0.4.7+cuda11.cudnn86"},
              "ldconfig": "\tlibcudnn.so.8 (libc6,x86-64) => /usr/lib/libcudnn.so.8\n"}
    assert "build.library-older-than-tag" not in _findings(system)
    old = dict(system, ldconfig="\tlibcudnn.so.7 (libc6,x86-64) => /usr/lib/libcudnn.so.7\n")
    assert "build.library-older-than-tag" in _findings(old)


def test_an_addon_that_needs_a_newer_keras_than_the_tensorflow_brings() -> None:
    raw = {"host": LINUX, "distributions": {"tensorflow": "2.12.0", "keras": "2.12.0",
                                            "keras-tcn": "3.5.6"}}
    f = next(f for f in run_checks(snapshot_from_raw(raw)) if f.id == "stack.dependency-range"
             and "keras-tcn" in f.title)
    assert "tensorflow>=2.13" in f.fix
    newer = dict(raw, distributions={"tensorflow": "2.15.1", "keras": "2.15.0",
                                     "keras-tcn": "3.5.6"})
    assert not [f for f in run_checks(snapshot_from_raw(newer)) if "keras-tcn" in f.title]
