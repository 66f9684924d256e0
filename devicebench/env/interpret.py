"""The probe's interpretation: what it read (command output, files, a worker's reply),
verbatim, into snapshot data. Pure functions, no I/O, so a machine's raw inputs recorded
elsewhere replay through exactly this code (:func:`snapshot_from_raw`); the reading
itself is :mod:`devicebench.env.probe`'s."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from devicebench.env.messages import (
    framework_messages,
    reported_facts,
    said_text,
    unique_matches,
)
from devicebench.env.snapshot import (
    UNKNOWN_MEMORY,
    BlasInfo,
    DeviceInfo,
    EnvSnapshot,
    FrameworkProbe,
    HostInfo,
    NvidiaGpu,
    NvidiaSmi,
    clean_macos_version,
)
from devicebench.env.typed_json import build_dataclass

INTERESTING_CPU_FLAGS = re.compile(r"^(avx2|fma|avx512\w*|amx\w*|avx_vnni|f16c)$")


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
    rocminfo: str = ""  # `rocminfo` output ("" without ROCm)
    in_container: bool = False  # /.dockerenv or /run/.containerenv exists (Docker, Podman)


def rocm_agents_from_rocminfo(text: str) -> tuple[list[str], str]:
    """rocminfo's GPU agents, in its order, and its own error line if it printed one.

    Example:
        >>> rocm_agents_from_rocminfo("Name: gfx1102\\nMarketing Name: AMD Radeon RX 7600\\n")
        (['gfx1102 AMD Radeon RX 7600'], '')
    """
    agents: list[str] = []
    for line in text.splitlines():
        name = re.match(r"\s*Name:\s*(gfx\w+)\s*$", line)
        market = re.match(r"\s*Marketing Name:\s*(.+?)\s*$", line)
        if name:
            agents.append(name.group(1))
        elif market and agents and " " not in agents[-1]:
            agents[-1] += " " + market.group(1)
    error = re.search(r"^.*(?:Unable to open /dev/kfd|Permission denied|HSA_STATUS_ERROR).*$",
                      text, re.M)
    return agents, error.group(0).strip() if error else ""


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
        host.in_container = raw.in_container
        kernel_release = raw.kernel_release.lower()
        host.wsl_version = (1 if re.search(r"-microsoft$", kernel_release)
                            else 2 if "microsoft" in kernel_release else 0)
        host.wsl = host.wsl_version == 2
        host.amd_gpus = sorted(set(re.findall(r"^\s*Name:\s*(gfx\w+)", raw.rocminfo, re.M)))
        host.amd_agents, host.rocm_error = rocm_agents_from_rocminfo(raw.rocminfo)
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
    ``frameworks`` (per framework: the worker's ``status``, JSON ``result`` and
    ``stderr``), ``wheel_lib_listing`` / ``ld_path_listing`` (directory -> file names: the
    wheels' ``nvidia/*/lib`` and the LD_LIBRARY_PATH directories), ``rocminfo`` and
    ``wheel_platform_tags`` (distribution -> the macOS platform tag of its WHEEL file) and
    ``requires`` (distribution -> its Requires-Dist lines; absent in older recordings) and
    ``conda_meta_listing`` (the record names in a conda env's ``conda-meta/``).
    Test fixtures are built this way so they cannot drift from the probe.
    """
    host_doc = dict(doc.get("host", {}))
    host_doc.setdefault("rocminfo", doc.get("rocminfo", ""))
    host = host_from_raw(build_dataclass(RawHost, host_doc))
    smi_raw = doc.get("nvidia_smi")
    smi = None
    if isinstance(smi_raw, dict):
        smi = nvidia_smi_from_output(smi_raw.get("header"), smi_raw.get("rows"),
                                     smi_raw.get("output", ""))
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
        libcuda_copies=libcuda_copies_from_ldconfig(doc.get("ldconfig", "")),
        env_cuda_libs=env_libs,
        wheel_cuda_libs=cuda_libs_in_dirs(doc.get("wheel_lib_listing", {})),
        ld_path_cuda_libs=cuda_libs_in_dirs(doc.get("ld_path_listing", {})),
        wheel_platform_tags=dict(doc.get("wheel_platform_tags", {})),
        requires={str(k): [str(r) for r in v] for k, v in doc.get("requires", {}).items()},
        conda_builds=conda_builds_from_listing(doc.get("conda_meta_listing", [])),
        frameworks=frameworks,
        process=dict(doc.get("process", {})),
    )


