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
from dataclasses import dataclass
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
    build_dataclass,
    clean_macos_version,
)
from devicebench.launch import run_worker

INTERESTING_CPU_FLAGS = re.compile(r"^(avx2|fma|avx512\w*|amx\w*|avx_vnni|f16c)$")


def _run(cmd: list[str], timeout: float = 5.0) -> str | None:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() if res.returncode == 0 else None


# -- raw inputs -> snapshot fields: pure functions, also run on recorded inputs in tests --
@dataclass
class RawHost:
    """What the probe reads about the host, verbatim, before any interpretation.

    :func:`read_raw_host` fills it on this machine; tests fill it from inputs recorded on
    other machines (a Mac's ``platform.mac_ver()``, ``sysctl`` output); :func:`host_from_raw`
    turns it into :class:`HostInfo` in both cases, so fixtures cannot drift from the probe.
    """

    system: str = ""  # platform.system()
    machine: str = ""  # platform.machine(): the interpreter's architecture
    mac_ver: str = ""  # platform.mac_ver()[0], e.g. "14.5"
    proc_translated: str | None = None  # `sysctl -n sysctl.proc_translated` (None: failed)
    cpu_brand: str | None = None  # `sysctl -n machdep.cpu.brand_string`
    os_release_name: str = ""  # PRETTY_NAME from /etc/os-release
    kernel_release: str = ""  # platform.release()
    cpuinfo: str = ""  # /proc/cpuinfo
    processor: str = ""  # platform.processor()
    platform: str = ""  # platform.platform()
    python_version: str = ""
    python_implementation: str = ""
    python_executable: str = ""
    python_prefix: str = ""
    conda_env: bool = False
    cpu_cores_physical: int | None = None
    cpu_cores_logical: int | None = None
    ram_bytes: int | None = None


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
        try:
            raw.cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            pass
    return raw


def host_from_raw(raw: RawHost) -> HostInfo:
    """Interpret raw host facts: OS version (parsed once, here), Rosetta, CPU.

    Example:
        >>> h = host_from_raw(RawHost(system="Darwin", machine="arm64", mac_ver="14.5",
        ...                           proc_translated="0", cpu_brand="Apple M3 Pro"))
        >>> h.os_version, h.macos_version, h.rosetta, h.apple_chip
        ('macOS 14.5', '14.5', False, 'Apple M3 Pro')
    """
    host = HostInfo(
        os=raw.system,
        machine=raw.machine,
        python_arch=raw.machine,
        python_version=raw.python_version,
        python_implementation=raw.python_implementation,
        python_executable=raw.python_executable,
        python_prefix=raw.python_prefix,
        conda_env=raw.conda_env,
        cpu_cores_physical=raw.cpu_cores_physical,
        cpu_cores_logical=raw.cpu_cores_logical,
        ram_bytes=raw.ram_bytes,
    )
    if raw.system == "Darwin":
        host.macos_version = clean_macos_version(raw.mac_ver)
        host.os_version = f"macOS {raw.mac_ver}".strip()
        translated = (raw.proc_translated or "").strip()
        # "1": translated by Rosetta; "0": native; missing oid: an Intel Mac.
        host.rosetta = translated == "1" if raw.proc_translated is not None else False
        if host.rosetta:
            host.machine = "arm64"
        host.cpu_model = (raw.cpu_brand or "").strip()
        if host.machine == "arm64":
            host.apple_chip = host.cpu_model if host.cpu_model.startswith("Apple") else "Apple"
    elif raw.system == "Linux":
        kernel = f"(kernel {raw.kernel_release})" if raw.kernel_release else ""
        host.os_version = " ".join(p for p in (raw.os_release_name, kernel) if p)
        model = re.search(r"^model name\s*:\s*(.+)$", raw.cpuinfo, re.M)
        host.cpu_model = model.group(1).strip() if model else raw.processor
        flags = re.search(r"^flags\s*:\s*(.+)$", raw.cpuinfo, re.M)
        if flags:
            host.cpu_flags = sorted(
                {f for f in flags.group(1).split() if INTERESTING_CPU_FLAGS.match(f)}
            )
    else:
        host.os_version = raw.platform
        host.cpu_model = raw.processor
    return host


