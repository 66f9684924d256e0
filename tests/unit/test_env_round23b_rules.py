"""Issue 24, round 23: rules written against round22_dev (and the seen sets), each with cases
that must stay silent. CUDA_HOME of another CUDA major than torch's with no builder installed
yet (Era3D#23, MoAI#7, mmcv#3104), arch-list variables without the GPU's compute capability
(nerfstudio#3518), wheels whose +ptXYcuZZZ tag names another torch or beside a source-built
torch (pytorch_scatter#462), conda channel mixes read from conda-meta build strings
(audio#3335, dgl#7438), jax's CUDA wheels newer than the driver while jax sees no GPU
(alphafold3#141), PyPI placeholders of projects with their own index (kaolin 0.1), and more
rows of the pairing and extension tables (flax, numpyro, diffrax, jax 0.6.1 and cuBLAS, dgl,
Open3D). Raw inputs replay through snapshot_from_raw."""

from __future__ import annotations

from tests.unit.env_cases import LINUX, WIN
from tests.unit.env_cases import warned as _ids

SMI = {"header": "| NVIDIA-SMI 535.129.03    Driver Version: 535.129.03    "
                 "CUDA Version: 12.2     |",
       "rows": "0, NVIDIA GeForce RTX 4090, 24564, 8.9"}


def _torch(version: str, cuda: str | None = "11.8", gpu: bool = True) -> dict:
    devices = [{"name": "cpu", "kind": "CPU", "description": "cpu"}]
    if gpu:
        devices.append({"name": "cuda:0", "kind": "GPU", "description": "NVIDIA RTX 4090"})
    return {"torch": {"status": "ok", "stderr": "", "result": {
        "name": "torch", "status": "ok", "version": version, "physical_devices": devices,
        "logical_devices": [d["name"] for d in devices], "build": {
            "is_cuda_build": cuda is not None, "cuda_version": cuda, "is_rocm_build": False,
            "arch_list": ["sm_80", "sm_86", "sm_89", "sm_90"]}, "extra": {}}}}


def _jax(gpu: bool) -> dict:
    devices = [{"name": "cuda:0" if gpu else "cpu:0", "kind": "GPU" if gpu else "CPU",
                "description": "gpu" if gpu else "cpu"}]
    return {"jax": {"status": "ok", "stderr": "", "result": {
        "name": "jax", "status": "ok", "version": "0.4.34", "physical_devices": devices,
        "logical_devices": [devices[0]["name"]],
        "build": {"default_backend": "gpu" if gpu else "cpu"}, "extra": {}}}}


def _doc(host: dict, dists: dict, frameworks: dict | None = None, **extra) -> dict:
    doc = {"host": host, "distributions": {"numpy": "1.26.4", **dists},
           "frameworks": frameworks or {}}
    doc.update(extra)
    return doc


def _torch_gpu(dists: dict, env: dict | None = None, torch: str = "2.1.2+cu118",
               cuda: str = "11.8", **extra) -> dict:
    return _doc(LINUX, {"torch": torch.split("+")[0], **dists}, _torch(torch, cuda),
                nvidia_smi=SMI, env_vars=env or {}, **extra)


# -- CUDA_HOME of another CUDA major, no builder installed yet -----------------------------

def test_cuda_home_of_another_major_names_both_releases() -> None:
    doc = _torch_gpu({}, {"CUDA_HOME": "/usr/local/cuda-12.0"})
    f = _ids(doc)["cuda.cuda-home-major-mismatch"]
    assert f.severity == "warning" and "12.0" in f.title and "11.8" in f.title
    assert "cu121" in f.fix and "CUDA_HOME=/usr/local/cuda-11.8" in f.fix


