"""What the frameworks say about themselves, read from their own output (pure, no I/O).

A framework's import and first device use print the facts doctor most needs: the cuDNN it
loaded vs the one it was built with, a plugin of another release, a GPU its build has no
kernels for, a NumPy it was not compiled for. :func:`framework_messages` keeps those lines
(bounded); :func:`reported_facts` parses the ones whose wording the frameworks fix in their
source, so checks compare versions instead of matching prose. The patterns paraphrase the
messages' format strings, cited beside each.
"""

from __future__ import annotations

import re
from typing import Any

MAX_MESSAGES = 40
MAX_LINE = 400
MAX_SAID = 6000

# Log lines worth keeping: absl/TF/XLA "W"/"E"/"F" lines, Python warnings, errors.
_KEEP = re.compile(
    r"^(?:[WEF]\d{4} |[WEF] |\d{4}-\d\d-\d\d [\d:.]+: [WEF] )|Warning:|Error:|error:|"
    r"not compatible|cannot be run in|Could not|Cannot |Unable to|failed to initialize|"
    r"too old|older than|not found|version mismatch|Mismatched|is not compatible"
)


def framework_messages(text: str) -> list[str]:
    """The warning/error lines of a framework's stderr, each once, at most 40 of 400 chars.

    Example:
        >>> framework_messages("I noise\\nW0000 tf] Could not load dynamic library 'x'\\n")
        ["W0000 tf] Could not load dynamic library 'x'"]
    """
    return unique_matches(text, _KEEP, whole_line=True, limit=MAX_MESSAGES)


# Informational log lines (absl "I0000 ...", TF's "2024-01-01 12:00:00.0: I ...") say nothing
# doctor reads; everything else a framework printed is kept for the message table.
_INFO = re.compile(r"^(?:I\d{4} |I |\d{4}-\d\d-\d\d [\d:.]+: I )")


def said_text(text: str) -> str:
    """What a framework printed, whitespace collapsed, info log lines left out, bounded.

    The table of the frameworks' own diagnostic sentences (``[[framework_says]]`` in the
    checks' knowledge) is matched against this text: a sentence wrapped over lines (NumPy's
    "compiled using NumPy 1.x cannot be run in\\nNumPy 2.0.0") reads as one.

    Example:
        >>> said_text("I0000 noise\\nA module that was compiled using NumPy 1.x cannot be run in\\n"
        ...           "NumPy 2.0.0 as it may crash.")
        'A module that was compiled using NumPy 1.x cannot be run in NumPy 2.0.0 as it may crash.'
    """
    kept = (line for line in text.splitlines() if not _INFO.match(line.strip()))
    return " ".join(" ".join(kept).split())[:MAX_SAID]


def unique_matches(text: str, pattern: re.Pattern[str], *, whole_line: bool = False,
                   limit: int | None = None) -> list[str]:
    """Each line of ``text`` that ``pattern`` matches — the whole line, or the match's first
    group — stripped, cut at 400 characters, once each, in order, at most ``limit``."""
    out: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        m = pattern.search(line)
        if not m:
            continue
        found = (line if whole_line else m.group(1)).strip()[:MAX_LINE]
        if found and found not in out:
            out.append(found)
            if limit is not None and len(out) >= limit:
                break
    return out


def _cudnn_number(text: str) -> str:
    """cuDNN versions as the frameworks print them: "8.9.4", or an integer "8906" / "90100"."""
    if "." in text:
        return text
    n = int(text)
    if n >= 90000:  # cuDNN 9 encodes major*10000 + minor*100 + patch
        return f"{n // 10000}.{n // 100 % 100}.{n % 100}"
    return f"{n // 1000}.{n // 100 % 10}.{n % 100}"  # cuDNN <= 8: major*1000 + minor*100


