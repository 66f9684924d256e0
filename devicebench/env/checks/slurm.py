"""Slurm task layouts, drivers a package is not validated with, and conda CUDA plugins beside a
CPU pytorch (issue 24, round 25 step 0: round23_heldout's misses written generally).

* A task whose local rank is past the GPUs it sees (``--gpus-per-task``): code that picks the
  device by local rank (torch.cuda.set_device(local_rank), JAX's Slurm detection) asks for an
  ordinal CUDA_VISIBLE_DEVICES does not hold.
* JAX under Slurm with one task per node and several GPUs visible: JAX's Slurm detection gives
  each process one local device.
* SLURM_JOB_ID without the per-task variables (a shell ssh'd into an allocated node): JAX's
  Slurm detection takes it for a task and fails reading SLURM_PROCID/SLURM_LOCALID.
* ``[[driver_limits]]``: a package release validated with some driver branches, on a newer one.
* A conda record of a CUDA build (``cuda112py311...``) beside a CPU pytorch record.
"""

from __future__ import annotations

import re

from devicebench.env.checks._util import KB, installed_version, matches
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

_SOURCE_RANKS = ("https://github.com/jax-ml/jax/issues/23452 ; "
                 "https://github.com/ACEsuit/mace/issues/435")
_SOURCE_ONE = ("https://github.com/jax-ml/jax/issues/16788 ; https://github.com/jax-ml/jax/pull/"
               "12152 (local_device_ids; one process per GPU assumed, as remembered)")
_SOURCE_JOB = "https://github.com/jax-ml/jax/issues/30073"


def _visible(snap: EnvSnapshot) -> list[str]:
    return [d for d in snap.env_vars.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]


def _int(text: str | None) -> int | None:
    m = re.match(r"\s*(\d+)", text or "")
    return int(m.group(1)) if m else None