def conda_builds_from_listing(names: Iterable[str]) -> dict[str, dict[str, str]]:
    """conda-meta record names (``<name>-<version>-<build>.json``; conda allows no ``-`` in a
    version or build string) into ``{name: {"version": ..., "build": ...}}``.

    Example:
        >>> conda_builds_from_listing(["pyg-2.5.0-py311_torch_2.2.0_cpu.json", "history"])
        {'pyg': {'version': '2.5.0', 'build': 'py311_torch_2.2.0_cpu'}}
    """
    found: dict[str, dict[str, str]] = {}
    for name in names:
        parts = str(name).removesuffix(".json").rsplit("-", 2)
        if str(name).endswith(".json") and len(parts) == 3 and all(parts):
            found[parts[0]] = {"version": parts[1], "build": parts[2]}
    return dict(sorted(found.items()))


def nvidia_smi_from_output(header: str | None, rows: str | None, output: str = "") -> NvidiaSmi:
    """Interpret ``nvidia-smi`` (its header table) and its ``--query-gpu`` CSV rows.

    ``header`` None means the command failed; ``output`` is then what it printed
    ("Failed to initialize NVML: Driver/library version mismatch"), kept in ``error``.

    Example:
        >>> smi = nvidia_smi_from_output(
        ...     "| NVIDIA-SMI 525.89.02    Driver Version: 525.89.02    CUDA Version: 12.0 |",
        ...     "0, NVIDIA A100-SXM4-40GB, 40960, 8.0")
        >>> smi.driver_version, smi.cuda_version, smi.gpus[0].compute_capability
        ('525.89.02', '12.0', '8.0')
    """
    if header is None:
        said = " ".join(output.split())[:400]
        return NvidiaSmi(error=said or "nvidia-smi is installed but failed (is the driver loaded?)")
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
    smi.compute_modes = _COMPUTE_MODE.findall(f"{header}\n{output}")
    return smi


# The last column of a GPU's second table line: "| 0%  Default |", "| 0%  E. Process |".
_COMPUTE_MODE = re.compile(r"\d+%\s+(Default|E\. Process|E\. Thread|Prohibited)\s+\|")


