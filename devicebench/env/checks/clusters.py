"""Clusters, containers and multi-GPU machines (issue 24, round 24): what a multi-process
launch, a second node or a container changes, read from what one probe process has (the
launcher's environment variables, the loader's path and its listings, nvidia-smi's driver and
GPU count, installed versions), since the probe itself runs one process and no collective.

* ``[[launch_regressions]]``: a release known to break only under a launcher (jax 0.4.26's
  CUDA backend under Slurm), read from the launcher's variables.
* ``[[driver_regressions]]``: a driver branch known to break NCCL between the GPUs of one
  machine (560's peer-to-peer hang), with two GPUs or more and NCCL installed.
* NCCL of two versions: a system ``libnccl.so.2.X.Y`` on LD_LIBRARY_PATH beside the
  nvidia-nccl wheel of another version: nodes that load different ones cannot talk.
* Apptainer/Singularity ``--nv``: the driver libraries live in ``/.singularity.d/libs``, found
  only through the LD_LIBRARY_PATH the container sets; a shell that resets it loses them.
* A host libcuda on LD_LIBRARY_PATH inside a container, ahead of the container's own choice
  (its forward-compatibility libcuda, for a CUDA newer than the driver's).
* A cluster session without its CUDA module: a library that compiles CUDA ops at import
  (DeepSpeed) beside no toolkit on PATH, CUDA_HOME unset, under Slurm or environment modules.
* ``[[library_minimums]]``: a library release whose binary calls a symbol only newer builds of
  a CUDA library export (cuequivariance-ops 0.5 and cuBLAS 12.5), every visible copy older.
* ``[[python_fallbacks]]``: an old release of a package pip picked because no newer one
  supports this Python (deepchem 2.5.0 on Python 3.12).
"""

from __future__ import annotations

import re

from devicebench.env.checks._util import KB, installed_version, matches
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

_CLUSTER_VARS = ("SLURM_JOB_ID", "SLURM_NTASKS", "PBS_JOBID", "LSB_JOBID", "MODULEPATH",
                 "LMOD_CMD", "LOADEDMODULES")


def _gpu_count(snap: EnvSnapshot) -> int:
    return len(snap.nvidia_smi.gpus) if snap.nvidia_smi is not None else 0


