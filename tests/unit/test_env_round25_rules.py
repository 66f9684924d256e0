"""Issue 24, round 25 step 0: round23_heldout's misses written as general rules, each with cases
that must stay silent. Slurm task layouts (jax#23452, mace#435, jax#16788, jax#30073), a driver
branch a package is not validated with (IsaacLab#7139), conda's CUDA plugin beside a CPU pytorch
(openmm-torch#94), cudf-cu12 26.2 and nvJitLink 12.9 (rapidsai/deployment#729) and pairing rows
(mace 0.3.10 / cuequivariance 0.2, nemo_toolkit 2.0.0 / NumPy 2, RAPIDS 24.10 / cuda-python
11.8.4: mace#827, NeMo Speech#11508, cugraph#4745). Raw inputs replay through snapshot_from_raw."""

from __future__ import annotations

from tests.unit.env_cases import warned as _ids

LINUX = {"system": "Linux", "machine": "x86_64", "python_version": "3.10.12",
         "python_implementation": "CPython", "conda_env": False, "python_prefix": "/usr",
         "os_release_name": "Ubuntu 22.04.4 LTS", "kernel_release": "5.15.0-101-generic"}
SMI = {"header": "| NVIDIA-SMI 535.104.05    Driver Version: 535.104.05    "
                 "CUDA Version: 12.2     |",
       "rows": "0, NVIDIA A100-SXM4-80GB, 81920, 8.0\n1, NVIDIA A100-SXM4-80GB, 81920, 8.0"}


def _doc(dists: dict, env: dict | None = None, host: dict | None = None, **extra) -> dict:
    doc = {"host": host or LINUX, "distributions": {"numpy": "1.26.4", **dists},
           "env_vars": env or {}, "frameworks": {}, "nvidia_smi": SMI}
    doc.update(extra)
    return doc


def test_local_rank_past_the_visible_gpus() -> None:
    env = {"SLURM_JOB_ID": "1", "SLURM_PROCID": "3", "SLURM_LOCALID": "3",
           "SLURM_NTASKS_PER_NODE": "8", "SLURM_GPUS_PER_TASK": "1", "CUDA_VISIBLE_DEVICES": "0"}
    f = _ids(_doc({"torch": "2.3.0"}, env))["slurm.local-rank-past-visible-gpus"]
    assert "CUDA_VISIBLE_DEVICES" in f.title and "--gpus-per-node" in f.fix
    for env2 in ({**env, "SLURM_LOCALID": "0"}, {**env, "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"},
                 {"CUDA_VISIBLE_DEVICES": "0"}):
        assert "slurm.local-rank-past-visible-gpus" not in _ids(_doc({"torch": "2.3.0"}, env2))


def test_jax_one_task_per_node_and_a_job_id_without_a_task() -> None:
    env = {"SLURM_JOB_ID": "2", "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
           "SLURM_NTASKS_PER_NODE": "1", "CUDA_VISIBLE_DEVICES": "0,1"}
    f = _ids(_doc({"jax": "0.4.13"}, env))["jax.slurm-one-local-device"]
    assert "local device" in f.title and "local_device_ids" in f.fix
    for dists, env2 in (({"jax": "0.4.13"}, {**env, "SLURM_NTASKS_PER_NODE": "2"}),
                        ({"jax": "0.4.13"}, {**env, "CUDA_VISIBLE_DEVICES": "0"}),
                        ({"torch": "2.3.0"}, env)):
        assert "jax.slurm-one-local-device" not in _ids(_doc(dists, env2))
    ssh = {"SLURM_JOB_ID": "6", "SSH_CONNECTION": "10.0.0.5 51022 10.0.1.17 22"}
    f = _ids(_doc({"jax": "0.6.2"}, ssh))["jax.slurm-job-without-task"]
    assert "SLURM_JOB_ID" in f.title and "unset SLURM_JOB_ID" in f.fix
    # salloc's shell without ssh: said as info only; inside a task: nothing
    assert "jax.slurm-job-without-task" not in _ids(_doc({"jax": "0.6.2"}, {"SLURM_JOB_ID": "6"}))
    assert "jax.slurm-job-without-task" in _ids(_doc({"jax": "0.6.2"}, {"SLURM_JOB_ID": "6"}),
                                                infos=True)
    assert "jax.slurm-job-without-task" not in _ids(
        _doc({"jax": "0.6.2"}, {**ssh, "SLURM_PROCID": "0"}), infos=True)


