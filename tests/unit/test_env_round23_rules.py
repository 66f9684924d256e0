"""Issue 24, round 23 step 0: round21_heldout's misses written as general rules, each with
cases that must stay silent. Libraries that must match each other's releases (peft and
transformers, LLaVA#1794; trl and transformers, DataDreamer#20; diffusers and huggingface_hub,
easydiffusion#1851), more extensions built for one torch (vllm 0.3.x, vllm#3147;
autoawq-kernels, AutoAWQ#466), jax's CUDA plugin on a host without an NVIDIA GPU (jax#23208)
and bitsandbytes before its Windows wheels (bitsandbytes#914). Raw inputs replay through
snapshot_from_raw."""

from __future__ import annotations

from tests.unit.env_cases import LINUX, WIN
from tests.unit.env_cases import warned as _ids

SMI = {"header": "| NVIDIA-SMI 535.129.03    Driver Version: 535.129.03    "
                 "CUDA Version: 12.2     |",
       "rows": "0, NVIDIA A100-SXM4-80GB, 81920, 8.0"}


def _torch(version: str) -> dict:
    devices = [{"name": "cpu", "kind": "CPU", "description": "cpu"},
               {"name": "cuda:0", "kind": "GPU", "description": "NVIDIA A100-SXM4-80GB"}]
    return {"torch": {"status": "ok", "stderr": "", "result": {
        "name": "torch", "status": "ok", "version": version, "physical_devices": devices,
        "logical_devices": ["cpu", "cuda:0"], "build": {
            "is_cuda_build": True, "cuda_version": "12.1", "is_rocm_build": False,
            "arch_list": ["sm_80", "sm_86", "sm_90"]}, "extra": {}}}}


def _doc(host: dict, dists: dict, frameworks: dict | None = None, **extra) -> dict:
    doc = {"host": host, "distributions": {"numpy": "1.26.4", **dists},
           "frameworks": frameworks or {}}
    doc.update(extra)
    return doc


def _gpu(dists: dict) -> dict:
    return _doc(LINUX, {"torch": "2.1.2", **dists}, _torch("2.1.2+cu121"), nvidia_smi=SMI)


# -- libraries that must match each other's releases ---------------------------------------

def test_peft_0_14_beside_transformers_before_4_42_names_peft_0_13_2() -> None:
    f = _ids(_gpu({"peft": "0.14.0", "transformers": "4.37.2"}))["package.pairing-mismatch"]
    assert f.severity == "warning" and "EncoderDecoderCache" in f.why
    assert "peft==0.13.2" in f.fix


def test_peft_pairings_that_import_stay_silent() -> None:
    for dists in ({"peft": "0.13.2", "transformers": "4.37.2"},
                  {"peft": "0.14.0", "transformers": "4.46.3"}, {"peft": "0.14.0"}):
        assert "package.pairing-mismatch" not in _ids(_gpu(dists))


def test_trl_before_0_8_1_beside_transformers_4_39_names_both_ways_out() -> None:
    f = _ids(_gpu({"trl": "0.7.6", "transformers": "4.39.1"}))["package.pairing-mismatch"]
    assert "top_k_top_p_filtering" in f.why and "trl>=0.8.1" in f.fix
    assert "transformers<4.39" in f.fix


def test_trl_pairings_that_import_stay_silent() -> None:
    for dists in ({"trl": "0.8.1", "transformers": "4.39.1"},
                  {"trl": "0.7.6", "transformers": "4.38.2"}):
        assert "package.pairing-mismatch" not in _ids(_gpu(dists))


def test_diffusers_before_0_29_beside_huggingface_hub_0_26() -> None:
    f = _ids(_gpu({"diffusers": "0.28.2", "huggingface-hub": "0.26.1"}))[
        "package.pairing-mismatch"]
    assert "cached_download" in f.why and "diffusers>=0.29.0" in f.fix
    assert "huggingface_hub<0.26" in f.fix


def test_diffusers_pairings_that_import_stay_silent() -> None:
    for dists in ({"diffusers": "0.29.0", "huggingface-hub": "0.26.1"},
                  {"diffusers": "0.28.2", "huggingface-hub": "0.25.2"}):
        assert "package.pairing-mismatch" not in _ids(_gpu(dists))