def check_local_rank_past_visible(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A Slurm task whose local rank is past the GPUs CUDA_VISIBLE_DEVICES gives it.

    Example:
        >>> env = {"SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "2",
        ...        "CUDA_VISIBLE_DEVICES": "0"}
        >>> [f.id for f in check_local_rank_past_visible(EnvSnapshot(env_vars=env), {})]
        ['slurm.local-rank-past-visible-gpus']
        >>> env["SLURM_LOCALID"] = "0"
        >>> check_local_rank_past_visible(EnvSnapshot(env_vars=env), {})
        []
    """
    env = snap.env_vars
    rank, visible = _int(env.get("SLURM_LOCALID")), _visible(snap)
    if rank is None or not visible or rank < len(visible):
        return []
    return [Finding(
        "slurm.local-rank-past-visible-gpus", "warning",
        f"Slurm task local rank {rank} sees {len(visible)} GPU(s): CUDA_VISIBLE_DEVICES="
        f"{env['CUDA_VISIBLE_DEVICES']}",
        observed=", ".join(f"{v}={env[v]}" for v in (
            "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_GPUS_PER_TASK",
            "CUDA_VISIBLE_DEVICES") if env.get(v)),
        why="With --gpus-per-task (or a per-task binding) Slurm gives each task only its own "
            "GPU, renumbered from 0, so code that picks the device by local rank "
            "(torch.cuda.set_device(local_rank), JAX's Slurm detection in "
            "jax.distributed.initialize) asks for an ordinal this CUDA_VISIBLE_DEVICES does not "
            "hold: 'invalid device ordinal' / CUDA_ERROR_INVALID_DEVICE on every rank but 0.",
        fix="request the GPUs per node instead (#SBATCH --gpus-per-node=N or --gres=gpu:N, "
            "so every task sees the node's GPUs), or select device 0 in each task "
            "(jax.distributed.initialize(local_device_ids=[0]); torch.cuda.set_device(0))",
        source=_SOURCE_RANKS)]


def check_jax_slurm_layout(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """JAX under Slurm: one task per node with several GPUs, or SLURM_JOB_ID without a task."""
    env = snap.env_vars
    if not installed_version(snap, "jax") or not env.get("SLURM_JOB_ID"):
        return []
    per_node = _int(env.get("SLURM_NTASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE"))
    visible = _visible(snap)
    if env.get("SLURM_PROCID") and per_node == 1 and len(visible) > 1:
        return [Finding(
            "jax.slurm-one-local-device", "warning",
            f"one Slurm task per node with {len(visible)} GPUs: JAX gives each process one "
            "local device",
            observed=f"SLURM_NTASKS_PER_NODE={per_node}; CUDA_VISIBLE_DEVICES="
                     f"{env['CUDA_VISIBLE_DEVICES']}",
            why="When jax.distributed.initialize() detects a Slurm launch on GPUs it assumes one "
                "process per GPU and gives each process the single local device of its local "
                "rank, so with one task per node the other GPUs of each node are left out.",
            fix="launch one task per GPU (#SBATCH --ntasks-per-node=<GPUs per node>), or pass "
                "the devices yourself: jax.distributed.initialize(local_device_ids=[0, 1])",
            source=_SOURCE_ONE)]
    if any(env.get(v) for v in ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS")):
        return []
    return [Finding(
        "jax.slurm-job-without-task",
        "warning" if env.get("SSH_CONNECTION") else "info",
        "SLURM_JOB_ID is set outside a Slurm task: JAX's Slurm detection will fail",
        observed=f"SLURM_JOB_ID={env['SLURM_JOB_ID']}; no SLURM_PROCID, SLURM_LOCALID or "
                 "SLURM_NTASKS" + ("; an ssh session" if env.get("SSH_CONNECTION") else ""),
        why="jax.distributed.initialize() takes SLURM_JOB_ID as a Slurm launch and then reads "
            "the per-task variables srun sets (SLURM_PROCID, SLURM_LOCALID, ...); a shell ssh'd "
            "into an allocated node (or salloc's) inherits only the job id, so it fails with a "
            "KeyError. Nothing fails until jax.distributed is used.",
        fix="run the processes under srun, or unset SLURM_JOB_ID in that shell, or pass "
            "coordinator_address, num_processes and process_id to "
            "jax.distributed.initialize() yourself",
        source=_SOURCE_JOB)]


def check_driver_limit(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A package release on a driver branch newer than the ones it is validated with."""
    smi = snap.nvidia_smi
    if smi is None or not smi.driver_version:
        return []
    out = []
    for row in kb.get("driver_limits", []):
        mine = installed_version(snap, row["dist"])
        if not mine or not matches(mine, row["spec"]) \
                or not matches(smi.driver_version, row["driver"]):
            continue
        out.append(Finding(
            "driver.not-validated-for-package", "warning",
            f"{row['dist']} {mine} on driver {smi.driver_version}, a branch it is not "
            f"validated with ({row['validated']})",
            observed=f"{row['dist']} {mine}; driver {smi.driver_version}",
            why=row["why"], fix=row["fix"], source=row["source"]))
    return out


_CUDA_BUILD = re.compile(r"^cuda(1\d|\d)(\d)(?!\d)")  # cuda112py311...: CUDA 11.2


def check_conda_cuda_plugin_cpu_torch(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A conda record of a CUDA build of a torch plugin beside conda's CPU pytorch."""
    entry = kb.get("conda_cuda_plugin")
    torch = snap.conda_builds.get("pytorch", {})
    if not entry or "cpu" not in torch.get("build", ""):
        return []
    out = []
    for name in entry["plugins"]:
        m = _CUDA_BUILD.match(snap.conda_builds.get(name, {}).get("build", ""))
        if not m:
            continue
        cuda = f"{m.group(1)}.{m.group(2)}"
        out.append(Finding(
            "conda.cuda-plugin-cpu-pytorch", "warning",
            f"{name} is conda's CUDA {cuda} build, beside a CPU pytorch",
            observed=f"{name} {snap.conda_builds[name].get('version', '')} "
                     f"{snap.conda_builds[name]['build']}; pytorch {torch.get('version', '')} "
                     f"{torch['build']}",
            why=f"The CUDA build of {name} links libtorch_cuda.so, which a CPU pytorch does not "
                "have, so importing it fails. conda picks the CUDA variants only where it "
                "detects a driver (the __cuda virtual package); without one it solved pytorch "
                "for the CPU. " + entry["why"],
            fix=f"CONDA_OVERRIDE_CUDA={cuda} conda install -c conda-forge {name} "
                "'pytorch=*=cuda*' (CUDA builds of both, for a machine whose driver conda does "
                f"not see), or conda install -c conda-forge {name} 'pytorch=*=cpu*' with the "
                f"CPU build of {name}",
            source=entry["source"]))
    return out
