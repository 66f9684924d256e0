"""Issue 24, round 24: rules written against round23_dev (checks/clusters.py), each with cases
that must stay silent. A release broken only under Slurm (jax#20711), the 560 driver's NCCL P2P
hang (xgboost#11242), two NCCL versions (nccl#1267), Apptainer/Singularity's driver libraries
lost from LD_LIBRARY_PATH (EESSI software-layer#231), a libcuda on LD_LIBRARY_PATH in a
container (JAX-Toolbox#1022), a cluster session without its CUDA module (whittle#153), a
library needing a newer cuBLAS (mace#1070), an old release pip fell back to on a new Python
(deepchem#4153), and libraries loaded by soname (rl-mpc-locomotion#19, mpi4py#659)."""

from __future__ import annotations

from tests.unit.env_cases import warned as _ids

LINUX = {"system": "Linux", "machine": "x86_64", "python_version": "3.11.8",
         "python_implementation": "CPython", "conda_env": False, "python_prefix": "/usr",
         "os_release_name": "Ubuntu 22.04.4 LTS", "kernel_release": "5.15.0-101-generic"}


def _smi(driver: str = "535.104.05", cuda: str = "12.2", gpus: int = 2) -> dict:
    return {"header": f"| NVIDIA-SMI {driver}    Driver Version: {driver}    CUDA Version: "
                      f"{cuda}     |",
            "rows": "\n".join(f"{i}, NVIDIA A100-SXM4-80GB, 81920, 8.0" for i in range(gpus))}


def _doc(dists: dict, host: dict | None = None, **extra) -> dict:
    doc = {"host": host or LINUX, "distributions": {"numpy": "1.26.4", **dists},
           "frameworks": {}}
    doc.update(extra)
    return doc


def test_jax_0426_under_slurm_names_the_releases_around_it() -> None:
    slurm = {"SLURM_JOB_ID": "1", "SLURM_NTASKS": "4"}
    f = _ids(_doc({"jax": "0.4.26", "jaxlib": "0.4.26"}, env_vars=slurm, nvidia_smi=_smi()))[
        "release.launch-regression"]
    assert "0.4.26" in f.title and "0.4.27" in f.fix and "0.4.25" in f.fix
    for dists, env in (({"jax": "0.4.25", "jaxlib": "0.4.25"}, slurm),
                       ({"jax": "0.4.26", "jaxlib": "0.4.26"}, {})):
        assert "release.launch-regression" not in _ids(_doc(dists, env_vars=env))


def test_driver_560_with_nccl_on_two_gpus_and_silent_otherwise() -> None:
    dists = {"xgboost": "2.1.4", "nvidia-nccl-cu12": "2.25.1"}
    f = _ids(_doc(dists, nvidia_smi=_smi("560.35.03", "12.6")))["driver.nccl-regression"]
    assert "570" in f.fix and "NCCL_P2P_DISABLE=1" in f.fix
    for doc in (_doc(dists, nvidia_smi=_smi("570.86.15", "12.8")),
                _doc(dists, nvidia_smi=_smi("560.35.03", "12.6", gpus=1)),
                _doc({"numpy": "2.2.2"}, nvidia_smi=_smi("560.35.03", "12.6")),
                _doc(dists, nvidia_smi=_smi("560.35.03", "12.6"),
                     env_vars={"NCCL_P2P_DISABLE": "1"})):
        assert "driver.nccl-regression" not in _ids(doc)


def test_a_system_nccl_of_another_version_on_ld_library_path() -> None:
    listing = {"/usr/local/nccl2/lib": ["libnccl.so.2", "libnccl.so.2.17.1"]}
    env = {"LD_LIBRARY_PATH": "/usr/local/nccl2/lib"}
    f = _ids(_doc({"torch": "2.3.0", "nvidia-nccl-cu12": "2.20.5"}, env_vars=env,
                  ld_path_listing=listing))["nccl.two-versions"]
    assert "nvidia-nccl-cu12==2.20.5" in f.fix and "2.17.1" in f.fix
    same = {"/usr/local/nccl2/lib": ["libnccl.so.2", "libnccl.so.2.20.5"]}
    for doc in (_doc({"torch": "2.3.0", "nvidia-nccl-cu12": "2.20.5"}, env_vars=env,
                     ld_path_listing=same),
                _doc({"torch": "2.3.0", "nvidia-nccl-cu12": "2.20.5"}),
                _doc({"torch": "2.3.0"}, env_vars=env, ld_path_listing=listing)):
        assert "nccl.two-versions" not in _ids(doc)


def test_singularity_driver_libraries_lost_from_ld_library_path() -> None:
    smi = {"header": None, "rows": None, "output": "NVIDIA-SMI couldn't find libnvidia-ml.so "
                                                  "library in your system."}
    env = {"SINGULARITY_CONTAINER": "/tmp/x.sif"}
    f = _ids(_doc({}, env_vars=env, nvidia_smi=smi))["container.singularity-libs-not-on-ld-path"]
    assert "LD_LIBRARY_PATH" in f.title and "/.singularity.d/libs" in f.fix
    for doc in (_doc({}, env_vars={**env, "LD_LIBRARY_PATH": "/.singularity.d/libs"},
                     nvidia_smi=smi),
                _doc({}, nvidia_smi=smi),
                _doc({}, env_vars=env, nvidia_smi=_smi())):
        assert "container.singularity-libs-not-on-ld-path" not in _ids(doc)


