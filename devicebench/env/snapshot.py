"""`EnvSnapshot`: a versioned, JSON-serialisable record of everything probed.

The probe fills it in; checks read it and never probe anything themselves, so a
snapshot saved on a colleague's machine is diagnosed exactly like a live one.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devicebench.env.typed_json import build_dataclass
from devicebench.errors import SnapshotError

SCHEMA_VERSION = 1

# The frameworks' own distributions (the probe records every installed distribution).
TRACKED_DISTRIBUTIONS: tuple[str, ...] = (
    "tensorflow",
    "tensorflow-cpu",
    "tensorflow-macos",
    "tensorflow-intel",
    "tensorflow-metal",
    "tf-keras",
    "tf-nightly",
    "keras",
    "jax",
    "jaxlib",
    "jax-metal",
    "jax-cuda12-plugin",
    "jax-cuda13-plugin",
    "torch",
    "numpy",
)

# Environment variables that change how frameworks behave.
TRACKED_ENV_VARS: tuple[str, ...] = (
    "CUDA_VISIBLE_DEVICES",
    "CODEX_SANDBOX",  # set by the Codex CLI in commands it runs sandboxed (macOS: seatbelt)
    "KERAS_BACKEND",
    "KERAS_HOME",
    "KERAS_TORCH_DEVICE",
    "TF_USE_LEGACY_KERAS",
    "TF_ENABLE_ONEDNN_OPTS",
    "TF_FORCE_GPU_ALLOW_GROWTH",
    "TF_CPP_MIN_LOG_LEVEL",
    "TF_XLA_FLAGS",
    "TF_GPU_ALLOCATOR",
    "XLA_FLAGS",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "JAX_PLATFORMS",
    "JAX_ENABLE_X64",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "PYTORCH_ENABLE_MPS_FALLBACK",
    "PYTORCH_MPS_HIGH_WATERMARK_RATIO",
    "PYTORCH_CUDA_ALLOC_CONF",
    "LD_LIBRARY_PATH",
    "CONDA_PREFIX",
    "HSA_OVERRIDE_GFX_VERSION",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "BNB_CUDA_VERSION",  # bitsandbytes: overrides which native library it loads (round 17)
)


@dataclass
class HostInfo:
    """Facts about the machine and interpreter, gathered without any framework."""

    os: str = ""  # platform.system(): Linux | Darwin | Windows
    os_version: str = ""  # for display: "macOS 14.5", "Ubuntu 24.04 LTS (kernel 6.8.0)", ...
    # The macOS product version alone ("14.5", from platform.mac_ver()), checked as a
    # version where the probe reads it; "" off macOS or when unknown. Checks compare
    # this field, never os_version.
    macos_version: str = ""
    machine: str = ""  # hardware architecture (arm64 on Apple Silicon even under Rosetta)
    python_arch: str = ""  # architecture the interpreter is built for (platform.machine())
    rosetta: bool | None = None  # True: x86_64 Python translated on Apple Silicon
    python_version: str = ""
    python_implementation: str = ""
    python_executable: str = ""
    cpu_model: str = ""
    cpu_cores_physical: int | None = None
    cpu_cores_logical: int | None = None
    cpu_flags: list[str] = field(default_factory=list)  # selected ISA flags (avx512*, amx*)
    ram_bytes: int | None = None
    apple_chip: str = ""  # "Apple M1 Ultra" on Apple Silicon, "" elsewhere
    python_prefix: str = ""  # sys.prefix
    conda_env: bool = False  # sys.prefix is a conda environment (has conda-meta/)
    wsl: bool = False  # Linux under WSL2 (the kernel release names "microsoft-standard")
    wsl_version: int = 0  # 1: WSL 1 (kernel "4.4.0-NNNNN-Microsoft", no GPU access), 2, 0: none
    amd_gpus: list[str] = field(default_factory=list)  # gfx targets from rocminfo ("gfx1031")
    # rocminfo's GPU agents in its order (the HIP device order): "gfx1102 AMD Radeon RX 7600 XT"
    amd_agents: list[str] = field(default_factory=list)
    rocm_error: str = ""  # rocminfo's own error line ("Unable to open /dev/kfd ...")
    in_container: bool = False  # Linux inside a Docker/Podman container (/.dockerenv)


@dataclass
class BlasInfo:
    """numpy's BLAS as numpy reports it."""

    name: str = ""  # "scipy-openblas", "accelerate", "mkl", ... ("" = unknown)
    version: str = ""
    numpy_version: str = ""
    simd_found: list[str] = field(default_factory=list)