# XLA/TF stream_executor/cuda/cuda_dnn.cc: "Loaded runtime CuDNN library: %s but source was
# compiled with: %s" (older TF: "...: 7201 (compatibility version 7200) but source was
# compiled with 7004").
_CUDNN_LOADED = re.compile(
    r"Loaded runtime CuDNN library:? (\d+(?:\.\d+)*).*?but source was compiled with:? "
    r"(\d+(?:\.\d+)*)")
# jax/_src/xla_bridge.py (jax 0.4.2x): "Found cuDNN version %d, but JAX was built against
# version %d"; later: "Version JAX was built against: %d ... Installed version: %d".
_JAX_CUDNN_OLD = re.compile(r"Found cuDNN version (\d+), but JAX was built against version (\d+)")
_JAX_CUDNN_NEW = re.compile(
    r"Outdated cuDNN installation found\.\s*Version JAX was built against: (\d+)\s*"
    r"Minimum supported: (\d+)\s*Installed version: (\d+)", re.S)
# jax/_src/xla_bridge.py: "JAX plugin %s version %s is installed, but it is not compatible
# with the installed jaxlib version %s"
_JAX_PLUGIN = re.compile(
    r"JAX plugin (\w+) version ([\w.+]+) is installed, but it is not compatible with the "
    r"installed jaxlib version ([\w.+]+)")
_PJRT = re.compile(r"Mismatched PJRT plugin PJRT API version \(([\d.]+)\) and framework PJRT "
                   r"API version ([\d.]+)")
# xla/pjrt/c/pjrt_c_api_helpers.cc (ActualStructSizeIsGreaterOrEqual): "Unexpected %s size:
# expected %d, got %d. The plugin is likely built with a later version than the framework.
# This plugin is built with PJRT API version %d.%d." -- the newer wording of the same skew.
_PJRT_SIZE = re.compile(r"Unexpected (PJRT_\w+) size: expected \d+, got \d+\. The plugin is "
                        r"likely built with an? (\w+) version than the framework\.\s*This "
                        r"plugin is built with PJRT API version ([\d.]*\d)")
# jax/_src/xla_bridge.py: "Unable to initialize backend '%s': %s"
_BACKEND = re.compile(r"Unable to initialize backend '(\w+)'")
# ... whose cause is the plugin's library: "Unable to initialize backend 'tpu': INTERNAL: Failed
# to open /.../libtpu/libtpu.so: /.../libtpu.so: cannot open shared object file" (round 7).
_BACKEND_LIB = re.compile(r"Unable to initialize backend '(\w+)': [^\n]*?Failed to open "
                          r"(\S+?\.(?:so|dylib|dll))\b")
# torch/cuda/__init__.py _check_capability: "%s with CUDA capability sm_%d%d is not compatible
# with the current PyTorch installation. The current PyTorch install supports CUDA
# capabilities %s."
_TORCH_ARCH = re.compile(r"(\S.*?) with CUDA capability (sm_\d+) is not compatible with the "
                         r"current PyTorch installation\.?\s*The current PyTorch install "
                         r"supports CUDA capabilities ([\w ]+)\.", re.S)
# torch/cuda: "The NVIDIA driver on your system is too old (found version %d)"
_DRIVER_OLD = re.compile(r"NVIDIA driver on your system is too old \(found version (\d+)\)")
# numpy/core/_multiarray_umath.py: "A module that was compiled using NumPy 1.x cannot be run
# in NumPy %s as it may crash."
_NUMPY_ABI = re.compile(r"compiled using NumPy 1\.x cannot be run in\s+NumPy ([\d.]+\w*)")
_LIBDEVICE = re.compile(r"libdevice not found|Can't find libdevice directory|"
                        r"libdevice is required by this HLO module")