def test_cuda_home_of_the_same_major_or_unset_or_windows_stays_silent() -> None:
    for env in ({"CUDA_HOME": "/usr/local/cuda-11.7"}, {}, {"CUDA_HOME": "/usr/local/cuda"},
                {"CUDA_PATH": "/usr/local/cuda-12.0"}):
        assert "cuda.cuda-home-major-mismatch" not in _ids(_torch_gpu({}, env))
    win = _doc(WIN, {"torch": "2.1.2"}, _torch("2.1.2+cu118"), nvidia_smi=SMI,
               env_vars={"CUDA_HOME": "C:\\CUDA\\cuda-12.0"})
    assert "cuda.cuda-home-major-mismatch" not in _ids(win)
    cpu = _doc(LINUX, {"torch": "2.1.2"}, _torch("2.1.2+cpu", None, gpu=False),
               env_vars={"CUDA_HOME": "/usr/local/cuda-12.0"})
    assert "cuda.cuda-home-major-mismatch" not in _ids(cpu)


def test_with_a_known_builder_the_older_rule_speaks_once() -> None:
    found = _ids(_torch_gpu({"apex": "0.1"}, {"CUDA_HOME": "/usr/local/cuda-12.0"}))
    assert "cuda.extension-toolkit-major" in found
    assert "cuda.cuda-home-major-mismatch" not in found


# -- arch lists without this GPU -----------------------------------------------------------

def test_arch_list_without_the_gpu_names_the_variable_and_the_capability() -> None:
    f = _ids(_torch_gpu({"gsplat": "1.4.0"}, {"CUDA_ARCHITECTURES": "86;80;75"}))[
        "build.arch-list-excludes-gpu"]
    assert "8.9" in f.title and "gsplat" in f.title
    assert 'CUDA_ARCHITECTURES="75;80;86;89"' in f.fix


def test_arch_lists_that_hold_the_gpu_or_no_builder_stay_silent() -> None:
    for dists, env in (({"gsplat": "1.4.0"}, {"TORCH_CUDA_ARCH_LIST": "8.6;8.9+PTX"}),
                       ({"gsplat": "1.4.0"}, {"TORCH_CUDA_ARCH_LIST": "all"}),
                       ({"gsplat": "1.4.0"}, {}),
                       ({}, {"CUDA_ARCHITECTURES": "86"})):
        assert "build.arch-list-excludes-gpu" not in _ids(_torch_gpu(dists, env))


# -- wheels tagged for one torch -----------------------------------------------------------

def test_pyg_wheel_beside_a_source_built_torch_says_build_from_source() -> None:
    doc = _torch_gpu({"torch-scatter": "2.1.2+pt24cu124"}, torch="2.4.0a0+07cecf4168",
                     cuda="12.4")
    f = _ids(doc)["extension.local-tag-other-torch"]
    assert "2.4.0a0" in f.title and "from source" in f.fix


def test_pyg_wheel_for_another_torch_names_the_installed_release() -> None:
    doc = _torch_gpu({"torch-scatter": "2.1.2+pt21cu118"}, torch="2.3.1+cu118")
    f = _ids(doc)["extension.local-tag-other-torch"]
    assert "torch 2.1" in f.title and "torch-2.3.0" in f.fix


def test_pyg_wheel_for_this_official_torch_stays_silent() -> None:
    for torch in ("2.4.0+cu124", "2.4.1"):
        doc = _torch_gpu({"torch-scatter": "2.1.2+pt24cu124"}, torch=torch, cuda="12.4")
        assert "extension.local-tag-other-torch" not in _ids(doc)


# -- conda channel mixes -------------------------------------------------------------------

def _conda(records: list[str]) -> dict:
    host = {**LINUX, "conda_env": True, "python_prefix": "/home/u/miniconda3/envs/a"}
    return _doc(host, {"torch": "1.13.1", "torchaudio": "0.13.1"},
                _torch("1.13.1", None, gpu=False), conda_meta_listing=records + ["history"])


def test_defaults_pytorch_beside_pytorch_channel_torchaudio() -> None:
    f = _ids(_conda(["pytorch-1.13.1-cpu_py38h92724a6_0.json",
                     "torchaudio-0.13.1-py38_cpu.json"]))["conda.channel-mix"]
    assert "torchaudio" in f.title and "-c pytorch" in f.fix


