"""Issue 24, round 22 step 0: round20_heldout's misses written as general rules, each with
cases that must stay silent. Windows' path limit in the forms an install's OSError takes
without WinError 206 (light-the-torch#176), the Triton release each torch release pairs with
(comfyui_HiDream-Sampler#7), Triton's "libcuda.so cannot found" read as libcuda outside the
loader's cache (pytorch#113521), bitsandbytes' CUDA SETUP lines (bitsandbytes#934), jax 0.4 on
Colab's TPU Node runtime (jax#8472) and the first framework release without Intel-Mac wheels
named in the ceiling's title (tensorflow#75279). Raw inputs replay through snapshot_from_raw."""

from __future__ import annotations

from devicebench.env.checks import run_checks
from devicebench.env.interpret import snapshot_from_raw
from tests.unit.env_cases import warned as _ids

LINUX = {"system": "Linux", "machine": "x86_64", "python_version": "3.10.12",
         "python_implementation": "CPython", "conda_env": False, "python_prefix": "/usr",
         "os_release_name": "Ubuntu 22.04.3 LTS", "kernel_release": "6.1.58+"}
WIN = {"system": "Windows", "machine": "AMD64", "python_version": "3.12.6",
       "python_implementation": "CPython", "platform": "Windows-10-10.0.22631-SP0",
       "python_prefix": "C:\\Users\\u\\proj\\.venv", "conda_env": False}
INTEL_MAC = {"system": "Darwin", "machine": "x86_64", "python_version": "3.11.9",
             "python_implementation": "CPython", "mac_ver": "14.6.1", "proc_translated": None,
             "cpu_brand": "Intel(R) Core(TM) i9-9980HK", "python_prefix": "/Users/u/venv",
             "conda_env": False}


def _torch(version: str = "2.6.0+cu124", *, stderr: str = "", error: str = "",
           extra: dict | None = None, cuda: bool = True) -> dict:
    devices = [{"name": "cpu", "kind": "CPU", "description": "cpu"}]
    if cuda:
        devices.append({"name": "cuda:0", "kind": "GPU", "description": "GPU"})
    if error:
        return {"status": "error", "stderr": stderr,
                "result": {"name": "torch", "status": "error", "error": error}}
    return {"status": "ok", "stderr": stderr, "result": {
        "name": "torch", "status": "ok", "version": version, "physical_devices": devices,
        "logical_devices": [d["name"] for d in devices], "build": {
            "is_cuda_build": cuda, "cuda_version": "12.4" if cuda else "",
            "is_rocm_build": False, "arch_list": []}, "extra": extra or {}}}


def _doc(host: dict, dists: dict, frameworks: dict | None = None, **extra) -> dict:
    doc = {"host": host, "distributions": {"numpy": "1.26.4", **dists},
           "frameworks": frameworks or {}}
    doc.update(extra)
    return doc


# -- Windows' path limit without WinError 206 ------------------------------------------------

LICENCE = ("ERROR: Could not install packages due to an OSError: [Errno 2] No such file or "
           "directory: 'C:\\\\Users\\\\u\\\\env\\\\Lib\\\\site-packages\\\\torch-2.13.0.dist-info"
           "\\\\licenses\\\\third_party\\\\x\\\\LICENSE'")
LONG = ("OSError: [Errno 2] No such file or directory: 'C:\\\\" + "deep\\\\" * 45 + "f.h'")


def test_an_oserror_in_a_dist_info_licence_tree_on_windows_is_the_path_limit() -> None:
    f = _ids(_doc(WIN, {}, {"torch": _torch(error=LICENCE)}))["windows.path-too-long-likely"]
    assert f.severity == "error" and "LongPathsEnabled" in f.fix and "path" in f.title


def test_an_oserror_on_a_quoted_path_past_260_characters_is_the_path_limit() -> None:
    assert "windows.path-too-long-likely" in _ids(_doc(WIN, {}, {"torch": _torch(error=LONG)}))


def test_the_path_limit_rows_stay_silent_elsewhere() -> None:
    short = "OSError: [Errno 2] No such file or directory: 'C:\\\\v\\\\Lib\\\\x.py'"
    assert "windows.path-too-long-likely" not in _ids(_doc(WIN, {}, {"torch": _torch(error=short)}))
    # the same licence-tree error on Linux is not Windows' limit
    linux = _doc(LINUX, {}, {"torch": _torch(error=LICENCE)})
    assert "windows.path-too-long-likely" not in _ids(linux)
    # WinError 206 itself is the older row's; the new one does not repeat it
    both = LICENCE + " [WinError 206] The filename or extension is too long"
    found = _ids(_doc(WIN, {}, {"torch": _torch(error=both)}))
    assert "windows.path-too-long" in found and "windows.path-too-long-likely" not in found


# -- the Triton release each torch release pairs with ----------------------------------------

def test_an_older_triton_beside_torch_2_6_on_windows() -> None:
    f = _ids(_doc(WIN, {"torch": "2.6.0+cu124", "triton": "3.1.0"},
                  {"torch": _torch()}))["torch.triton-mismatch"]
    assert f.severity == "warning" and "3.2" in f.title
    assert 'triton-windows<3.3' in f.fix and "pip uninstall -y triton" in f.fix


def test_a_mismatched_triton_on_linux_names_torchs_pin() -> None:
    f = _ids(_doc(LINUX, {"torch": "2.5.1", "triton": "3.2.0"},
                  {"torch": _torch("2.5.1+cu124")}))["torch.triton-mismatch"]
    assert 'triton==3.1.*' in f.fix


