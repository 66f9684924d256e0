"""Collect facts about this machine. Never judges (that is checks/), never prints.

Two layers: :func:`probe_host_layer` runs in this process without importing any
deep-learning framework; :func:`probe_framework` imports one framework in a child
process with a timeout, so a crash, abort or hang becomes data, not a dead doctor.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import importlib.metadata as md
import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
from packaging.utils import canonicalize_name

from devicebench import __version__
from devicebench.backends import FRAMEWORK_DISTRIBUTIONS, FRAMEWORKS
from devicebench.env.interpret import (
    RawHost,
    conda_builds_from_listing,
    cuda_libs_from_ldconfig,
    cuda_libs_in_dir,
    cuda_libs_in_dirs,
    framework_probe_from_worker,
    host_from_raw,
    libcuda_copies_from_ldconfig,
    nvidia_smi_from_output,
)
from devicebench.env.snapshot import (
    TRACKED_ENV_VARS,
    BlasInfo,
    EnvSnapshot,
    FrameworkProbe,
    HostInfo,
    NvidiaSmi,
)
from devicebench.launch import run_worker


def _run(cmd: list[str], timeout: float = 5.0) -> str | None:
    return _run_said(cmd, timeout)[0]


def _run_said(cmd: list[str], timeout: float = 5.0) -> tuple[str | None, str]:
    """(stdout when the command succeeded else None, what it printed when it failed)."""
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, str(exc)[:400]
    if res.returncode == 0:
        return res.stdout.strip(), ""
    return None, (res.stdout + res.stderr).strip()[-1000:]


def read_raw_host() -> RawHost:
    """Read this machine's raw host facts (the only impure half of :func:`probe_host`)."""
    system = platform.system()
    raw = RawHost(
        system=system,
        machine=platform.machine(),
        python_version=platform.python_version(),
        python_implementation=platform.python_implementation(),
        python_executable=sys.executable,
        python_prefix=sys.prefix,
        conda_env=Path(sys.prefix, "conda-meta").is_dir(),
        cpu_cores_physical=psutil.cpu_count(logical=False),
        cpu_cores_logical=psutil.cpu_count(logical=True),
        ram_bytes=int(psutil.virtual_memory().total),
        processor=platform.processor(),
        platform=platform.platform(),
    )
    if system == "Darwin":
        raw.mac_ver = platform.mac_ver()[0]
        raw.proc_translated = _run(["sysctl", "-n", "sysctl.proc_translated"])
        raw.cpu_brand = _run(["sysctl", "-n", "machdep.cpu.brand_string"])
    elif system == "Linux":
        try:
            raw.os_release_name = platform.freedesktop_os_release().get("PRETTY_NAME", "")
        except OSError:
            pass
        raw.kernel_release = platform.release()
        raw.in_container = any(Path(p).exists() for p in ("/.dockerenv", "/run/.containerenv"))
        try:
            raw.cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            pass
        rocminfo = shutil.which("rocminfo")
        raw.rocminfo = (_run([rocminfo], timeout=10) or "") if rocminfo else ""
    return raw


def probe_host() -> HostInfo:
    """OS, architecture (and Rosetta), Python, CPU, RAM."""
    return host_from_raw(read_raw_host())


def read_ldconfig() -> str:
    """``ldconfig -p`` output ("" off Linux or when it fails)."""
    if platform.system() != "Linux":
        return ""
    exe = shutil.which("ldconfig") or ("/sbin/ldconfig" if Path("/sbin/ldconfig").exists()
                                        else None)
    return (_run([exe, "-p"]) if exe else None) or ""


def read_env_lib_listing(prefix: str, conda_env: bool) -> list[str]:
    """The file names in a conda environment's ``lib/`` ([] outside conda)."""
    if not (conda_env and prefix):
        return []
    try:
        return sorted(os.listdir(Path(prefix, "lib")))
    except OSError:
        return []


def read_conda_meta_listing(prefix: str, conda_env: bool) -> list[str]:
    """The record names in a conda environment's ``conda-meta/`` ([] outside conda): each is
    ``<name>-<version>-<build>.json``, and the build string tells a package's CPU and CUDA
    builds apart (``py311_torch_2.2.0_cpu``), which its dist-info does not. Names only: the
    records themselves can be megabytes each."""
    if not (conda_env and prefix):
        return []
    try:
        return sorted(n for n in os.listdir(Path(prefix, "conda-meta")) if n.endswith(".json"))
    except OSError:
        return []