def snapshot_from_raw(doc: dict) -> EnvSnapshot:
    """Replay raw inputs recorded on some machine through the probe's own interpretation.

    ``doc`` holds what the probe reads, verbatim: ``host`` (:class:`RawHost` fields),
    ``nvidia_smi`` (``{"header": ..., "rows": ...}``, absent without nvidia-smi),
    ``ldconfig`` (``ldconfig -p`` output), ``env_lib_listing`` (file names in the
    environment's ``lib/``), ``distributions``, ``env_vars``, ``keras_config_backend``
    and ``frameworks`` (per framework: the worker's ``status``, JSON ``result`` and
    ``stderr``). Test fixtures are built this way so they cannot drift from the probe.
    """
    host = host_from_raw(build_dataclass(RawHost, doc.get("host", {})))
    smi_raw = doc.get("nvidia_smi")
    smi = None
    if isinstance(smi_raw, dict):
        smi = nvidia_smi_from_output(smi_raw.get("header"), smi_raw.get("rows"))
    env_libs = {}
    if host.conda_env and host.python_prefix:
        env_libs = cuda_libs_in_dir(f"{host.python_prefix}/lib", doc.get("env_lib_listing", []))
    frameworks = {
        name: framework_probe_from_worker(
            name, fw.get("status", "ok"), fw.get("result"), fw.get("stderr", ""),
            fw.get("stdout", ""), fw.get("describe", ""),
        )
        for name, fw in doc.get("frameworks", {}).items()
    }
    return EnvSnapshot(
        created_at=str(doc.get("created_at", "")),
        host=host,
        distributions=dict(doc.get("distributions", {})),
        keras_config_backend=str(doc.get("keras_config_backend", "")),
        nvidia_smi=smi,
        env_vars=dict(doc.get("env_vars", {})),
        blas=build_dataclass(BlasInfo, doc.get("blas", {})),
        system_cuda_libs=cuda_libs_from_ldconfig(doc.get("ldconfig", "")),
        env_cuda_libs=env_libs,
        frameworks=frameworks,
    )


def probe_host() -> HostInfo:
    """OS, architecture (and Rosetta), Python, CPU, RAM."""
    return host_from_raw(read_raw_host())


def nvidia_smi_from_output(header: str | None, rows: str | None) -> NvidiaSmi:
    """Interpret ``nvidia-smi`` (its header table) and its ``--query-gpu`` CSV rows.

    ``header`` None means the command failed (driver not loaded).

    Example:
        >>> smi = nvidia_smi_from_output(
        ...     "| NVIDIA-SMI 525.89.02    Driver Version: 525.89.02    CUDA Version: 12.0 |",
        ...     "0, NVIDIA A100-SXM4-40GB, 40960, 8.0")
        >>> smi.driver_version, smi.cuda_version, smi.gpus[0].compute_capability
        ('525.89.02', '12.0', '8.0')
    """
    if header is None:
        return NvidiaSmi(error="nvidia-smi is installed but failed (is the driver loaded?)")
    smi = NvidiaSmi()
    m = re.search(r"CUDA Version:\s*([\d.]+)", header)
    smi.cuda_version = m.group(1) if m else ""
    m = re.search(r"Driver Version:\s*([\d.]+)", header)
    smi.driver_version = m.group(1) if m else ""
    for line in (rows or "").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[0].isdigit():
            mem = int(parts[2]) if parts[2].isdigit() else None
            cc = parts[3] if len(parts) > 3 and parts[3] not in ("[N/A]", "N/A") else ""
            smi.gpus.append(NvidiaGpu(int(parts[0]), parts[1], mem, cc))
    return smi


# Libraries a CUDA build of a framework dlopens (sonames start with these).
CUDA_LIB_PREFIXES = (
    "libcuda.", "libcudart.", "libcudnn.", "libcublas.", "libcublasLt.", "libcufft.",
    "libcurand.", "libcusolver.", "libcusparse.", "libnvinfer.", "libnccl.", "libnvrtc.",
)
_LDCONFIG_LINE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)")


def cuda_libs_from_ldconfig(text: str) -> dict[str, str]:
    """CUDA-related sonames in ``ldconfig -p`` output -> the first path listed for each.

    Example:
        >>> cuda_libs_from_ldconfig(
        ...     "\tlibcudnn.so.8 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcudnn.so.8")
        {'libcudnn.so.8': '/usr/lib/x86_64-linux-gnu/libcudnn.so.8'}
    """
    found: dict[str, str] = {}
    for line in text.splitlines():
        m = _LDCONFIG_LINE.match(line)
        if m and m.group(1).startswith(CUDA_LIB_PREFIXES) and True:
            found.setdefault(m.group(1), m.group(3))
    return dict(sorted(found.items()))


