"""Round 10's general mechanisms (issue 24, the eleventh set's dev half): each reads what the
probe records and stays silent where the cause is absent.

* the loader's own "version `GLIBCXX_x' not found" sentence (``[[framework_says]]``
  ``libstdcxx.too-old``): the libstdc++ it took is older than a framework was linked against;
* keras-nightly installs the ``keras`` module: a Keras 3 nightly beside TensorFlow <= 2.15 is
  the same unsupported pair as keras 3 (``keras.keras3-with-old-tf``);
* PyTorch reporting cuDNN 8 on WSL2 where ldconfig caches libcuda.so.1 but no unversioned
  libcuda.so (``[[loader_needs]]`` with ``framework``/``cudnn_major``).
"""

from __future__ import annotations

from devicebench.env.checks import run_checks
from devicebench.env.interpret import snapshot_from_raw

GLIBCXX = ("ImportError: /lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.30' not "
           "found (required by /e/lib/python3.11/site-packages/torch/lib/libtorch_python.so)")


def _host(kernel: str = "6.5.0-41-generic") -> dict:
    return {"system": "Linux", "machine": "x86_64", "python_version": "3.11.9",
            "kernel_release": kernel, "os_release_name": "Ubuntu 22.04.4 LTS"}


def _ids(raw: dict) -> dict[str, object]:
    return {f.id: f for f in run_checks(snapshot_from_raw(raw))}


def test_glibcxx_not_found_names_the_old_libstdcxx_and_the_conda_fix() -> None:
    raw = {"host": _host(), "distributions": {"torch": "2.7.1"},
           "frameworks": {"torch": {"status": "error", "stderr": "", "result": {
               "name": "torch", "status": "error", "error": GLIBCXX}}}}
    f = _ids(raw)["libstdcxx.too-old"]
    assert f.severity == "error"
    assert "GLIBCXX_3.4.30" in f.title and "/lib/x86_64-linux-gnu/libstdc++.so.6" in f.title
    assert "libstdcxx-ng" in f.fix and "libstdc++.so.6" in f.fix


def test_a_glibc_too_old_message_is_not_read_as_libstdcxx() -> None:
    text = ("ImportError: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found "
            "(required by /e/site-packages/jaxlib/xla_extension.so)")
    raw = {"host": _host(), "distributions": {"jax": "0.4.30"},
           "frameworks": {"jax": {"status": "error", "stderr": "", "result": {
               "name": "jax", "status": "error", "error": text}}}}
    assert "libstdcxx.too-old" not in _ids(raw)


def _tf(version: str) -> dict:
    return {"status": "ok", "stderr": "", "result": {
        "name": "tensorflow", "status": "ok", "version": version,
        "physical_devices": [{"name": "/physical_device:CPU:0", "kind": "CPU",
                              "description": "cpu"}],
        "logical_devices": ["/device:CPU:0"],
        "build": {"is_cuda_build": False, "cuda_version": "", "cudnn_version": ""}}}


def test_a_keras3_nightly_beside_tf_214_is_the_unsupported_pair() -> None:
    raw = {"host": _host(), "distributions": {"tensorflow": "2.14.0", "keras": "2.14.0",
                                              "keras-nightly": "3.0.0.dev2023102103"},
           "frameworks": {"tensorflow": _tf("2.14.0")}}
    f = _ids(raw)["keras.keras3-with-old-tf"]
    assert "keras-nightly 3.0.0.dev2023102103" in f.observed


def test_keras_nightly_with_tf_216_or_keras2_alone_stay_silent() -> None:
    ok_new = {"host": _host(), "distributions": {"tensorflow": "2.16.1",
                                                 "keras-nightly": "3.3.0.dev2024050103"},
              "frameworks": {"tensorflow": _tf("2.16.1")}}
    ok_old = {"host": _host(), "distributions": {"tensorflow": "2.14.0", "keras": "2.14.0"},
              "frameworks": {"tensorflow": _tf("2.14.0")}}
    assert "keras.keras3-with-old-tf" not in _ids(ok_new)
    assert "keras.keras3-with-old-tf" not in _ids(ok_old)


def _wsl_torch(cudnn: str, ldconfig: str, env: dict | None = None) -> dict:
    return {"host": _host("5.15.146.1-microsoft-standard-WSL2"),
            "distributions": {"torch": "2.2.1"}, "ldconfig": ldconfig, "env_vars": env or {},
            "frameworks": {"torch": {"status": "ok", "stderr": "", "result": {
                "name": "torch", "status": "ok", "version": "2.2.1",
                "physical_devices": [{"name": "cpu", "kind": "CPU", "description": "cpu"},
                                     {"name": "cuda:0", "kind": "GPU", "description": "GPU",
                                      "compute_capability": "8.6"}],
                "logical_devices": ["cpu", "cuda:0"],
                "build": {"is_cuda_build": True, "cuda_version": "12.1", "cudnn_version": cudnn,
                          "arch_list": ["sm_86"], "mps_built": False},
                "extra": {}}}}}


WSL_CACHE = "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/wsl/lib/libcuda.so.1\n"


def test_torch_with_cudnn8_on_wsl_without_an_unversioned_libcuda_is_warned() -> None:
    found = [f for f in run_checks(snapshot_from_raw(_wsl_torch("8902", WSL_CACHE)))
             if f.id == "cuda.loader-cannot-find"]
    assert len(found) == 1 and "libcuda.so" in found[0].title
    assert "PyTorch 2.2.1 (its cuDNN 8)" in found[0].title
    assert "/usr/lib/wsl/lib" in found[0].fix


def test_cudnn9_a_cached_libcuda_so_or_an_unread_cache_stay_silent() -> None:
    cached = WSL_CACHE + "\tlibcuda.so (libc6,x86-64) => /usr/lib/wsl/lib/libcuda.so\n"
    for raw in (_wsl_torch("90100", WSL_CACHE), _wsl_torch("8902", cached),
                _wsl_torch("8902", "")):
        assert "cuda.loader-cannot-find" not in {f.id for f in run_checks(snapshot_from_raw(raw))}