_DLOPEN = re.compile(r"Could not load dynamic library '([^']+)'")
# The dynamic loader (an ImportError from a framework's extension module): "libcudnn.so.9:
# cannot open shared object file: No such file or directory".
_LD_MISSING = re.compile(r"(lib[\w.+-]+\.so[.\d]*): cannot open shared object file")
# TensorFlow's summary line, which from 2.16 on often follows no "Could not load dynamic
# library" line naming the library (tensorflow#66987): the GPU libraries failed to open,
# unnamed.
_DLOPEN_SOME = re.compile(r"Cannot dlopen some GPU libraries")
# jax/_src/lib/__init__.py check_jaxlib_version: "jaxlib is version %s, but this version of jax
# requires version >= %s." and "jaxlib version %s is newer than and incompatible with jax
# version %s. Please update your jax and/or jaxlib packages."
_JAXLIB_OLD = re.compile(r"jaxlib is version ([\w.+]*\w), but this version of jax requires "
                         r"version >= (\d+(?:\.\d+)*)")
_JAXLIB_NEW = re.compile(r"jaxlib version ([\w.+]*\w) is newer than and incompatible with jax "
                         r"version (\d+(?:\.\d+)*)")
_UNDEFINED = re.compile(r"(\S+\.so[.\d]*): undefined symbol: (\w+)(?:, version (\S+))?")
# HIP's runtime (hip_code_object.cpp) when a build has no code object for the GPU's target:
# "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!"
_NO_KERNEL = re.compile(r"no kernel image is available|HIP error: invalid device function|"
                        r"hipErrorNoBinaryForGpu|Unable to find code object for all current")
# torch/__init__.py (_load_dll_libraries, Windows): err.strerror += f' Error loading "{dll}" or
# one of its dependencies.' after ctypes.WinError (126: a module, or one it needs, is missing;
# 1114: a DLL's initialisation routine failed).
_WIN_DLL = re.compile(r"\[WinError (\d+)\][^\n]*?Error loading \"([^\"]+?\.dll)\"")
# CPython's loader for an extension module on Windows (Python/dynload_win.c): "DLL load failed
# while importing _pywrap_tensorflow_internal: A dynamic link library (DLL) initialization
# routine failed." (the FormatMessage text of the Windows error; 1114 and 126 are told apart by
# it, in English; another language keeps the module name and leaves the code unknown, 0).
_PY_DLL = re.compile(r"DLL load failed while importing (\w+): ([^\n]*)")
_PY_DLL_CODES = (("initiali", 1114), ("could not be found", 126), ("cannot find", 126))
# TensorFlow's ROCm build (gpu_device.cc, logged at INFO): "Ignoring visible gpu device (device:
# 0, name: ..., pci bus id: ...) with AMDGPU version : gfx1100. The supported AMDGPU versions
# are gfx1030gfx1100, gfx900, ...".
_TF_ROCM_IGNORED = re.compile(r"Ignoring visible gpu device \(device: \d+, name: ([^,]*),[^)]*\) "
                              r"with AMDGPU version : (gfx[0-9a-f]+)\. The supported AMDGPU "
                              r"versions are ([^\n]*?)\.?(?:\n|$)")