def test_the_triton_pairing_stays_silent() -> None:
    for host, dists, version in (
            (WIN, {"torch": "2.6.0+cu124", "triton-windows": "3.2.0.post19"}, "2.6.0+cu124"),
            (LINUX, {"torch": "2.9.0", "triton": "3.5.0"}, "2.9.0+cu128"),
            (LINUX, {"torch": "2.6.0.dev20241201", "pytorch-triton": "3.2.0"},
             "2.6.0.dev20241201+cu124"),            # a nightly: pytorch-triton's builds
            (WIN, {"torch": "2.5.1+cu124", "triton-windows": "3.2.0"}, "2.5.1+cu124"),  # not read
            (LINUX, {"torch": "2.11.0", "triton": "3.6.0"}, "2.11.0+cu128")):  # no pair read
        assert "torch.triton-mismatch" not in _ids(_doc(host, dists, {"torch": _torch(version)}))
    cpu = _doc(LINUX, {"torch": "2.6.0", "triton": "3.1.0"},
               {"torch": _torch("2.6.0+cpu", cuda=False)})
    assert "torch.triton-mismatch" not in _ids(cpu)


# -- Triton's "libcuda.so cannot found" ---------------------------------------------------------

def _colab(error: str) -> dict:
    return _doc(LINUX, {"torch": "2.1.0", "triton": "2.1.0"},
                {"torch": _torch("2.1.0+cu121", extra={"compile_error": error})},
                env_vars={"LD_LIBRARY_PATH": "/usr/lib64-nvidia"},
                ld_path_listing={"/usr/lib64-nvidia": ["libcuda.so", "libcuda.so.1"]},
                ldconfig="\tlibcudart.so.12 (libc6,x86-64) => /usr/local/cuda/libcudart.so.12\n")


def test_triton_not_finding_libcuda_names_the_directory_to_add() -> None:
    f = _ids(_colab("AssertionError: libcuda.so cannot found!"))[
        "triton.libcuda-not-in-loader-cache"]
    assert f.severity == "warning" and "sudo ldconfig /usr/lib64-nvidia" in f.fix
    assert "no libcuda.so.1" in f.observed and "libcuda" in f.title


def test_triton_libcuda_stays_silent_without_its_line() -> None:
    assert "triton.libcuda-not-in-loader-cache" not in _ids(_colab("RuntimeError: other"))


# -- bitsandbytes' CUDA SETUP lines ----------------------------------------------------------

SETUP = ("CUDA SETUP: Detected CUDA version 122\nCUDA SETUP: Required library version not found: "
         "libbitsandbytes_cuda122_nocublaslt.so. Maybe you need to compile it from source?\n")


def test_bitsandbytes_missing_library_for_its_detected_cuda() -> None:
    f = _ids(_doc(LINUX, {"torch": "2.1.0", "bitsandbytes": "0.40.2"},
                  {"torch": _torch("2.1.0+cu121", stderr=SETUP)}))[
        "bitsandbytes.no-library-for-cuda"]
    assert "libbitsandbytes_cuda122_nocublaslt.so" in f.title and "122" in f.why
    assert "pip install -U bitsandbytes" in f.fix


def test_bitsandbytes_setup_lines_that_found_their_library_stay_silent() -> None:
    ok = ("CUDA SETUP: Detected CUDA version 121\n"
          "CUDA SETUP: Loading binary libbitsandbytes_cuda121.so...\n")
    found = _ids(_doc(LINUX, {"torch": "2.1.0", "bitsandbytes": "0.40.2"},
                      {"torch": _torch("2.1.0+cu121", stderr=ok)}))
    assert "bitsandbytes.no-library-for-cuda" not in found


# -- jax 0.4 on Colab's TPU Node -------------------------------------------------------------

def _jax(version: str, kind: str = "CPU") -> dict:
    return {"status": "ok", "stderr": "", "result": {
        "name": "jax", "status": "ok", "version": version,
        "physical_devices": [{"name": f"{kind}_0", "kind": kind, "description": kind.lower()}],
        "logical_devices": [f"{kind}_0"], "build": {"default_backend": kind.lower()}, "extra": {}}}


def test_jax_0_4_on_a_colab_tpu_node_falls_back_to_the_cpu() -> None:
    f = _ids(_doc(LINUX, {"jax": "0.4.6", "jaxlib": "0.4.6"}, {"jax": _jax("0.4.6")},
                  env_vars={"COLAB_TPU_ADDR": "10.0.0.2:8470"}))["jax.tpu-node-unsupported"]
    assert "0.3.25" in f.fix and "TPU VM" in f.fix and "TPU" in f.title


def test_the_tpu_node_rule_stays_silent() -> None:
    env = {"COLAB_TPU_ADDR": "10.0.0.2:8470"}
    for doc in (_doc(LINUX, {"jax": "0.3.25", "jaxlib": "0.3.25"}, {"jax": _jax("0.3.25")},
                     env_vars=env),
                _doc(LINUX, {"jax": "0.4.6", "jaxlib": "0.4.6"}, {"jax": _jax("0.4.6", "TPU")},
                     env_vars=env),
                _doc(LINUX, {"jax": "0.4.6", "jaxlib": "0.4.6"}, {"jax": _jax("0.4.6")})):
        assert "jax.tpu-node-unsupported" not in _ids(doc)


# -- the ceiling names the first release without wheels --------------------------------------

def test_the_intel_mac_ceiling_names_the_first_release_without_wheels() -> None:
    titles = [f.title for f in run_checks(snapshot_from_raw(_doc(INTEL_MAC, {})))
              if f.id == "platform.last-release"]
    assert any("after 2.16.2: 2.17 and later have none" in t for t in titles)
    assert any("after 2.2.2: 2.3 and later have none" in t for t in titles)