def test_a_libcuda_on_ld_library_path_in_a_container() -> None:
    host = {**LINUX, "in_container": True}
    listing = {"/usr/lib64": ["libcuda.so.1", "libcuda.so.535.129.03"]}
    env = {"LD_LIBRARY_PATH": "/usr/lib64"}
    f = _ids(_doc({"jax": "0.4.32"}, host, env_vars=env, ld_path_listing=listing,
                  nvidia_smi=_smi(gpus=1)))["container.libcuda-on-ld-path"]
    assert "12.2" in f.title and "compat" in f.fix
    colab = {"/usr/lib64-nvidia": ["libcuda.so.1", "libcuda.so.535.104.05"]}
    for doc in (_doc({"jax": "0.4.32"}, LINUX, env_vars=env, ld_path_listing=listing,
                     nvidia_smi=_smi(gpus=1)),
                _doc({"jax": "0.4.32"}, host, env_vars={"LD_LIBRARY_PATH": "/usr/lib64-nvidia"},
                     ld_path_listing=colab, nvidia_smi=_smi(gpus=1)),
                _doc({"jax": "0.4.32"}, host, nvidia_smi=_smi(gpus=1))):
        assert "container.libcuda-on-ld-path" not in _ids(doc)


def test_deepspeed_on_a_cluster_without_its_cuda_module() -> None:
    env = {"SLURM_JOB_ID": "7", "PATH": "/home/u/.venv/bin:/usr/bin:/bin"}
    f = _ids(_doc({"torch": "2.4.1", "deepspeed": "0.15.3"}, env_vars=env))[
        "cluster.cuda-module-not-loaded"]
    assert "CUDA_HOME" in f.title and "module load" in f.fix
    for env2 in ({**env, "CUDA_HOME": "/opt/cuda/12.1"},
                 {**env, "PATH": "/sw/CUDA/12.1/bin:/usr/bin"},
                 {"PATH": "/home/u/.venv/bin:/usr/bin:/bin"}):
        assert "cluster.cuda-module-not-loaded" not in _ids(
            _doc({"torch": "2.4.1", "deepspeed": "0.15.3"}, env_vars=env2))
    assert "cluster.cuda-module-not-loaded" not in _ids(_doc({"torch": "2.4.1"}, env_vars=env))


def test_cuequivariance_ops_05_needs_cublas_125() -> None:
    dists = {"torch": "2.5.1", "cuequivariance-ops-torch-cu12": "0.5.1"}
    host = {**LINUX, "conda_env": True, "python_prefix": "/home/u/envs/m"}
    f = _ids(_doc(dists, host, env_lib_listing=["libcublas.so.12", "libcublas.so.12.1.0.26"]))[
        "package.needs-newer-cuda-library"]
    assert "libcublas" in f.title and "0.4.0" in f.fix
    for doc in (_doc(dists, host, env_lib_listing=["libcublas.so.12.6.4.1"]),
                _doc({**dists, "nvidia-cublas-cu12": "12.6.4.1"}, host,
                     env_lib_listing=["libcublas.so.12.1.0.26"]),
                _doc({**dists, "cuequivariance-ops-torch-cu12": "0.4.0"}, host,
                     env_lib_listing=["libcublas.so.12.1.0.26"]),
                _doc(dists, host)):
        assert "package.needs-newer-cuda-library" not in _ids(doc)


def test_deepchem_fallback_on_python_312() -> None:
    f = _ids(_doc({"deepchem": "2.5.0"}, {**LINUX, "python_version": "3.12.7"}))[
        "package.python-fallback-release"]
    assert "3.12" in f.title and "3.11" in f.fix
    for dists, py in (({"deepchem": "2.8.0"}, "3.11.9"), ({"deepchem": "2.5.0"}, "3.11.9")):
        assert "package.python-fallback-release" not in _ids(
            _doc(dists, {**LINUX, "python_version": py}))


def test_isaacgym_libpython_in_the_conda_env_only_and_mpi4py_41() -> None:
    host = {**LINUX, "python_version": "3.8.19", "conda_env": True,
            "python_prefix": "/home/u/envs/gym"}
    f = _ids(_doc({"isaacgym": "1.0rc4"}, host, env_lib_listing=["libpython3.8.so.1.0"]))[
        "package.library-not-found"]
    assert "libpython3.8.so.1.0" in f.title and "LD_LIBRARY_PATH=/home/u/envs/gym/lib" in f.fix
    on_path = _doc({"isaacgym": "1.0rc4"}, host, env_lib_listing=["libpython3.8.so.1.0"],
                   env_vars={"LD_LIBRARY_PATH": "/home/u/envs/gym/lib"},
                   ld_path_listing={"/home/u/envs/gym/lib": ["libpython3.8.so.1.0"]})
    assert "package.library-not-found" not in _ids(on_path)
    ompi = {"/usr/lib64/openmpi/lib": ["libmpi.so", "libmpi.so.40"]}
    f = _ids(_doc({"mpi4py": "4.1.0"}, env_vars={"LD_LIBRARY_PATH": "/usr/lib64/openmpi/lib"},
                  ld_path_listing=ompi))["package.library-not-found"]
    assert "mpi4py" in f.title and "4.0.3" in f.fix
    mpich = {"/usr/lib64/mpich/lib": ["libmpi.so.12"]}
    for doc in (_doc({"mpi4py": "4.0.3"}, ld_path_listing=ompi),
                _doc({"mpi4py": "4.1.0"}, env_vars={"LD_LIBRARY_PATH": "/usr/lib64/mpich/lib"},
                     ld_path_listing=mpich)):
        assert "package.library-not-found" not in _ids(doc)
