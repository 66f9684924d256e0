"""Doctor's round-2 mechanisms (issue 24) on small raw snapshots: jax/jaxlib release skew,
torch/torchvision pairing, libraries loaded by name from the loader's path, Keras-2 add-ons
that import Keras 2's internals, and cuDNN fixes for the build's CUDA major."""

from __future__ import annotations

from devicebench.env.checks import run_checks
from devicebench.env.interpret import snapshot_from_raw
from devicebench.env.messages import reported_facts

LINUX = {"system": "Linux", "machine": "x86_64", "python_version": "3.11.9",
         "os_release_name": "Ubuntu 22.04.4 LTS", "kernel_release": "6.5.0-41-generic",
         "python_prefix": "/home/u/venv", "python_executable": "/home/u/venv/bin/python"}


def findings(**raw):
    raw.setdefault("host", LINUX)
    raw.setdefault("frameworks", {})
    return {f.id: f for f in run_checks(snapshot_from_raw(raw))}


def test_jax_says_which_jaxlib_it_needs() -> None:
    assert reported_facts("RuntimeError: jaxlib is version 0.3.25, but this version of jax "
                          "requires version >= 0.4.19.")["jaxlib_skew"] == {
        "jaxlib": "0.3.25", "jax_needs": "0.4.19"}
    assert reported_facts("jaxlib version 0.4.14 is newer than and incompatible with jax "
                          "version 0.4.6.")["jaxlib_skew"] == {"jaxlib": "0.4.14", "jax": "0.4.6"}


def test_jaxlib_newer_than_jax_is_skew_even_without_the_message() -> None:
    f = findings(distributions={"jax": "0.4.6", "jaxlib": "0.4.14"})["stack.release-skew"]
    assert f.severity == "error" and f.fix.startswith("pip install 'jax==0.4.14'")
    same = findings(distributions={"jax": "0.4.30", "jaxlib": "0.4.30"})
    assert "stack.release-skew" not in same
    # an older jaxlib is allowed down to jax's minimum: only JAX's own check tells
    assert "stack.release-skew" not in findings(distributions={"jax": "0.4.30", "jaxlib": "0.4.28"})
    error = {"status": "ok", "stderr": "", "result": {"name": "jax", "status": "error", "error":
             "RuntimeError: jaxlib is version 0.4.20, but this version of jax requires version "
             ">= 0.4.27."}}
    older = findings(distributions={"jax": "0.4.30", "jaxlib": "0.4.20",
                                    "jax-cuda12-plugin": "0.4.20"},
                     frameworks={"jax": error})["stack.release-skew"]
    assert "'jaxlib==0.4.30'" in older.fix and "'jax-cuda12-plugin==0.4.30'" in older.fix


def test_torchvision_must_be_built_for_the_installed_torch() -> None:
    f = findings(distributions={"torch": "2.4.0+cu121", "torchvision": "0.20.1+cu124"})[
        "stack.release-skew"]
    assert "'torchvision==0.19.*'" in f.fix and "whl/cu121" in f.fix
    ok = findings(distributions={"torch": "2.5.1+cu124", "torchvision": "0.20.1+cu124"})
    assert "stack.release-skew" not in ok


def test_a_library_loaded_by_name_must_be_on_the_loader_path() -> None:
    wheel = {"/home/u/venv/lib/python3.11/site-packages/nvidia/cudnn/lib":
             ["libcudnn_ops_infer.so.8"],
             "/home/u/venv/lib/python3.11/site-packages/nvidia/cublas/lib": ["libcublas.so.11"]}
    f = findings(distributions={"ctranslate2": "3.24.0"}, wheel_lib_listing=wheel)[
        "cuda.loader-cannot-find"]
    assert f.severity == "warning" and "nvidia/cudnn/lib" in f.fix
    assert f.fix.startswith("export LD_LIBRARY_PATH=")
    ld = "\n".join(f"\t{n} (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/{n}"
                   for n in ("libcublas.so.11", "libcudnn_ops_infer.so.8"))
    assert "cuda.loader-cannot-find" not in findings(distributions={"ctranslate2": "3.24.0"},
                                                     ldconfig=ld)
    assert "cuda.loader-cannot-find" not in findings(distributions={"ctranslate2": "4.5.0"},
                                                     ldconfig=ld.replace(".so.11", ".so.12")
                                                     .replace("ops_infer.so.8", "ops.so.9"))


def test_cudnn8_on_wsl2_needs_the_unversioned_libcuda() -> None:
    wsl = dict(LINUX, kernel_release="5.15.153.1-microsoft-standard-WSL2")
    wheel = {"/home/u/venv/lib/python3.11/site-packages/nvidia/cudnn/lib":
             ["libcudnn.so.8", "libcudnn_cnn_infer.so.8"]}
    ld = "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/wsl/lib/libcuda.so.1\n"
    f = findings(host=wsl, wheel_lib_listing=wheel, ldconfig=ld)["cuda.loader-cannot-find"]
    assert "libcuda.so" in f.title and "/usr/lib/wsl/lib" in f.fix
    assert "cuda.loader-cannot-find" not in findings(wheel_lib_listing=wheel, ldconfig=ld)


def test_addon_needing_keras2_internals_is_told_to_pin_or_upgrade() -> None:
    old = findings(distributions={"tensorflow": "2.16.1", "keras": "3.1.1",
                                  "mediapipe-model-maker": "0.2.1.3"})
    f = old["keras.keras2-addon-on-keras3"]
    assert "'mediapipe-model-maker>=0.2.1.4'" in f.fix and "'tensorflow<2.16' 'keras<3'" in f.fix
    fixed = findings(distributions={"tensorflow": "2.16.1", "keras": "3.1.1",
                                    "mediapipe-model-maker": "0.2.1.4"})
    assert "keras.keras2-addon-on-keras3" not in fixed
    legacy = findings(distributions={"tensorflow": "2.16.1", "keras": "3.1.1", "tf-keras": "2.16.0",
                                     "mediapipe-model-maker": "0.2.1.3"},
                      env_vars={"TF_USE_LEGACY_KERAS": "1"})  # does not reach `import keras`
    assert "keras.keras2-addon-on-keras3" in legacy


def test_cudnn_fix_names_the_wheel_of_the_builds_cuda_major() -> None:
    said = ("E cuda_dnn.cc:439] Loaded runtime CuDNN library: 8.5.0 but source was compiled "
            "with: 8.6.0.  CuDNN library needs ...\n")
    jax = {"status": "ok", "stderr": said, "result": {
        "name": "jax", "status": "ok", "version": "0.4.14",
        "physical_devices": [{"name": "cuda:0", "kind": "GPU", "description": "cuda"}],
        "logical_devices": ["cuda:0"], "build": {"default_backend": "cuda"}, "extra": {}}}
    f = findings(distributions={"jax": "0.4.14", "jaxlib": "0.4.14+cuda11.cudnn86"},
                 frameworks={"jax": jax})["cudnn.loaded-older-than-built"]
    assert "'nvidia-cudnn-cu11>=8.6.0,<9'" in f.fix
