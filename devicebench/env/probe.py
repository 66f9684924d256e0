"""Collect facts about this machine. Never judges (that is checks/), never prints.

Two layers: :func:`probe_host_layer` runs in this process without importing any
deep-learning framework; :func:`probe_framework` imports one framework in a child
process with a timeout, so a crash, abort or hang becomes data, not a dead doctor.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata as md
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

from devicebench import __version__
from devicebench.backends import FRAMEWORK_DISTRIBUTIONS, FRAMEWORKS
from devicebench.env.snapshot import (
    TRACKED_DISTRIBUTIONS,
    TRACKED_ENV_VARS,
    BlasInfo,
    DeviceInfo,
    EnvSnapshot,
    FrameworkProbe,
    HostInfo,
    NvidiaGpu,
    NvidiaSmi,
    _build,
)
from devicebench.launch import run_worker

INTERESTING_CPU_FLAGS = re.compile(r"^(avx2|fma|avx512\w*|amx\w*|avx_vnni|f16c)$")


def _run(cmd: list[str], timeout: float = 5.0) -> str | None:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() if res.returncode == 0 else None


def probe_host() -> HostInfo:
    """OS, architecture (and Rosetta), Python, CPU, RAM."""
    system = platform.system()
    host = HostInfo(
        os=system,
        machine=platform.machine(),
        python_arch=platform.machine(),
        python_version=platform.python_version(),
        python_implementation=platform.python_implementation(),
        python_executable=sys.executable,
        cpu_cores_physical=psutil.cpu_count(logical=False),
        cpu_cores_logical=psutil.cpu_count(logical=True),
        ram_bytes=int(psutil.virtual_memory().total),
    )
    if system == "Darwin":
        host.os_version = "macOS " + platform.mac_ver()[0]
        translated = _run(["sysctl", "-n", "sysctl.proc_translated"])
        # "1": translated by Rosetta; "0": native; missing oid: an Intel Mac.
        host.rosetta = translated == "1" if translated is not None else False
        if host.rosetta:
            host.machine = "arm64"
        host.cpu_model = _run(["sysctl", "-n", "machdep.cpu.brand_string"]) or ""
        if host.machine == "arm64":
            host.apple_chip = host.cpu_model if host.cpu_model.startswith("Apple") else "Apple"
    elif system == "Linux":
        try:
            release = platform.freedesktop_os_release().get("PRETTY_NAME", "")
        except OSError:
            release = ""
        host.os_version = f"{release} (kernel {platform.release()})".strip()
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo = ""
        model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
        host.cpu_model = model.group(1).strip() if model else platform.processor()
        flags = re.search(r"^flags\s*:\s*(.+)$", cpuinfo, re.M)
        if flags:
            host.cpu_flags = sorted(
                {f for f in flags.group(1).split() if INTERESTING_CPU_FLAGS.match(f)}
            )
    else:
        host.os_version = platform.platform()
        host.cpu_model = platform.processor()
    return host


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def probe_distributions() -> dict[str, str]:
    """Installed versions of the tracked distributions and every ``nvidia-*`` wheel."""
    tracked = set(TRACKED_DISTRIBUTIONS)
    found: dict[str, str] = {}
    for dist in md.distributions():
        name = _normalise(dist.metadata.get("Name") or "")
        if name in tracked or name.startswith("nvidia-"):
            found[name] = dist.version
    return dict(sorted(found.items()))


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
        info.name = str(blas.get("name", ""))
        info.version = str(blas.get("version", ""))
        simd = config.get("SIMD Extensions", {})
        info.simd_found = list(simd.get("found", []) or [])
    except Exception:  # older numpy: BLAS unknown, not an error
        pass
    return info


def probe_nvidia_smi() -> NvidiaSmi | None:
    """Driver version, its CUDA version and the GPUs, or None without nvidia-smi."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    header = _run([exe], timeout=15)
    if header is None:
        return NvidiaSmi(error="nvidia-smi is installed but failed (is the driver loaded?)")
    smi = NvidiaSmi()
    m = re.search(r"CUDA Version:\s*([\d.]+)", header)
    smi.cuda_version = m.group(1) if m else ""
    m = re.search(r"Driver Version:\s*([\d.]+)", header)
    smi.driver_version = m.group(1) if m else ""
    rows = _run(
        [exe, "--query-gpu=index,name,memory.total,compute_cap", "--format=csv,noheader,nounits"],
        timeout=15,
    )
    for line in (rows or "").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3:
            mem = int(parts[2]) if parts[2].isdigit() else None
            cc = parts[3] if len(parts) > 3 and parts[3] not in ("[N/A]", "N/A") else ""
            smi.gpus.append(NvidiaGpu(int(parts[0]), parts[1], mem, cc))
    return smi


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
    return EnvSnapshot(
        created_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        devicebench_version=__version__,
        host=probe_host(),
        distributions=probe_distributions(),
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
    env = dict(os.environ)
    env["KERAS_BACKEND"] = name
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    outcome = run_worker("devicebench.backends.probe_worker", [name], timeout=timeout, env=env)
    if outcome.result is not None and outcome.status in ("ok", "error"):
        data = dict(outcome.result)
        data["physical_devices"] = [
            _build(DeviceInfo, d) for d in data.get("physical_devices", [])
        ]
        fields = set(FrameworkProbe.__dataclass_fields__)
        probe = FrameworkProbe(**{k: v for k, v in data.items() if k in fields})
        if probe.status == "error" and outcome.stderr_tail:
            probe.error += "\n--- stderr ---\n" + outcome.stderr_tail[-1500:]
        return probe
    text = outcome.describe()
    tail = (outcome.stderr_tail or outcome.stdout_tail).strip()
    return FrameworkProbe(
        name=name,
        status="timeout" if outcome.status == "timeout" else "crashed",
        error=f"{text}\n{tail[-2000:]}" if tail else text,
    )


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