@dataclass
class NvidiaGpu:
    index: int = 0
    name: str = ""
    memory_total_mib: int | None = None
    compute_capability: str = ""


@dataclass
class NvidiaSmi:
    """What ``nvidia-smi`` reports (absent when the command is missing)."""

    driver_version: str = ""
    cuda_version: str = ""  # the newest CUDA the driver supports
    gpus: list[NvidiaGpu] = field(default_factory=list)
    error: str = ""  # nvidia-smi present but failed
    # Each GPU's compute mode as its table prints it ("Default", "E. Process", "Prohibited"),
    # in index order; [] where the table was not read (snapshots recorded before round 21).
    compute_modes: list[str] = field(default_factory=list)


@dataclass
class DeviceInfo:
    """One device as a framework sees it."""

    name: str = ""  # "/physical_device:GPU:0", "cuda:0", "TFRT_CPU_0"
    kind: str = ""  # CPU | GPU | TPU | MPS
    description: str = ""  # "NVIDIA H100", "METAL", "cpu"
    compute_capability: str = ""
    memory_bytes: int | None = None


UNKNOWN_MEMORY = "unknown"
_LEGACY_UNKNOWN_MEMORY = {"zeros": "returned zeros", "unsupported": "returned no statistics"}


@dataclass
class FrameworkProbe:
    """Result of importing one framework in its own subprocess.

    ``status`` is ``ok``, ``error`` (import raised), ``crashed`` (the process died,
    e.g. a Metal plugin's "Symbol not found" abort), ``timeout`` or ``skipped``.
    """

    name: str = ""
    status: str = "ok"
    version: str = ""
    import_seconds: float | None = None
    physical_devices: list[DeviceInfo] = field(default_factory=list)
    logical_devices: list[str] = field(default_factory=list)
    build: dict[str, Any] = field(default_factory=dict)  # is_cuda_build, cuda_version, ...
    keras_version: str = ""
    keras_jit_auto: bool | None = None  # how jit_compile="auto" resolved on this backend
    keras_error: str = ""
    # "works" | "unknown" (the framework cannot report memory on this device) | "error: ...";
    # the detail keeps the framework's own words ("returned zeros", "ValueError: ...").
    memory_stats: str = ""
    memory_stats_detail: str = ""
    # Library-loading failures the framework logged while importing, even when the
    # import succeeded (TF: "Could not load dynamic library 'libcudnn.so.7'; ...").
    load_errors: list[str] = field(default_factory=list)
    # The framework's own warning/error lines (import and first device use, bounded) and
    # the facts parsed from them (devicebench.env.messages.reported_facts).
    messages: list[str] = field(default_factory=list)
    reported: dict[str, Any] = field(default_factory=dict)
    # All it printed there (info lines dropped, whitespace collapsed, bounded: said_text),
    # read by the table of the frameworks' own diagnostic sentences ([[framework_says]]).
    said: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    error: str = ""  # exception text / stderr tail when status != ok

    def __post_init__(self) -> None:
        # Snapshots saved before "unknown" existed spelled it "zeros" or "unsupported".
        legacy = _LEGACY_UNKNOWN_MEMORY.get(self.memory_stats)
        if legacy is not None:
            self.memory_stats = UNKNOWN_MEMORY
            self.memory_stats_detail = self.memory_stats_detail or legacy

    @property
    def gpu_devices(self) -> list[DeviceInfo]:
        return [d for d in self.physical_devices if d.kind in ("GPU", "MPS")]


