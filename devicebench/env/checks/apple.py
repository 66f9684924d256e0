"""Checks for Apple Silicon: Rosetta, tensorflow-metal compatibility, tensorflow-macos, XLA."""

from __future__ import annotations

from devicebench.env.checks._util import (
    KB,
    fmt_mm,
    in_range,
    major_minor,
    metal_release,
    ok_probe,
    parse_version,
    tf_version,
)
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot


def metal_install_fix(snap: EnvSnapshot, kb: KB) -> str:
    """The exact command that installs a working TensorFlow + tensorflow-metal pair here.

    On a Python the recommended tensorflow-metal has no wheel for, the command first
    creates a virtual environment with a Python it does have wheels for.
    """
    metal = kb["metal"]
    cmd = metal["recommended_install"]
    rel = metal_release(kb, metal["recommended"]) or {}
    py = snap.host.python_version
    low, high = rel.get("python_min", ""), rel.get("python_max", "")
    if py and not in_range(py, low, high):
        return (
            f"python{high} -m venv .venv-metal && . .venv-metal/bin/activate && {cmd}"
            f"  # tensorflow-metal {metal['recommended']} has wheels for Python "
            f"{low}-{high} only"
        )
    return cmd


def check_rosetta(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """x86_64 Python translated by Rosetta 2 on Apple Silicon -> error."""
    if not snap.host.rosetta:
        return []
    h = snap.host
    chip = h.apple_chip or "Apple Silicon"
    return [
        Finding(
            "env.rosetta",
            "error",
            "Python runs as x86_64 under Rosetta 2 on Apple Silicon",
            observed=(
                f"Python {h.python_version} ({h.python_executable or 'this interpreter'}) is "
                f"{h.python_arch or 'x86_64'}, translated by Rosetta 2 on {chip} "
                f"(sysctl.proc_translated=1; hardware {h.machine or 'arm64'})"
            ),
            why=(
                "An x86_64 interpreter loads only x86_64 wheels: no tensorflow-metal (arm64 "
                "only), no PyTorch MPS, so no Apple GPU at all, and everything runs translated "
                "on the CPU. TensorFlow's x86 wheels use AVX, which Rosetta 2 lacked before "
                "macOS 15: importing it can die with 'illegal hardware instruction'."
            ),
            fix=(
                f"install an arm64 (or universal2) Python, e.g. from {kb['rosetta']['python_org']}"
                " or Homebrew under /opt/homebrew, then: arch -arm64 python3 -m venv .venv && "
                ". .venv/bin/activate && python -c 'import platform; print(platform.machine())'"
                "  # must print arm64"
            ),
            source=kb["rosetta"]["source"],
        )
    ]


def check_metal_compat(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """tensorflow-metal against TensorFlow, Python and macOS, from Apple's table + reports."""
    if not snap.has("tensorflow-metal"):
        return []
    metal_v = snap.version_of("tensorflow-metal")
    tf_v = tf_version(snap, kb)
    rel = metal_release(kb, metal_v)
    out: list[Finding] = []
    fix = metal_install_fix(snap, kb)

    known_bad = False
    for bad in kb["metal"]["known_bad"]:
        if parse_version(bad["metal"]) != parse_version(metal_v)[:3] or not tf_v:
            continue
        if in_range(tf_v, bad["tensorflow_min"], bad["tensorflow_max"]):
            known_bad = True
            out.append(
                Finding(
                    bad["id"],
                    "error",
                    f"tensorflow-metal {metal_v} does not work with TensorFlow {tf_v}",
                    observed=f"tensorflow {tf_v} with tensorflow-metal {metal_v}",
                    why=f"Reported failure: {bad['symptom']}.",
                    fix=f"{fix}   (or: {bad['fix_alt']})",
                    source=bad["source"],
                )
            )

    if rel is not None and tf_v and not known_bad:
        tf_mm = major_minor(tf_v)
        lo, hi = parse_version(rel["tensorflow_min"]), parse_version(rel["tensorflow_max"])
        if tf_mm > hi or tf_mm < lo:
            newer = tf_mm > hi
            out.append(
                Finding(
                    "metal.version-mismatch",
                    "error" if newer else "warning",
                    f"tensorflow-metal {metal_v} is not paired with TensorFlow {fmt_mm(tf_mm)}",
                    observed=(
                        f"tensorflow {tf_v} with tensorflow-metal {metal_v}; Apple pairs "
                        f"{metal_v} with TensorFlow {rel['tensorflow_min']}"
                        + (f"-{rel['tensorflow_max']}" if hi != lo else "")
                    ),
                    why=(
                        "The plugin is built against one TensorFlow ABI: "
                        + (
                            "with a newer TensorFlow it typically fails to load "
                            "('Symbol not found') and TensorFlow sees no GPU."
                            if newer
                            else "with an older TensorFlow it may not load or may miss kernels."
                        )
                    ),
                    fix=fix,
                    source=rel.get("source", kb["metal"]["source"]),
                )
            )

    py = snap.host.python_version
    if rel is not None and py and "python_max" in rel:
        if not in_range(py, rel.get("python_min", ""), rel["python_max"]):
            out.append(
                Finding(
                    "metal.python-unsupported",
                    "error",
                    f"tensorflow-metal {metal_v} has no wheel for Python {fmt_mm(major_minor(py))}",
                    observed=(
                        f"Python {py} with tensorflow-metal {metal_v} (wheels for Python "
                        f"{rel.get('python_min', '?')}-{rel['python_max']} only)"
                    ),
                    why=(
                        "The installed plugin was not built for this interpreter; it will not "
                        "load, and TensorFlow falls back to the CPU."
                    ),
                    fix=fix,
                    source=rel.get("source", kb["metal"]["source"]),
                )
            )

    macos_min = (rel or {}).get("macos_min") or kb["metal"]["macos_min"]
    if snap.host.os == "Darwin" and snap.host.os_version:
        if parse_version(snap.host.os_version) < parse_version(macos_min):
            out.append(
                Finding(
                    "metal.macos-too-old",
                    "error",
                    f"tensorflow-metal {metal_v} needs macOS {macos_min} or newer",
                    observed=f"macOS {snap.host.os_version} with tensorflow-metal {metal_v}",
                    why="The Metal plugin uses Metal features this macOS does not have.",
                    fix=f"upgrade macOS to {macos_min} or newer (System Settings > General > "
                    "Software Update)",
                    source=kb["metal"]["source"],
                )
            )
    return out


def check_tensorflow_macos(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """tensorflow-macos installed: it ended at 2.16.2; TF >= 2.13 installs as `tensorflow`."""
    if not snap.has("tensorflow-macos"):
        return []
    tm = kb["tensorflow_macos"]
    ver = snap.version_of("tensorflow-macos")
    with_tf = (
        f" alongside tensorflow {snap.version_of('tensorflow')}" if snap.has("tensorflow") else ""
    )
    return [
        Finding(
            "metal.tensorflow-macos",
            "warning",
            "tensorflow-macos is a dead end: install `tensorflow` instead",
            observed=f"tensorflow-macos {ver} installed{with_tf}",
            why=(
                f"tensorflow-macos ends at {tm['last_version']} (a shim that only requires "
                f"tensorflow=={tm['last_version']}); since TF {tm['use_tensorflow_from']}, Apple "
                "Silicon installs TensorFlow as `tensorflow`. Keeping it pins you to old "
                "TensorFlow and guides that say 'tensorflow-macos 2.18' name a version that "
                "does not exist."
            ),
            fix="pip uninstall -y tensorflow-macos tensorflow && " + metal_install_fix(snap, kb),
            source=tm["source"],
        )
    ]


def check_xla_off_apple(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """Apple GPU visible to TensorFlow -> Keras turns XLA off there (info)."""
    if not snap.is_apple_silicon or snap.host.rosetta:
        return []
    probe = ok_probe(snap, "tensorflow")
    if probe is not None:
        gpus = probe.gpu_devices
        if not gpus:
            return []
        seen = ", ".join(f"{d.name} {d.description}".strip() for d in gpus)
    elif "tensorflow" not in snap.frameworks and snap.has("tensorflow-metal"):
        seen = f"tensorflow-metal {snap.version_of('tensorflow-metal')} installed (not probed)"
    else:
        return []
    keras_v = (probe.keras_version if probe else "") or snap.version_of("keras") or "?"
    jit = ""
    if probe is not None and probe.keras_jit_auto is not None:
        jit = f"; jit_compile='auto' resolves to {probe.keras_jit_auto}"
    return [
        Finding(
            "keras.xla-off-apple-gpu",
            "info",
            "Keras does not use XLA on Apple GPUs",
            observed=(
                f"TensorFlow {tf_version(snap, kb) or '?'} on "
                f"{snap.host.apple_chip or 'Apple Silicon'}"
                f" sees {seen}; Keras {keras_v}{jit}"
            ),
            why=(
                "Keras 3's model_supports_jit is False on Darwin/arm with a TF GPU (Keras 2's "
                "can_jit_compile likewise), so every op is dispatched on its own. Models made "
                "of many tiny ops (RNNs such as SimpleRNN, small batches) become dispatch-bound "
                "and can run slower on the Metal GPU than on the CPU."
            ),
            fix=(
                "try the CPU: tf.config.set_visible_devices([], 'GPU')  # before building the "
                "model; or the JAX backend: KERAS_BACKEND=jax python train.py"
            ),
            source=kb["keras_xla_apple"]["source"],
        )
    ]