def cuda_libs_in_dir(directory: str, names: Iterable[str]) -> dict[str, str]:
    """CUDA-related shared libraries among ``names`` (a directory listing) -> their paths."""
    return {
        n: f"{directory.rstrip('/')}/{n}"
        for n in sorted(names)
        if n.startswith(CUDA_LIB_PREFIXES) and ".so" in n
    }


def read_cuda_libs(prefix: str, conda_env: bool) -> tuple[dict[str, str], dict[str, str]]:
    """(system libraries from ``ldconfig -p``, libraries in a conda env's ``lib/``)."""
    system: dict[str, str] = {}
    if platform.system() == "Linux":
        exe = shutil.which("ldconfig") or ("/sbin/ldconfig" if Path("/sbin/ldconfig").exists()
                                            else None)
        out = _run([exe, "-p"]) if exe else None
        system = cuda_libs_from_ldconfig(out or "")
    env: dict[str, str] = {}
    if conda_env and prefix:
        try:
            env = cuda_libs_in_dir(f"{prefix}/lib", os.listdir(Path(prefix, "lib")))
        except OSError:
            pass
    return system, env


_LOAD_ERROR = re.compile(
    r"(Could not load dynamic library .*|Cannot dlopen some GPU libraries.*|"
    r"Could not find cuda drivers on your machine.*|"
    r"(?:Unable|Failed) to (?:load|find) (?:cuDNN|cudnn|libcuda|CUDA).*)"
)


def load_errors_from_log(text: str) -> list[str]:
    """The library-loading failures in a framework's import log, each once, in order.

    Example:
        >>> load_errors_from_log("2020-10-15 W tensorflow/stream_executor/platform/default/"
        ...   "dso_loader.cc:59] Could not load dynamic library 'libcudnn.so.7'; dlerror: "
        ...   "libcudnn.so.7: cannot open shared object file")[0][:46]
        "Could not load dynamic library 'libcudnn.so.7'"
    """
    seen: list[str] = []
    for line in text.splitlines():
        m = _LOAD_ERROR.search(line)
        if m:
            msg = m.group(1).strip()[:400]
            if msg not in seen:
                seen.append(msg)
    return seen


def framework_probe_from_worker(
    name: str,
    status: str,
    result: dict | None,
    stderr_tail: str = "",
    stdout_tail: str = "",
    describe: str = "",
) -> FrameworkProbe:
    """Interpret one probe worker's outcome (its status, JSON result and output tails)."""
    load_errors = load_errors_from_log(stderr_tail)
    if result is not None and status in ("ok", "error"):
        data = dict(result)
        data["physical_devices"] = [
            build_dataclass(DeviceInfo, d) for d in data.get("physical_devices", [])
        ]
        fields = set(FrameworkProbe.__dataclass_fields__)
        probe = FrameworkProbe(**{k: v for k, v in data.items() if k in fields})
        probe.load_errors = load_errors
        if probe.status == "error" and stderr_tail:
            probe.error += "\n--- stderr ---\n" + stderr_tail[-1500:]
        return probe
    tail = (stderr_tail or stdout_tail).strip()
    text = describe or f"process ended: {status}"
    return FrameworkProbe(
        name=name,
        status="timeout" if status == "timeout" else "crashed",
        error=f"{text}\n{tail[-2000:]}" if tail else text,
        load_errors=load_errors,
    )


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
    rows = None
    if header is not None:
        # compute_cap is queryable only on newer drivers (about 510+): fall back without it.
        for fields in ("index,name,memory.total,compute_cap", "index,name,memory.total"):
            rows = _run([exe, f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                        timeout=15)
            if rows is not None:
                break
    return nvidia_smi_from_output(header, rows)


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
    return EnvSnapshot(
        created_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        devicebench_version=__version__,
        host=host,
        system_cuda_libs=system_libs,
        env_cuda_libs=env_libs,
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
    # Warnings on: TF logs the libraries it could not load at level W.
    env["TF_CPP_MIN_LOG_LEVEL"] = "1"
    outcome = run_worker("devicebench.backends.probe_worker", [name], timeout=timeout, env=env)
    return framework_probe_from_worker(
        name,
        outcome.status,
        outcome.result,
        outcome.stderr_tail,
        outcome.stdout_tail,
        outcome.describe(),
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