# Libraries a CUDA build of a framework dlopens (sonames start with these).
CUDA_LIB_PREFIXES = (
    "libcuda.", "libcudart.", "libcudnn.", "libcublas.", "libcublasLt.", "libcufft.",
    "libcurand.", "libcusolver.", "libcusparse.", "libnvinfer.", "libnccl.", "libnvrtc.",
    "libnvJitLink.", "libcudnn_", "libcupti.", "libamdhip64.",
    "libstdc++.so.6",  # and the C++ runtime their extensions need (round 19: GLIBCXX)
    "libmpi.", "libpython",  # and what MPI bindings and simulators' modules link (round 24)
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


def libcuda_copies_from_ldconfig(text: str) -> list[str]:
    """Every path ``ldconfig -p`` lists for libcuda.so and libcuda.so.1, in its order.

    Example:
        >>> libcuda_copies_from_ldconfig("\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/wsl/lib/"
        ...     "libcuda.so.1\\n\\tlibcuda.so (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so")
        ['/usr/lib/wsl/lib/libcuda.so.1', '/lib/x86_64-linux-gnu/libcuda.so']
    """
    return [m.group(3) for line in text.splitlines()
            if (m := _LDCONFIG_LINE.match(line)) and m.group(1) in ("libcuda.so", "libcuda.so.1")]


def cuda_libs_in_dir(directory: str, names: Iterable[str]) -> dict[str, str]:
    """CUDA-related shared libraries among ``names`` (a directory listing) -> their paths."""
    return {
        n: f"{directory.rstrip('/')}/{n}"
        for n in sorted(names)
        if n.startswith(CUDA_LIB_PREFIXES) and ".so" in n
    }


def cuda_libs_in_dirs(listing: dict[str, Iterable[str]]) -> dict[str, str]:
    """CUDA libraries in several directories (directory -> names), the first directory
    listed winning for a soname, as the loader searches them.

    Example:
        >>> cuda_libs_in_dirs({"/a": ["libnvJitLink.so.12"], "/b": ["libnvJitLink.so.12"]})
        {'libnvJitLink.so.12': '/a/libnvJitLink.so.12'}
    """
    found: dict[str, str] = {}
    for directory, names in listing.items():
        for name, path in cuda_libs_in_dir(directory, names).items():
            found.setdefault(name, path)
    return dict(sorted(found.items()))


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
    return unique_matches(text, _LOAD_ERROR)


# A framework's own words for "I cannot report memory on this device" (not a fault):
# TF 2.21 on some hosts: "ValueError: Allocator stats not available for device 'CPU:0'";
# an unimplemented call: NotImplementedError / UnimplementedError / "not supported".
_CANNOT_REPORT_MEMORY = re.compile(
    r"(stats not available|not available for device|not implemented|unimplemented"
    r"|not supported|unsupported)", re.IGNORECASE,
)


def memory_stats_from_raw(raw: dict | None) -> tuple[str, str]:
    """Interpret one memory-statistics call the probe worker made on its device.

    ``raw`` is what the worker recorded, verbatim: ``{"call": ..., "result": ...}`` (the
    returned value: a dict of byte counts, ``None`` or ``{}``) or ``{"call": ...,
    "error": "ValueError: ..."}``. Every way of saying "this framework cannot report
    memory here" — zeros, ``None``, an empty dict, the allocator-stats ``ValueError``, an
    unimplemented call — becomes ``"unknown"``; a real figure is ``"works"``; any other
    exception stays ``"error: ..."``. Returns ``(value, detail)``, the detail in the
    framework's own words.

    Example:
        >>> memory_stats_from_raw({"call": "get_memory_info('CPU:0')",
        ...                        "result": {"current": 0, "peak": 0}})
        ('unknown', "get_memory_info('CPU:0') returned zeros")
    """
    if not raw:
        return "", ""
    call = str(raw.get("call", "the memory call"))
    if raw.get("error"):
        err = str(raw["error"])[:300]
        if _CANNOT_REPORT_MEMORY.search(err):
            return UNKNOWN_MEMORY, f"{call} raised {err}"
        return f"error: {err}", ""
    result = raw.get("result")
    if not result:
        return UNKNOWN_MEMORY, f"{call} returned {result!r}"
    if isinstance(result, dict):
        counts = [v for v in result.values() if isinstance(v, int | float)]
        if counts and any(v > 0 for v in counts):
            return "works", ""
        return UNKNOWN_MEMORY, f"{call} returned zeros"
    return "works", ""


def worker_errors(extra: dict) -> list[str]:
    """The error texts a worker kept in ``extra``: ``first_use_error``, any other
    ``*_error`` (``cudnn_error``), and each compiled extension's import error, as
    ``"<module>: <error>"`` (``extension_errors``)."""
    out = [str(v) for k, v in extra.items() if k.endswith("_error") and v]
    out += [f"{k}: {v}" for k, v in (extra.get("extension_errors") or {}).items()]
    return out


def framework_probe_from_worker(
    name: str,
    status: str,
    result: dict | None,
    stderr_tail: str = "",
    stdout_tail: str = "",
    describe: str = "",
) -> FrameworkProbe:
    """Interpret one probe worker's outcome (its status, JSON result and output tails).

    A worker that died or hung while importing a package that extends the framework (its
    result names it: ``extension_pending``) probed the framework itself: that result stands,
    and the package gets the death as its import error.

    Example:
        >>> p = framework_probe_from_worker("torch", "crashed", {"name": "torch", "status": "ok",
        ...     "version": "2.4.0", "extra": {"extension_pending": "torch_scatter"}},
        ...     describe="killed by SIGSEGV")
        >>> p.status, p.extra["extension_errors"]
        ('ok', {'torch_scatter': 'the process died importing it after torch: killed by SIGSEGV'})
    """
    pending = ((result or {}).get("extra") or {}).get("extension_pending")
    if result is not None and pending and status not in ("ok", "error"):
        extra = dict(result.get("extra") or {})
        errors = dict(extra.get("extension_errors") or {})
        what = "hung importing it" if status == "timeout" else "the process died importing it"
        errors[str(extra.pop("extension_pending"))] = (
            f"{what} after {name}: {describe or status}")[:400]
        extra["extension_errors"] = errors
        result, status = {**result, "extra": extra}, str(result.get("status", "ok"))
    load_errors = load_errors_from_log(stderr_tail)
    said = "\n".join((stderr_tail, str((result or {}).get("error", "")),
                      *worker_errors((result or {}).get("extra") or {})))
    messages, reported = framework_messages(said), reported_facts(said)
    said_all = said_text(said)
    if result is not None and status in ("ok", "error"):
        data = dict(result)
        data["physical_devices"] = [
            build_dataclass(DeviceInfo, d) for d in data.get("physical_devices", [])
        ]
        if "memory_stats_raw" in data:
            data["memory_stats"], data["memory_stats_detail"] = memory_stats_from_raw(
                data.pop("memory_stats_raw"))
        fields = set(FrameworkProbe.__dataclass_fields__)
        probe = FrameworkProbe(**{k: v for k, v in data.items() if k in fields})
        probe.load_errors = load_errors
        probe.messages, probe.reported, probe.said = messages, reported, said_all
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
        messages=messages,
        reported=reported,
        said=said_all,
    )