# -- extensions built for one torch -----------------------------------------------------------

def test_vllm_0_3_beside_torch_2_2_names_torch_2_1_2() -> None:
    doc = _doc(LINUX, {"vllm": "0.3.2", "torch": "2.2.1"}, _torch("2.2.1+cu121"), nvidia_smi=SMI)
    f = _ids(doc)["extension.built-for-other-torch"]
    assert "vllm 0.3.2" in f.title and "torch==2.1.2" in f.fix


def test_vllm_0_3_beside_torch_2_1_stays_silent() -> None:
    doc = _doc(LINUX, {"vllm": "0.3.3", "torch": "2.1.2"}, _torch("2.1.2+cu121"), nvidia_smi=SMI)
    assert "extension.built-for-other-torch" not in _ids(doc)


def test_autoawq_kernels_built_for_torch_2_2_beside_torch_2_3() -> None:
    doc = _doc(LINUX, {"autoawq": "0.2.4", "autoawq-kernels": "0.0.6", "torch": "2.3.0"},
               _torch("2.3.0+cu121"), nvidia_smi=SMI)
    f = _ids(doc)["extension.built-for-other-torch"]
    assert "torch==2.2.0" in f.fix and "0.0.7" in f.fix and "from source" in f.fix


def test_autoawq_kernels_on_their_own_torch_stay_silent() -> None:
    for kernels, torch in (("0.0.6", "2.2.0"), ("0.0.7", "2.3.1"), ("0.0.9", "2.6.0")):
        doc = _doc(LINUX, {"autoawq-kernels": kernels, "torch": torch},
                   _torch(f"{torch}+cu121"), nvidia_smi=SMI)
        assert "extension.built-for-other-torch" not in _ids(doc)


# -- jax's CUDA plugin on a host without an NVIDIA GPU ---------------------------------------

JAX_CUDA = {"jax": "0.4.30", "jaxlib": "0.4.30", "jax-cuda12-plugin": "0.4.30",
            "jax-cuda12-pjrt": "0.4.30"}


def test_jax_0_4_30_cuda_plugin_without_a_gpu_names_the_plugin_and_the_ways_out() -> None:
    f = _ids(_doc(LINUX, JAX_CUDA))["jax.cuda-plugin-without-gpu"]
    assert f.severity == "warning" and "jax-cuda12-plugin" in f.title
    assert "JAX_PLATFORMS=cpu" in f.fix and "uninstall" in f.fix and "0.4.31" in f.fix


def test_jax_cuda_plugin_stays_silent_with_a_gpu_a_fixed_jax_or_jax_platforms_cpu() -> None:
    assert "jax.cuda-plugin-without-gpu" not in _ids(_doc(LINUX, JAX_CUDA, nvidia_smi=SMI))
    fixed = {k: "0.4.31" for k in JAX_CUDA}
    assert "jax.cuda-plugin-without-gpu" not in _ids(_doc(LINUX, fixed))
    cpu = _doc(LINUX, JAX_CUDA, env_vars={"JAX_PLATFORMS": "cpu"})
    assert "jax.cuda-plugin-without-gpu" not in _ids(cpu)
    plain = {"jax": "0.4.30", "jaxlib": "0.4.30"}
    assert "jax.cuda-plugin-without-gpu" not in _ids(_doc(LINUX, plain))


# -- bitsandbytes before its Windows wheels -------------------------------------------------

def test_bitsandbytes_before_0_43_on_windows_names_0_43() -> None:
    doc = _doc(WIN, {"bitsandbytes": "0.41.3.post2", "torch": "2.1.1+cu121"}, nvidia_smi=SMI)
    f = _ids(doc)["bitsandbytes.no-windows-support"]
    assert "bitsandbytes>=0.43.0" in f.fix


def test_bitsandbytes_on_windows_from_0_43_or_on_linux_stays_silent() -> None:
    new = _doc(WIN, {"bitsandbytes": "0.43.1", "torch": "2.1.1+cu121"}, nvidia_smi=SMI)
    assert "bitsandbytes.no-windows-support" not in _ids(new)
    linux = _doc(LINUX, {"bitsandbytes": "0.41.3.post2", "torch": "2.1.1"}, nvidia_smi=SMI)
    assert "bitsandbytes.no-windows-support" not in _ids(linux)