def read_cuda_libs(prefix: str, conda_env: bool) -> tuple[dict[str, str], dict[str, str]]:
    """(system libraries from ``ldconfig -p``, libraries in a conda env's ``lib/``)."""
    listing = read_env_lib_listing(prefix, conda_env)
    env = cuda_libs_in_dir(f"{prefix}/lib", listing) if listing else {}
    return cuda_libs_from_ldconfig(read_ldconfig()), env


def read_wheel_platform_tags() -> dict[str, str]:
    """The macOS platform tag of every installed binary wheel (``Tag:`` in its dist-info
    ``WHEEL`` file), e.g. ``{"mlx": "macosx_26_0_arm64"}``; other wheels are left out."""
    from importlib import metadata

    tags: dict[str, str] = {}
    for dist in metadata.distributions():
        try:
            text = dist.read_text("WHEEL") or ""
        except OSError:
            continue
        for line in text.splitlines():
            platform = line.partition(":")[2].strip().rsplit("-", 1)[-1]
            if line.startswith("Tag:") and platform.startswith("macosx_"):
                tags[str(dist.metadata["Name"]).lower()] = platform
                break
    return tags


def read_wheel_lib_listing() -> dict[str, list[str]]:
    """File names in every ``site-packages/nvidia/*/lib`` (the CUDA libraries pip wheels
    such as nvidia-cudnn-cu12 carry) and ``torch/lib`` (where ROCm and older CUDA torch
    wheels bundle theirs), per directory."""
    import site

    roots = list(dict.fromkeys([*site.getsitepackages(), site.getusersitepackages()]))
    listing: dict[str, list[str]] = {}
    for root in roots:
        for lib in [*sorted(Path(root).glob("nvidia/*/lib")), Path(root, "torch", "lib")]:
            if not lib.is_dir():
                continue
            try:
                listing[str(lib)] = sorted(os.listdir(lib))
            except OSError:
                pass
    return listing


def read_ld_path_listing(ld_library_path: str) -> dict[str, list[str]]:
    """File names in each LD_LIBRARY_PATH directory, in the loader's search order."""
    listing: dict[str, list[str]] = {}
    for directory in ld_library_path.split(":"):
        if directory and directory not in listing:
            try:
                listing[directory] = sorted(os.listdir(directory))
            except OSError:
                pass
    return listing


def _normalise(name: str) -> str:
    return canonicalize_name(name)  # PEP 503: runs of -_. as one -, lower case


def probe_distributions() -> dict[str, str]:
    """Every installed distribution's version (normalised names; the first one found on
    sys.path wins, as for imports). Add-ons, plugin halves and legacy GPU packages matter
    as much as the frameworks, so none is left out."""
    found: dict[str, str] = {}
    for dist in md.distributions():
        name = _normalise(dist.metadata.get("Name") or "")
        if name:
            found.setdefault(name, dist.version)
    return dict(sorted(found.items()))


# Bounds on what read_requirements keeps (a broken METADATA file must not bloat a snapshot).
MAX_REQUIRES_PER_DIST = 200
MAX_REQUIRE_CHARS = 300


def read_requirements() -> dict[str, list[str]]:
    """Every installed distribution's ``Requires-Dist`` lines, verbatim
    (``importlib.metadata.requires``; normalised names, the first one found on sys.path wins
    as in :func:`probe_distributions`): what ``pip check`` compares with the installed
    versions. Bounded per distribution; distributions without requirements are left out."""
    found: dict[str, list[str]] = {}
    for dist in md.distributions():
        name = _normalise(dist.metadata.get("Name") or "")
        if not name or name in found:
            continue
        try:
            lines = dist.requires or []
        except Exception:  # noqa: BLE001 - an unreadable METADATA is no requirement
            lines = []
        found[name] = [str(r)[:MAX_REQUIRE_CHARS] for r in lines[:MAX_REQUIRES_PER_DIST]]
    return {k: v for k, v in sorted(found.items()) if v}