@dataclass
class EnvSnapshot:
    """Everything the probe found. Serialise with :meth:`to_json`, load with :func:`load_snapshot`.

    Example:
        >>> snap = EnvSnapshot(host=HostInfo(os="Linux"))
        >>> EnvSnapshot.from_dict(json.loads(snap.to_json())).host.os
        'Linux'
    """

    schema_version: int = SCHEMA_VERSION
    created_at: str = ""
    devicebench_version: str = ""
    host: HostInfo = field(default_factory=HostInfo)
    distributions: dict[str, str] = field(default_factory=dict)  # name -> version
    keras_config_backend: str = ""  # backend in ~/.keras/keras.json ("" if no file)
    blas: BlasInfo = field(default_factory=BlasInfo)
    nvidia_smi: NvidiaSmi | None = None
    env_vars: dict[str, str] = field(default_factory=dict)
    # CUDA-related shared libraries (soname -> path): the system's from `ldconfig -p`,
    # and those inside this Python's environment (conda: <prefix>/lib), which the
    # dynamic loader finds only through LD_LIBRARY_PATH.
    system_cuda_libs: dict[str, str] = field(default_factory=dict)
    # Every path ldconfig's cache lists for libcuda.so / libcuda.so.1, in its order (the
    # field above keeps the first only); [] in snapshots recorded before they were kept.
    libcuda_copies: list[str] = field(default_factory=list)
    env_cuda_libs: dict[str, str] = field(default_factory=dict)
    # CUDA libraries pip wheels carry (site-packages/nvidia/*/lib), and the CUDA libraries in
    # the LD_LIBRARY_PATH directories (which the loader searches before RUNPATHs).
    wheel_cuda_libs: dict[str, str] = field(default_factory=dict)
    ld_path_cuda_libs: dict[str, str] = field(default_factory=dict)
    # The macOS platform tag of each installed binary wheel (its dist-info WHEEL file):
    # "macosx_26_0_arm64" says the wheel was built for macOS 26.
    wheel_platform_tags: dict[str, str] = field(default_factory=dict)
    # Each installed distribution's own Requires-Dist lines, verbatim (what "pip check" reads);
    # {} in snapshots recorded before they were kept.
    requires: dict[str, list[str]] = field(default_factory=dict)
    # A conda env's packages (conda-meta record names): name -> its version and build string
    # ("py311_torch_2.2.0_cpu", "cuda120py311h..."); {} outside conda and in older snapshots.
    conda_builds: dict[str, dict[str, str]] = field(default_factory=dict)
    frameworks: dict[str, FrameworkProbe] = field(default_factory=dict)
    # State read inside the user's own process (devicebench.env.probe.read_process_state),
    # {} when doctor runs apart: the device masks then, and what the frameworks saw.
    process: dict[str, Any] = field(default_factory=dict)
    probes_concurrent: bool = False  # frameworks imported at once: import times inflated
    probe_errors: list[str] = field(default_factory=list)  # parts of the probe that failed

    # -- derived facts shared by checks -------------------------------------------------
    def has(self, dist: str) -> bool:
        return dist in self.distributions

    def version_of(self, dist: str) -> str:
        return self.distributions.get(dist, "")

    def loader_finds(self, soname: str) -> str:
        """Where the dynamic loader finds ``soname`` by name alone (LD_LIBRARY_PATH first,
        then ldconfig's cache), "" when it does not: a wheel's library with "" here is found
        only by frameworks that look in the wheel's directory themselves (RUNPATH).

        Example:
            >>> EnvSnapshot(ld_path_cuda_libs={"libcudnn.so.9": "/x/libcudnn.so.9"}
            ...             ).loader_finds("libcudnn.so.9")
            '/x/libcudnn.so.9'
        """
        return self.ld_path_cuda_libs.get(soname) or self.system_cuda_libs.get(soname, "")

    @property
    def is_apple_silicon(self) -> bool:
        arm = self.host.machine == "arm64" or bool(self.host.rosetta)
        return self.host.os == "Darwin" and arm

    @property
    def keras_backend(self) -> str:
        """The backend Keras will use: KERAS_BACKEND, else keras.json, else tensorflow."""
        return self.env_vars.get("KERAS_BACKEND") or self.keras_config_backend or "tensorflow"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EnvSnapshot:
        """Build a snapshot from parsed JSON; raises :class:`SnapshotError` on a bad shape."""
        if not isinstance(data, dict):
            raise SnapshotError(
                "snapshot is not a JSON object",
                fix="pass a file written by `devicebench doctor --save FILE`",
            )
        version = data.get("schema_version")
        if not isinstance(version, int):
            raise SnapshotError(
                "snapshot has no integer schema_version",
                why="it was not written by `devicebench doctor --save`",
                fix="save one with `devicebench doctor --save FILE`",
            )
        if version > SCHEMA_VERSION:
            raise SnapshotError(
                f"snapshot schema version {version} is newer than this devicebench "
                f"understands ({SCHEMA_VERSION})",
                fix="upgrade devicebench: pip install -U devicebench",
            )
        _migrate(data)
        snap = build_dataclass(cls, data, what="snapshot field",
                               why="the file was edited by hand or written by another program")
        if not data.get("host"):  # diagnosing it would print "OS  []"
            raise SnapshotError("snapshot has no host (OS, CPU, Python)",
                                why="every check starts from the host",
                                fix="re-save it with `devicebench doctor --save FILE`")
        counts = {"host.cpu_cores_physical": snap.host.cpu_cores_physical,
                  "host.cpu_cores_logical": snap.host.cpu_cores_logical,
                  "host.ram_bytes": snap.host.ram_bytes}
        bad = next((k for k, v in counts.items() if v is not None and v < 0), None)
        if bad:
            raise SnapshotError(f"snapshot field {bad}: expected a count >= 0, got "
                                f"{counts[bad]}", fix="re-save it with `devicebench doctor "
                                "--save FILE`")
        return snap