def test_isaacsim_51_on_a_newer_driver_branch() -> None:
    smi = {"header": "| NVIDIA-SMI 595.84    Driver Version: 595.84    CUDA Version: 13.2     |",
           "rows": "0, NVIDIA GeForce RTX 4090, 24564, 8.9"}
    f = _ids(_doc({"isaacsim": "5.1.0"}, nvidia_smi=smi))["driver.not-validated-for-package"]
    assert "595" in f.title and "580" in f.fix
    assert "driver.not-validated-for-package" not in _ids(_doc({"isaacsim": "5.1.0"}))
    assert "driver.not-validated-for-package" not in _ids(
        _doc({"isaacsim": "5.0.0"}, nvidia_smi=smi))


def test_conda_cuda_plugin_beside_a_cpu_pytorch() -> None:
    host = {**LINUX, "conda_env": True, "python_prefix": "/home/u/envs/o"}
    cpu = "pytorch-1.13.1-cpu_py311h410fd25_0.json"
    f = _ids(_doc({"torch": "1.13.1"}, host=host, nvidia_smi=None, conda_meta_listing=[
        "openmm-torch-1.0rc1-cuda112py311h756f8fe_0.json", cpu]))["conda.cuda-plugin-cpu-pytorch"]
    assert "openmm-torch" in f.title and "CONDA_OVERRIDE_CUDA=11.2" in f.fix
    for listing in (["openmm-torch-1.0rc1-cpupy311h756f8fe_0.json", cpu],
                    ["openmm-torch-1.0rc1-cuda112py311h756f8fe_0.json",
                     "pytorch-1.13.1-cuda112py311h13fee9e_200.json"]):
        assert "conda.cuda-plugin-cpu-pytorch" not in _ids(
            _doc({"torch": "1.13.1"}, host=host, nvidia_smi=None, conda_meta_listing=listing))


def test_cudf_262_needs_nvjitlink_129() -> None:
    f = _ids(_doc({"cudf-cu12": "26.2.1", "nvidia-nvjitlink-cu12": "12.8.93"}))[
        "package.needs-newer-cuda-library"]
    assert "nvjitlink" in f.title.lower() and "cudf-cu13" in f.fix
    for dists in ({"cudf-cu12": "26.2.1", "nvidia-nvjitlink-cu12": "12.9.86"},
                  {"cudf-cu12": "25.12.0", "nvidia-nvjitlink-cu12": "12.8.93"}):
        assert "package.needs-newer-cuda-library" not in _ids(_doc(dists))


def test_pairing_rows_of_round25_step0() -> None:
    pairs = [({"mace-torch": "0.3.10", "cuequivariance": "0.2.0"}, "cuequivariance==0.1.0",
              {"mace-torch": "0.3.10", "cuequivariance": "0.1.0"}),
             ({"nemo_toolkit": "2.0.0", "numpy": "2.1.3"}, "numpy<2",
              {"nemo_toolkit": "2.0.0", "numpy": "1.26.4"}),
             ({"rmm-cu11": "24.10.0", "cuda-python": "11.8.4"}, "cuda-python==11.8.3",
              {"rmm-cu11": "24.10.0", "cuda-python": "11.8.3"})]
    for bad, fix, good in pairs:
        assert fix in _ids(_doc(bad))["package.pairing-mismatch"].fix
        assert "package.pairing-mismatch" not in _ids(_doc(good))