def reported_facts(text: str) -> dict[str, Any]:
    """Facts a framework stated in ``text`` (its stderr, error or first-use error).

    Keys (present only when stated): ``cudnn_loaded``/``cudnn_built`` (dotted versions),
    ``cudnn_min``, ``plugin_mismatch`` ({plugin, version, jaxlib}), ``pjrt_mismatch``,
    ``arch_unsupported`` ({gpu, arch, supported}), ``driver_cuda_found`` ("11.6"),
    ``numpy_abi`` (the NumPy 2 version), ``libdevice_missing``, ``dlopen_failed`` (sonames
    TensorFlow or the dynamic loader could not open), ``dlopen_unnamed`` (TensorFlow said
    "Cannot dlopen some GPU libraries" and named none), ``jaxlib_skew`` (jax's own check),
    ``undefined_symbol`` ({library, symbol, version}), ``no_kernel_image``,
    ``dll_load_failed`` ({dll, code}: a Windows DLL that failed to load),
    ``backend_library_missing`` ({backend, library}: a JAX plugin's library did not load),
    ``rocm_gpu_ignored`` ({gpu, gfx, supported}: TensorFlow's ROCm build dropped a GPU).

    Example:
        >>> reported_facts("Loaded runtime CuDNN library: 9.0.0 but source was compiled "
        ...                "with: 9.3.0.  CuDNN library needs ...")
        {'cudnn_loaded': '9.0.0', 'cudnn_built': '9.3.0'}
    """
    facts: dict[str, Any] = {}
    if m := _CUDNN_LOADED.search(text):
        facts["cudnn_loaded"], facts["cudnn_built"] = map(_cudnn_number, m.groups())
    elif m := _JAX_CUDNN_OLD.search(text):
        facts["cudnn_loaded"], facts["cudnn_built"] = _cudnn_number(m[1]), _cudnn_number(m[2])
    elif m := _JAX_CUDNN_NEW.search(text):
        facts["cudnn_built"] = _cudnn_number(m[1])
        facts["cudnn_min"] = _cudnn_number(m[2])
        facts["cudnn_loaded"] = _cudnn_number(m[3])
    if m := _JAX_PLUGIN.search(text):
        facts["plugin_mismatch"] = {"plugin": m[1], "version": m[2], "jaxlib": m[3]}
    if m := _PJRT.search(text):
        facts["pjrt_mismatch"] = {"plugin_api": m[1], "framework_api": m[2]}
    elif m := _PJRT_SIZE.search(text):
        facts["pjrt_mismatch"] = {"plugin_api": m[3], "plugin_built": m[2], "struct": m[1]}
    if "pjrt_mismatch" in facts and (b := _BACKEND.search(text)):
        facts["pjrt_mismatch"]["backend"] = b[1]
    if m := _BACKEND_LIB.search(text):
        facts["backend_library_missing"] = {"backend": m[1], "library": m[2].rstrip(":")}
    if m := _TORCH_ARCH.search(text):
        facts["arch_unsupported"] = {"gpu": m[1].strip().splitlines()[-1].strip(),
                                     "arch": m[2], "supported": m[3].split()}
    if m := _DRIVER_OLD.search(text):
        n = int(m[1])
        facts["driver_cuda_found"] = f"{n // 1000}.{n % 1000 // 10}"
    if m := _NUMPY_ABI.search(text):
        facts["numpy_abi"] = m[1]
    if _LIBDEVICE.search(text):
        facts["libdevice_missing"] = True
    if m := _JAXLIB_OLD.search(text):
        facts["jaxlib_skew"] = {"jaxlib": m[1], "jax_needs": m[2]}
    elif m := _JAXLIB_NEW.search(text):
        facts["jaxlib_skew"] = {"jaxlib": m[1], "jax": m[2]}
    if failed := sorted(set(_DLOPEN.findall(text)) | set(_LD_MISSING.findall(text))):
        facts["dlopen_failed"] = failed
    elif _DLOPEN_SOME.search(text):
        facts["dlopen_unnamed"] = True
    if m := _UNDEFINED.search(text):
        facts["undefined_symbol"] = {"library": m[1], "symbol": m[2], "version": m[3] or ""}
    if _NO_KERNEL.search(text):
        facts["no_kernel_image"] = True
    if m := _WIN_DLL.search(text):
        facts["dll_load_failed"] = {"dll": m[2].replace("\\\\", "\\").rsplit("\\", 1)[-1],
                                    "path": m[2], "code": int(m[1])}
    elif m := _PY_DLL.search(text):
        code = next((c for t, c in _PY_DLL_CODES if t in m[2].lower()), 0)
        facts["dll_load_failed"] = {"dll": f"{m[1]}.pyd", "path": m[1], "code": code}
    if m := _TF_ROCM_IGNORED.search(text):
        facts["rocm_gpu_ignored"] = {"gpu": m[1].strip(), "gfx": m[2], "supported": m[3]}
    return facts