def test_one_channel_stays_silent() -> None:
    for records in (["pytorch-1.13.1-py3.8_cpu_0.json", "torchaudio-0.13.1-py38_cpu.json"],
                    ["pytorch-1.13.1-cpu_py38h92724a6_0.json",
                     "torchaudio-0.13.1-cpu_py38h1234567_1.json"],
                    ["pytorch-1.13.1-cpu_py38h92724a6_0.json"]):
        assert "conda.channel-mix" not in _ids(_conda(records))


# -- jax's CUDA wheels newer than the driver -----------------------------------------------

def _jax_doc(runtime: str, gpu: bool) -> dict:
    return _doc({**LINUX, "in_container": True},
                {"jax": "0.4.34", "jaxlib": "0.4.34", "jax-cuda12-plugin": "0.4.34",
                 "nvidia-cuda-runtime-cu12": runtime}, _jax(gpu), nvidia_smi=SMI)


def test_jax_wheels_newer_than_the_driver_while_jax_sees_no_gpu() -> None:
    f = _ids(_jax_doc("12.6.77", gpu=False))["jax.cuda-newer-than-driver"]
    assert "12.6" in f.title and "driver" in f.fix


def test_jax_wheels_the_driver_supports_or_a_gpu_seen_stay_silent() -> None:
    assert "jax.cuda-newer-than-driver" not in _ids(_jax_doc("12.2.140", gpu=False))
    assert "jax.cuda-newer-than-driver" not in _ids(_jax_doc("12.6.77", gpu=True))


# -- placeholders and table rows -----------------------------------------------------------

def test_kaolin_placeholder_names_its_own_index() -> None:
    f = _ids(_torch_gpu({"kaolin": "0.1"}))["install.index-placeholder"]
    assert "torch-2.1.2_cu118" in f.fix
    assert "install.index-placeholder" not in _ids(_torch_gpu({"kaolin": "0.17.0"}))


def _jax_cpu(dists: dict) -> dict:
    return _doc(LINUX, {"jax": "0.4.26", "jaxlib": "0.4.26", **dists}, _jax(False))


def test_new_pairing_rows_and_their_silent_pairs() -> None:
    assert "package.pairing-mismatch" in _ids(_jax_cpu({"flax": "0.7.5"}))
    assert "package.pairing-mismatch" not in _ids(_jax_cpu({"flax": "0.8.2"}))
    old = _doc(LINUX, {"jax": "0.4.23", "flax": "0.7.5"}, _jax(False))
    assert "package.pairing-mismatch" not in _ids(old)
    assert "package.pairing-mismatch" in _ids(_doc(LINUX, {"jax": "0.5.3", "diffrax": "0.5.0"}))
    assert "package.pairing-mismatch" not in _ids(_doc(LINUX, {"jax": "0.5.3",
                                                               "diffrax": "0.7.0"}))
    cublas = {"jax": "0.6.1", "jax-cuda12-plugin": "0.6.1"}
    assert "package.pairing-mismatch" in _ids(_doc(LINUX, {**cublas,
                                                           "nvidia-cublas-cu12": "12.8.4.1"}))
    assert "package.pairing-mismatch" not in _ids(_doc(LINUX, {**cublas,
                                                               "nvidia-cublas-cu12": "12.9.0.13"}))


def test_new_extension_rows_and_os_bound_rows() -> None:
    assert "extension.built-for-other-torch" in _ids(
        _torch_gpu({"dgl": "2.0.0+cu118"}, torch="2.2.1+cu118"))
    assert "extension.built-for-other-torch" not in _ids(
        _torch_gpu({"dgl": "2.0.0+cu118"}, torch="2.1.2+cu118"))
    win = _doc(WIN, {"torch": "2.4.1", "dgl": "2.2.1"}, _torch("2.4.1+cpu", None, gpu=False))
    assert "windows" in _ids(win)["extension.built-for-other-torch"].why.lower()
    linux = _doc(LINUX, {"torch": "2.4.1", "dgl": "2.2.1"}, _torch("2.4.1+cpu", None, gpu=False))
    assert "extension.built-for-other-torch" not in _ids(linux)
    assert "extension.built-for-other-torch" in _ids(
        _torch_gpu({"open3d": "0.15.2"}, torch="2.0.1+cpu"))
