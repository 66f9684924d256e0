"""Checks for Apple Silicon: Rosetta, tensorflow-metal compatibility, tensorflow-macos, XLA."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from packaging.specifiers import SpecifierSet

from devicebench.env.checks._util import (
    KB,
    as_version,
    at_least,
    fmt_mm,
    legacy_keras_on,
    macos_version,
    major_minor,
    matches,
    metal_release,
    ok_probe,
    tf_version,
)
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot


@dataclass(frozen=True)
class MetalChoice:
    """Which tensorflow-metal works for a Python / macOS / TensorFlow, from the KB's table.

    ``release`` is the newest release that fits (None when none does); ``blocker`` then
    says why ("python", "macos" or "tensorflow") and ``reason`` says it in words.
    """

    release: dict[str, Any] | None
    blocker: str = ""
    reason: str = ""


def _known_bad(kb: KB, metal_v: str, tf_v: str, keras3: bool = False) -> dict[str, Any] | None:
    """A recorded failure of this plugin/TensorFlow pair; ``keras3``: Keras 3 is the Keras in
    use (failures that Keras 2 avoids count only then)."""
    for bad in kb["metal"]["known_bad"]:
        if bad.get("keras3_only") and not keras3:
            continue
        if as_version(bad["metal"]) == as_version(metal_v) and matches(tf_v, bad["tensorflow"]):
            return bad
    return None


def metal_choice(kb: KB, python: str = "", macos: str = "", tensorflow: str = "") -> MetalChoice:
    """The newest tensorflow-metal that works with what is given ("" = not constrained).

    A release fits when its wheels cover the Python, its macOS minimum is met, it pairs
    with the TensorFlow and no known failure is recorded for that pair. A release
    without a verified Python range is taken to fit any Python the newest release's
    range does not exceed (no older release has wheels for a newer Python).

    Example:
        >>> from devicebench.env.checks import load_knowledge
        >>> kb = load_knowledge()
        >>> metal_choice(kb, python="3.12.4", macos="14.5", tensorflow="2.19.0").release["version"]
        '1.2.0'
        >>> metal_choice(kb, python="3.13.1").blocker
        'python'
    """
    releases = list(reversed(kb["metal"]["releases"]))
    ceiling = [s for s in SpecifierSet(releases[0].get("python", "")) if s.operator == "<"]
    fits_py = [
        r
        for r in releases
        if not python
        or matches(python, r.get("python", "") or ",".join(str(s) for s in ceiling))
    ]
    if not fits_py:
        newest = releases[0]
        return MetalChoice(
            None, "python",
            f"no tensorflow-metal release has a wheel for Python {fmt_mm(major_minor(python))}"
            f" (the newest, {newest['version']}, has wheels for Python {newest['python']})",
        )
    fits_os = [r for r in fits_py if not macos or matches(macos, r["macos"])]
    if not fits_os:
        oldest = min(r["macos"] for r in fits_py)
        return MetalChoice(
            None, "macos",
            f"every tensorflow-metal release needs macOS {oldest.lstrip('>=')} or newer "
            f"(this is macOS {macos})",
        )
    fits_tf = [
        r for r in fits_os
        if not tensorflow
        or (matches(tensorflow, r["tensorflow"]) and not _known_bad(kb, r["version"], tensorflow))
    ]
    if not fits_tf:
        return MetalChoice(
            None, "tensorflow",
            f"no tensorflow-metal release works with TensorFlow {tensorflow}"
            + (f" on Python {fmt_mm(major_minor(python))}" if python else ""),
        )
    return MetalChoice(fits_tf[0])


def metal_install_fix(snap: EnvSnapshot, kb: KB) -> str:
    """The exact command that installs a working TensorFlow + tensorflow-metal pair here.

    On a Python the recommended tensorflow-metal has no wheel for, the command first
    creates a virtual environment with a Python it does have wheels for; on a macOS too
    old for any release, it says to upgrade macOS.
    """
    metal = kb["metal"]
    cmd = metal["recommended_install"]
    rel = metal_release(kb, metal["recommended"]) or {}
    mac = snap.host.macos_version
    if mac and not matches(mac, rel.get("macos", "")):
        return (
            f"upgrade macOS (System Settings > General > Software Update): tensorflow-metal "
            f"{metal['recommended']} needs macOS {rel.get('macos', '').lstrip('>=')} or newer; "
            f"this is macOS {mac}. "
            "Until then: pip uninstall -y tensorflow-metal  # train on the CPU"
        )
    py = snap.host.python_version
    spec = rel.get("python", "")
    if py and spec and not matches(py, spec):
        newest = _newest_python(spec)
        return (
            f"python{newest} -m venv .venv-metal && . .venv-metal/bin/activate && {cmd}"
            f"  # tensorflow-metal {metal['recommended']} has wheels for Python {spec} only;"
            " or keep this Python and use Keras on PyTorch's MPS: pip install torch && "
            "export KERAS_BACKEND=torch"
        )
    return cmd


def _newest_python(spec: str) -> str:
    """The newest 3.x minor a Python specifier admits (">=3.9,<3.13" -> "3.12")."""
    for minor in range(20, 5, -1):
        if matches(f"3.{minor}", spec):
            return f"3.{minor}"
    return "3"


def check_mps_macos_features(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """PyTorch's MPS works, but this macOS is older than some MPS ops need
    (``[[torch_mps.features]]``): those ops raise at run time while the rest runs."""
    probe = snap.frameworks.get("torch")
    mac = macos_version(snap)
    if probe is None or mac is None or not any(
            d.kind == "MPS" for d in probe.physical_devices):
        return []
    rows = [r for r in kb["torch_mps"].get("features", [])
            if mac < as_version(r["macos"])]  # type: ignore[operator]
    if not rows:
        return []
    newest = max((r["macos"] for r in rows), key=as_version)
    return [Finding(
        "mps.ops-need-newer-macos", "warning",
        f"PyTorch's MPS on macOS {snap.host.macos_version}: some ops need macOS "
        + ", ".join(sorted({r["macos"] for r in rows}, key=as_version)),
        observed=f"torch {probe.version} lists the MPS device on macOS {snap.host.macos_version}",
        why="MPS runs here, but these ops run natively only on a newer macOS and raise or "
            "fall back below it: " + "; ".join(f"from {r['macos']}: {r['what']}" for r in rows)
            + ".",
        fix=f"update macOS to {newest} or newer (System Settings > Software Update); or keep the "
            "affected tensors on the CPU (.to('cpu')) for those ops",
        source=kb["torch_mps"]["features_info"]["source"])]


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
    mac = macos_version(snap)
    macos_spec = (rel or {}).get("macos") or kb["metal"]["macos"]
    os_too_old = mac is not None and not matches(str(mac), macos_spec)

    if os_too_old:
        out.append(
            Finding(
                "metal.macos-too-old",
                "error",
                f"tensorflow-metal {metal_v} needs macOS {macos_spec.lstrip('>=')} or newer",
                observed=f"macOS {snap.host.macos_version} with tensorflow-metal {metal_v}",
                why=(
                    "The Metal plugin is built for a newer macOS and uses Metal Performance "
                    "Shaders Graph features this macOS does not have: it fails to load "
                    "('Symbol not found ... (which was built for Mac OS X 12.0)')."
                ),
                fix=(
                    f"upgrade macOS to {macos_spec.lstrip('>=')} or newer (System Settings > "
                    "General > Software Update); until then: pip uninstall -y tensorflow-metal"
                    "  # train on the CPU"
                ),
                source=kb["metal_plugin_errors"]["built_for_source"],
            )
        )

    keras3 = at_least(snap.version_of("keras"), "3") and not legacy_keras_on(snap, kb)
    bad = _known_bad(kb, metal_v, tf_v, keras3) if tf_v else None
    if bad is not None:
        out.append(
            Finding(
                bad["id"],
                "error",
                f"tensorflow-metal {metal_v} does not work with TensorFlow {tf_v}",
                observed=f"tensorflow {tf_v} with tensorflow-metal {metal_v}",
                why=f"Reported failure: {bad['symptom']}.",
                fix=f"{bad['fix'] if bad.get('keras3_only') else fix}   (or: {bad['fix_alt']})",
                source=bad["source"],
            )
        )

    if rel is not None and tf_v and bad is None and not matches(tf_v, rel["tensorflow"]):
        lower = _lower_bound(rel["tensorflow"])
        newer = lower is not None and at_least(tf_v, lower)
        out.append(
            Finding(
                "metal.version-mismatch",
                "error" if newer else "warning",
                f"tensorflow-metal {metal_v} is not paired with TensorFlow "
                f"{fmt_mm(major_minor(tf_v))}",
                observed=(
                    f"tensorflow {tf_v} with tensorflow-metal {metal_v}; Apple pairs "
                    f"{metal_v} with TensorFlow {rel['tensorflow']}"
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
    if rel is not None and py and rel.get("python") and not matches(py, rel["python"]):
        out.append(
            Finding(
                "metal.python-unsupported",
                "error",
                f"tensorflow-metal {metal_v} has no wheel for Python {fmt_mm(major_minor(py))}",
                observed=(
                    f"Python {py} with tensorflow-metal {metal_v} (wheels for Python "
                    f"{rel['python']} only)"
                ),
                why=(
                    "The installed plugin was not built for this interpreter; it will not "
                    "load, and TensorFlow falls back to the CPU."
                ),
                fix=fix,
                source=rel.get("source", kb["metal"]["source"]),
            )
        )
    return out


def _lower_bound(spec: str) -> str | None:
    for s in SpecifierSet(spec):
        if s.operator in (">=", "=="):
            return s.version.rstrip(".*")
    return None


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
            fix=_tensorflow_macos_fix(snap, kb),
            source=tm["source"],
        )
    ]


def _tensorflow_macos_fix(snap: EnvSnapshot, kb: KB) -> str:
    if snap.host.machine == "x86_64" and not snap.host.rosetta:
        # an Intel Mac: no Metal plugin; plain tensorflow up to its last x86_64 release
        last = next((e["last"] for e in kb.get("platform_ceilings", [])
                     if e["framework"] == "tensorflow" and e["os"] == "Darwin"
                     and e["machine"] == "x86_64"), "")
        pin = f"'tensorflow=={last}'" if last else "tensorflow"
        return f"pip uninstall -y tensorflow-macos && pip install {pin}  # no Metal on Intel"
    install = metal_install_fix(snap, kb)
    if install.startswith("upgrade macOS"):
        return install  # nothing newer installs on this macOS
    return "pip uninstall -y tensorflow-macos tensorflow && " + install


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