def check_launch_regression(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A release known to fail only under a launcher whose variables are set here.

    Example:
        >>> kb = {"launch_regressions": [{"dist": "jax", "spec": "==0.4.26",
        ...       "env_any": ["SLURM_JOB_ID"], "what": "w", "fix": "f", "source": "s"}]}
        >>> snap = EnvSnapshot(distributions={"jax": "0.4.26"}, env_vars={"SLURM_JOB_ID": "1"})
        >>> [f.id for f in check_launch_regression(snap, kb)]
        ['release.launch-regression']
        >>> snap.env_vars.clear()
        >>> check_launch_regression(snap, kb)
        []
    """
    out = []
    for row in kb.get("launch_regressions", []):
        mine = installed_version(snap, row["dist"])
        seen = [v for v in row["env_any"] if snap.env_vars.get(v)]
        if not mine or not matches(mine, row["spec"]) or not seen:
            continue
        out.append(Finding(
            "release.launch-regression", "warning",
            f"{row['dist']} {mine} has a known bug under this launcher: {row['title']}"
            if row.get("title") else f"{row['dist']} {mine} has a known bug under this launcher",
            observed=f"{row['dist']} {mine}; " + ", ".join(
                f"{v}={snap.env_vars[v]}" for v in seen),
            why=row["what"] + " The probe runs one process outside the launch, where the bug "
                "does not show, so its own worker records no error.",
            fix=row["fix"], source=row["source"]))
    return out


def check_driver_regression(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A driver branch known to hang NCCL between the GPUs of one machine."""
    smi = snap.nvidia_smi
    if smi is None or _gpu_count(snap) < 2 or not smi.driver_version:
        return []
    out = []
    for row in kb.get("driver_regressions", []):
        users = [d for d in row["users"] if installed_version(snap, d)]
        if not users or not matches(smi.driver_version, row["driver"]) \
                or any(snap.env_vars.get(v) == "1" for v in row.get("off_by", [])):
            continue
        out.append(Finding(
            "driver.nccl-regression", "warning",
            f"driver {smi.driver_version} has a known NCCL bug between GPUs: {row['title']}",
            observed=f"driver {smi.driver_version}, {_gpu_count(snap)} GPUs; "
                     + ", ".join(f"{d} {installed_version(snap, d)}" for d in users),
            why=row["what"], fix=row["fix"], source=row["source"]))
    return out


_NCCL_FILE = re.compile(r"^libnccl\.so\.(2\.\d+\.\d+)$")


def check_nccl_two_versions(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A system NCCL on LD_LIBRARY_PATH of another version than the nvidia-nccl wheel's."""
    entry = kb.get("nccl_two_versions")
    wheels = {d: installed_version(snap, d) for d in ("nvidia-nccl-cu12", "nvidia-nccl-cu13",
                                                       "nvidia-nccl-cu11")}
    wheels = {d: v for d, v in wheels.items() if v}
    system = {m.group(1): p for n, p in snap.ld_path_cuda_libs.items()
              if (m := _NCCL_FILE.match(n))}
    if not entry or not wheels or not system:
        return []
    main = next(iter(wheels))
    mine = wheels[main]
    other = sorted(v for v in system if not mine.startswith(v))
    if not other:
        return []
    where = system[other[0]].rsplit("/", 1)[0]
    return [Finding(
        "nccl.two-versions", "warning",
        f"two NCCL versions: {other[0]} on LD_LIBRARY_PATH ({where}) and {mine} from {main}",
        observed=f"{where}: libnccl.so.{other[0]}; {main} {mine}"
                 + "".join(f"; {d} {v}" for d, v in wheels.items() if d != main),
        why="Which NCCL a process loads depends on the loader's path and the framework's own "
            "preload, so nodes (or ranks) set up differently run different NCCL versions, whose "
            "bootstrap cannot connect (ncclSocketInit / 'neither AF_INET nor AF_INET6', hangs). "
            + entry["why"],
        fix=f"use the same NCCL on every node: pip install '{main}=={mine}' on each and remove "
            f"{where} from LD_LIBRARY_PATH (and pip uninstall any other nvidia-nccl-cu* wheel), "
            f"or pin '{main}=={other[0]}' (the system's) on every node",
        source=entry["source"])]


def check_singularity_driver_libs(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """Inside Apptainer/Singularity with the driver libraries lost from LD_LIBRARY_PATH."""
    entry = kb.get("singularity_libs")
    env = snap.env_vars
    runtime = next((v for v in ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER") if env.get(v)),
                   "")
    smi = snap.nvidia_smi
    lost = smi is not None and "libnvidia-ml" in (smi.error or "")
    if not entry or not runtime or not lost or entry["dir"] in env.get("LD_LIBRARY_PATH", ""):
        return []
    return [Finding(
        "container.singularity-libs-not-on-ld-path", "warning",
        f"{entry['dir']} is not on LD_LIBRARY_PATH: the driver libraries --nv binds are lost",
        observed=f"{runtime}={env[runtime]}; LD_LIBRARY_PATH="
                 f"{env.get('LD_LIBRARY_PATH') or '(unset)'}; nvidia-smi: {smi.error[:120]}",
        why="With --nv, Apptainer/Singularity binds the host's driver libraries (libcuda, "
            f"libnvidia-ml) into {entry['dir']} and adds that directory to LD_LIBRARY_PATH; "
            "they are in no standard library directory, so a shell or prefix that resets the "
            "environment loses them and neither nvidia-smi nor CUDA finds the driver. "
            + entry["why"],
        fix=f"export LD_LIBRARY_PATH={entry['dir']}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}} inside "
            "the shell (or add the directory to the prefix's linker configuration); start the "
            "container with --nv",
        source=entry["source"])]


def check_container_host_libcuda(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A libcuda on LD_LIBRARY_PATH inside a container, ahead of the container's own."""
    entry = kb.get("container_libcuda")
    smi = snap.nvidia_smi
    if not entry or not snap.host.in_container or smi is None or not smi.cuda_version:
        return []
    paths = [p for n, p in snap.ld_path_cuda_libs.items() if n.startswith("libcuda.so")
             and not p.startswith(tuple(entry["expected_dirs"]))]
    if not paths:
        return []
    where = sorted({p.rsplit("/", 1)[0] for p in paths})
    return [Finding(
        "container.libcuda-on-ld-path", "warning",
        f"LD_LIBRARY_PATH puts a libcuda (the driver's, CUDA {smi.cuda_version}) first "
        "inside this container",
        observed=f"{', '.join(where)} on LD_LIBRARY_PATH holds "
                 + ", ".join(sorted(p.rsplit('/', 1)[1] for p in paths))
                 + f"; nvidia-smi: driver {smi.driver_version}, CUDA {smi.cuda_version}",
        why=f"The driver supports CUDA up to {smi.cuda_version}. A container built for a newer "
            "CUDA runs on it only through the forward-compatibility libcuda it ships "
            "(/usr/local/cuda/compat/lib), which the container's setup loads; a libcuda in an "
            "LD_LIBRARY_PATH directory (a host mount) is loaded first, so code of the newer "
            "CUDA fails (unsupported PTX version, CUDA_ERROR_UNSUPPORTED_PTX_VERSION). "
            + entry["why"],
        fix=f"remove {', '.join(where)} from LD_LIBRARY_PATH (or drop the host library mount) and "
            "start the container through the NVIDIA container toolkit (--gpus all / "
            "--runtime=nvidia), or put /usr/local/cuda/compat/lib first; otherwise use an "
            f"image built for CUDA {smi.cuda_version} or older",
        source=entry["source"])]


def check_cluster_cuda_module(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A library that compiles CUDA ops at import, no toolkit visible, on a cluster."""
    entry = kb.get("cluster_cuda_module")
    env = snap.env_vars
    if not entry or snap.host.os != "Linux" or "PATH" not in env:
        return []
    users = [d for d in entry["dists"] if installed_version(snap, d)]
    cluster = [v for v in _CLUSTER_VARS if env.get(v)]
    if not users or not cluster or env.get("CUDA_HOME") or env.get("CUDA_PATH") \
            or "cuda" in env["PATH"].lower():
        return []
    return [Finding(
        "cluster.cuda-module-not-loaded", "warning",
        f"{users[0]} needs a CUDA toolkit and none is visible: CUDA_HOME is unset and PATH "
        "has no CUDA directory",
        observed=f"{', '.join(f'{d} {installed_version(snap, d)}' for d in users)}; "
                 f"{', '.join(cluster)} set; CUDA_HOME unset; PATH={env['PATH'][:160]}",
        why=f"{users[0]} looks for the CUDA toolkit (CUDA_HOME, nvcc) when it is imported, "
            "to know which of its CUDA ops it can build, and raises (MissingCUDAException: "
            "CUDA_HOME does not exist) without one; pip's torch brings the CUDA runtime, not "
            "the toolkit. On a cluster the toolkit comes from an environment module, loaded "
            "per session or job script. " + entry["why"],
        fix="module load CUDA (and the compiler module it needs, e.g. module load GCC CUDA) in "
            "the session or job script before running, or export CUDA_HOME=<an installed CUDA "
            "toolkit>",
        source=entry["source"])]


def _visible_versions(snap: EnvSnapshot, lib: str) -> list[str]:
    found = [n.split(".so.", 1)[1] for libs in (snap.ld_path_cuda_libs, snap.env_cuda_libs,
                                                snap.system_cuda_libs, snap.wheel_cuda_libs)
             for n in libs if n.startswith(lib + ".so.") and n.count(".") >= 4]
    wheel = installed_version(snap, f"nvidia-{lib[3:].lower()}-cu12")
    conda = snap.conda_builds.get(lib, {}).get("version", "")
    return sorted({v for v in found + [wheel, conda] if v})


def check_library_minimum(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A library release that needs a newer CUDA library than every copy visible here."""
    out = []
    for row in kb.get("library_minimums", []):
        mine = installed_version(snap, row["dist"])
        if not mine or not matches(mine, row["spec"]):
            continue
        seen = _visible_versions(snap, row["lib"])
        if not seen or any(matches(v, ">=" + row["min"]) for v in seen):
            continue
        out.append(Finding(
            "package.needs-newer-cuda-library", "warning",
            f"{row['dist']} {mine} needs {row['lib']} {row['min']} or newer; this "
            f"environment has {row['lib']} {', '.join(seen)}",
            observed=f"{row['dist']} {mine}; {row['lib']} {', '.join(seen)}",
            why=f"{row['dist']} {mine} calls {row['symbol']}, which {row['lib']} exports only "
                f"from {row['min']}; its metadata does not require that release, so loading it "
                f"fails (undefined symbol: {row['symbol']}). " + row["why"],
            fix=row["fix"], source=row["source"]))
    return out


def check_python_fallback(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """An old release pip picked because no newer one supports this Python."""
    py = snap.host.python_version
    out = []
    for row in kb.get("python_fallbacks", []):
        mine = installed_version(snap, row["dist"])
        if not py or not mine or not matches(mine, row["old"]) \
                or not matches(py, row["python"]):
            continue
        out.append(Finding(
            "package.python-fallback-release", "warning",
            f"{row['dist']} {mine} on Python {'.'.join(py.split('.')[:2])}: pip fell back to an "
            f"old release because {row['dist']} {row['newest']} does not support this Python",
            observed=f"{row['dist']} {mine}; Python {py}",
            why=f"{row['dist']} {row['newest']} supports Python up to {row['last_python']}, so "
                f"pip picked the newest release whose metadata allows this Python, an old one "
                "that fails at run time. " + row["why"],
            fix=f"use Python {row['last_python']} (a new environment: conda create -n env "
                f"python={row['last_python']}), then pip install '{row['dist']}=="
                f"{row['newest']}'",
            source=row["source"]))
    return out


def check_library_load(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A package whose binary loads a library by soname (``{py}``: this Python's X.Y) that
    the loader does not find (LD_LIBRARY_PATH, then ldconfig's cache).

    Example:
        >>> kb = {"library_loads": [{"dist": "isaacgym", "when": ">=1.0rc1",
        ...       "needs": "libpython{py}.so.1.0", "why": "w", "fix": "f", "source": "s"}]}
        >>> snap = EnvSnapshot(distributions={"isaacgym": "1.0rc4"})
        >>> snap.host.os, snap.host.python_version = "Linux", "3.8.19"
        >>> [f.title for f in check_library_load(snap, kb)]
        ['isaacgym 1.0rc4 loads libpython3.8.so.1.0, which the loader does not find']
    """
    if snap.host.os != "Linux":
        return []
    py = ".".join(snap.host.python_version.split(".")[:2])
    out = []
    for row in kb.get("library_loads", []):
        mine = installed_version(snap, row["dist"])
        so = row["needs"].format(py=py)
        if not mine or not matches(mine, row["when"]) or snap.loader_finds(so):
            continue
        copy = snap.env_cuda_libs.get(so) or snap.wheel_cuda_libs.get(so, "")
        where = copy.rsplit("/", 1)[0] if copy else ""
        fix = row["fix"].format(py=py)
        out.append(Finding(
            "package.library-not-found", "warning",
            f"{row['dist']} {mine} loads {so}, which the loader does not find",
            observed=f"{row['dist']} {mine}; {so}: "
                     + (f"a copy at {copy}, not on the loader's path" if copy else
                        "not on LD_LIBRARY_PATH nor in ldconfig's cache")
                     + "; LD_LIBRARY_PATH=" + (snap.env_vars.get("LD_LIBRARY_PATH") or "(unset)"),
            why=row["why"].format(py=py) + " The probe does not import it, so no worker error "
                "shows it.",
            fix=(f"export LD_LIBRARY_PATH={where}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}} before "
                 f"starting Python, or: {fix}" if where else fix),
            source=row["source"]))
    return out