def _migrate(data: dict[str, Any]) -> None:
    """Fill fields older snapshots lack, in place (schema 1 before macos_version existed)."""
    host = data.get("host")
    if not isinstance(host, dict) or "macos_version" in host or host.get("os") != "Darwin":
        return
    text = host.get("os_version")
    if isinstance(text, str):
        host["macos_version"] = clean_macos_version(text.removeprefix("macOS").strip())


def clean_macos_version(text: str) -> str:
    """``"14.5"`` -> ``"14.5"``; anything that is not a release number -> ``""``.

    The single place a macOS product version string is parsed; checks then compare it
    with ``packaging.version.Version``.

    Example:
        >>> [clean_macos_version(t) for t in ("14.6.1", "macOS 14.5", "")]
        ['14.6.1', '', '']
    """
    from packaging.version import InvalidVersion, Version

    text = text.strip()
    if not text or not text[0].isdigit():
        return ""
    try:
        Version(text)
    except InvalidVersion:
        return ""
    return text


def load_snapshot(path: str | Path) -> EnvSnapshot:
    """Read a snapshot saved by ``devicebench doctor --save``.

    Raises:
        SnapshotError: the file is missing, a directory, unreadable, not JSON, of a
            newer schema, or of the wrong shape.
    """
    p = Path(path)
    if p.is_dir():
        raise SnapshotError(
            f"snapshot path is a directory: {p}", fix="pass the JSON file inside it"
        )
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SnapshotError(
            f"snapshot file not found: {p}",
            fix="check the path, or write one with `devicebench doctor --save FILE`",
        ) from None
    except PermissionError:
        raise SnapshotError(
            f"no permission to read snapshot file {p}",
            fix=f"check the file's permissions: ls -l {p}",
        ) from None
    except UnicodeDecodeError as exc:
        raise SnapshotError(
            f"snapshot file {p} is not a text file (undecodable byte at offset {exc.start})",
            why="a snapshot is a JSON text file; this looks like binary data (wrong file?)",
            fix="pass the JSON file written by `devicebench doctor --save FILE`",
        ) from None
    except OSError as exc:
        raise SnapshotError(
            f"cannot read snapshot file {p}: {exc.strerror or exc}",
            fix="check the path and that the disk is readable",
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SnapshotError(
            f"snapshot file {p} is not valid JSON (line {exc.lineno}: {exc.msg})",
            why="it may be truncated or edited by hand",
            fix="re-save it with `devicebench doctor --save FILE`",
        ) from None
    return EnvSnapshot.from_dict(data)