def probe_blas() -> BlasInfo:
    """numpy's BLAS from ``numpy.show_config(mode="dicts")`` (numpy >= 1.26)."""
    try:
        import numpy as np
    except ImportError:
        return BlasInfo()
    info = BlasInfo(numpy_version=np.__version__)
    try:
        config = np.show_config(mode="dicts")
        blas = config.get("Build Dependencies", {}).get("blas", {})
        info.name = str(blas.get("name", "")) or "none"  # asked, and numpy named none
        info.version = str(blas.get("version", ""))
        simd = config.get("SIMD Extensions", {})
        info.simd_found = list(simd.get("found", []) or [])
    except Exception:  # older numpy (< 1.26): BLAS unknown (""), not missing
        pass
    return info


def probe_nvidia_smi() -> NvidiaSmi | None:
    """Driver version, its CUDA version and the GPUs, or None without nvidia-smi."""
    raw = read_nvidia_smi()
    return None if raw is None else nvidia_smi_from_output(**raw)


def read_nvidia_smi() -> dict[str, str | None] | None:
    """``nvidia-smi``'s header, its ``--query-gpu`` rows, and what it printed when it failed
    (None without nvidia-smi)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    header, said = _run_said([exe], timeout=15)
    rows = None
    if header is not None:
        # compute_cap is queryable only on newer drivers (about 510+): fall back without it.
        for fields in ("index,name,memory.total,compute_cap", "index,name,memory.total"):
            rows = _run([exe, f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                        timeout=15)
            if rows is not None:
                break
    return {"header": header, "rows": rows, "output": said}


def keras_config_backend() -> str:
    """The ``backend`` in ``$KERAS_HOME/keras.json`` (default ``~/.keras``), or ""."""
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    try:
        data = json.loads(Path(home, "keras.json").read_text(encoding="utf-8"))
        return str(data.get("backend", "")) if isinstance(data, dict) else ""
    except (OSError, ValueError):
        return ""


def installed_frameworks(distributions: dict[str, str]) -> list[str]:
    """Frameworks with at least one of their distributions installed."""
    return [
        fw for fw in FRAMEWORKS if any(d in distributions for d in FRAMEWORK_DISTRIBUTIONS[fw])
    ]


def probe_host_layer() -> EnvSnapshot:
    """Everything that needs no framework import (fast: well under a second)."""
    host = probe_host()
    system_libs, env_libs = read_cuda_libs(host.python_prefix, host.conda_env)
    ld_path = os.environ.get("LD_LIBRARY_PATH", "")
    return EnvSnapshot(
        created_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        devicebench_version=__version__,
        host=host,
        system_cuda_libs=system_libs,
        libcuda_copies=libcuda_copies_from_ldconfig(read_ldconfig()),
        env_cuda_libs=env_libs,
        wheel_cuda_libs=cuda_libs_in_dirs(read_wheel_lib_listing()),
        ld_path_cuda_libs=cuda_libs_in_dirs(read_ld_path_listing(ld_path)),
        wheel_platform_tags=read_wheel_platform_tags(),
        distributions=probe_distributions(),
        requires=read_requirements(),
        conda_builds=conda_builds_from_listing(
            read_conda_meta_listing(host.python_prefix, host.conda_env)),
        keras_config_backend=keras_config_backend(),
        blas=probe_blas(),
        nvidia_smi=probe_nvidia_smi(),
        env_vars={k: os.environ[k] for k in TRACKED_ENV_VARS if k in os.environ},
    )


def probe_framework(name: str, timeout: float = 60.0) -> FrameworkProbe:
    """Import one framework (and Keras on it) in a child process.

    The child runs with ``KERAS_BACKEND`` set to the framework, so the Keras facts
    (version, how ``jit_compile="auto"`` resolves) are those of that backend.
    """
    raw = read_framework(name, timeout)
    return framework_probe_from_worker(
        name, raw["status"], raw["result"], raw["stderr"], raw["stdout"], raw["describe"])


def read_framework(name: str, timeout: float = 60.0) -> dict[str, Any]:
    """One probe worker's raw outcome: ``status``, JSON ``result``, ``stderr``/``stdout``
    tails (the framework's own words, import and first device use) and ``describe``."""
    env = dict(os.environ)
    env["KERAS_BACKEND"] = name
    # Warnings on: TF logs the libraries it could not load at level W.
    env["TF_CPP_MIN_LOG_LEVEL"] = "1"
    outcome = run_worker("devicebench.backends.probe_worker", [name], timeout=timeout, env=env)
    return {"status": outcome.status, "result": outcome.result, "stderr": outcome.stderr_tail,
            "stdout": outcome.stdout_tail, "describe": outcome.describe()}


def read_process_state() -> dict[str, Any]:
    """Device masks and what the already-imported frameworks saw, read in *this* process
    (call it from the training script, e.g. at the start of fit). Imports no framework: a
    framework not yet imported is left out. Goes under ``"process"`` in a raw document.

    Example:
        >>> state = read_process_state()
        >>> sorted(state)[:2], set(state["imported"]) <= {"tensorflow", "torch", "jax"}
        (['env', 'imported'], True)
    """
    masks = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
             "JAX_PLATFORMS")
    state: dict[str, Any] = {"env": {k: os.environ[k] for k in masks if k in os.environ},
                             "imported": sorted(m for m in ("tensorflow", "torch", "jax")
                                                if m in sys.modules)}
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            init = bool(torch.cuda.is_initialized())
            state["torch"] = {"cuda_initialized": init,
                              "device_count": int(torch.cuda.device_count()) if init else None}
        except Exception as exc:  # a broken CUDA init is data too
            state["torch"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return state


def read_raw_environment(frameworks: Iterable[str] | None = None, *,
                         timeout: float = 60.0) -> dict[str, Any]:
    """Everything the probe reads on this machine, verbatim: the document
    :func:`devicebench.env.interpret.snapshot_from_raw` interprets. Recording it (rather than
    the snapshot) lets a machine's inputs replay through later interpretation code.

    Example:
        >>> from devicebench.env.interpret import snapshot_from_raw
        >>> snapshot_from_raw(read_raw_environment([])).host.os == platform.system()
        True
    """
    host = read_raw_host()
    distributions = probe_distributions()
    names = installed_frameworks(distributions) if frameworks is None else list(frameworks)
    return {
        "created_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "host": dataclasses.asdict(host),
        "nvidia_smi": read_nvidia_smi(),
        "ldconfig": read_ldconfig(),
        "env_lib_listing": read_env_lib_listing(host.python_prefix, host.conda_env),
        "conda_meta_listing": read_conda_meta_listing(host.python_prefix, host.conda_env),
        "wheel_lib_listing": read_wheel_lib_listing(),
        "ld_path_listing": read_ld_path_listing(os.environ.get("LD_LIBRARY_PATH", "")),
        "wheel_platform_tags": read_wheel_platform_tags(),
        "distributions": distributions,
        "requires": read_requirements(),
        "env_vars": {k: os.environ[k] for k in TRACKED_ENV_VARS if k in os.environ},
        "keras_config_backend": keras_config_backend(),
        "blas": dataclasses.asdict(probe_blas()),
        "frameworks": {n: read_framework(n, timeout) for n in names},
    }


def probe_environment(
    frameworks: Iterable[str] | None = None,
    *,
    timeout: float = 60.0,
    on_framework: Callable[[str], None] | None = None,
    concurrent: bool = True,
) -> EnvSnapshot:
    """Probe this machine: the host layer, then one subprocess per installed framework.

    Args:
        frameworks: which frameworks to import (default: every installed one); pass
            ``[]`` for the host layer only.
        timeout: seconds allowed for each framework's import and probe.
        on_framework: called with a framework's name before it is probed (progress).
        concurrent: import the frameworks at the same time (each still in its own
            process): doctor finishes in about the slowest import instead of their sum,
            but each import time then includes contention for the cores.

    Example:
        >>> snap = probe_environment(frameworks=[])
        >>> snap.host.python_version.startswith("3.")
        True
    """
    snap = probe_host_layer()
    names = installed_frameworks(snap.distributions) if frameworks is None else list(frameworks)
    snap.probes_concurrent = concurrent and len(names) > 1
    if on_framework is not None:
        for name in names:
            on_framework(name)
    if snap.probes_concurrent:
        with ThreadPoolExecutor(max_workers=len(names)) as pool:
            probes = list(pool.map(lambda n: probe_framework(n, timeout=timeout), names))
    else:
        probes = [probe_framework(n, timeout=timeout) for n in names]
    snap.frameworks = dict(zip(names, probes, strict=True))
    return snap
