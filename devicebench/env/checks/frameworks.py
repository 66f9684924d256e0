"""Checks on installed frameworks: conflicts, Keras 2/3, import failures, backends, oneDNN."""

from __future__ import annotations

from devicebench.env.checks._util import (
    DISPLAY,
    KB,
    fmt_mm,
    has_nvidia_gpu,
    in_range,
    legacy_keras_on,
    major_minor,
    parse_version,
    shorten,
    tf_distributions,
    tf_version,
)
from devicebench.env.checks.apple import metal_install_fix
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot

_FAILED = ("error", "crashed", "timeout")
_DIST_OF = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch", "keras": "keras"}
_CUDA_LIBS = ("libcudnn", "libcuda", "libcublas", "libcudart", "libnvrtc", "libnccl")


def check_multiple_tf(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """Two TensorFlow distributions installed at once (they share one package directory)."""
    dists = tf_distributions(snap, kb)
    if len(dists) < 2:
        return []
    pairs = kb["tensorflow"]["metapackage_pairs"]
    primary = "tensorflow" if "tensorflow" in dists else dists[0]
    base = snap.version_of(primary)
    clash = [
        d
        for d in dists
        if d != primary
        and not (primary == "tensorflow" and d in pairs and snap.version_of(d) == base)
    ]
    if not clash:
        return []
    involved = [primary, *clash]
    versions = {snap.version_of(d) for d in involved}
    listing = ", ".join(f"{d} {snap.version_of(d)}" for d in involved)
    keep = max((snap.version_of(d) for d in involved), key=parse_version)
    target = f"tensorflow=={keep}"
    if has_nvidia_gpu(snap) and snap.host.os == "Linux":
        target = f"'tensorflow[and-cuda]=={keep}'"
    return [
        Finding(
            "tf.multiple-distributions",
            "error" if len(versions) > 1 or "tf-nightly" in involved else "warning",
            "More than one TensorFlow distribution is installed",
            observed=f"installed at once: {listing}",
            why=(
                "They all install the same `tensorflow` package directory, so each overwrote "
                "the other's files: you get a mix of versions (or a CPU-only build where you "
                "expected GPU support), and uninstalling one deletes files the other needs."
            ),
            fix=f"pip uninstall -y {' '.join(involved)} && pip install {target}",
            source=kb["tensorflow"]["metapackage_source"],
        )
    ]


def check_legacy_keras(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """TF_USE_LEGACY_KERAS set without tf-keras installed, and tf-keras unused."""
    tf_v = tf_version(snap, kb)
    if not tf_v or major_minor(tf_v) < parse_version(kb["tensorflow"]["keras3_from"]):
        return []
    tfk = kb["tensorflow"]
    mm = fmt_mm(major_minor(tf_v))
    raw = snap.env_vars.get("TF_USE_LEGACY_KERAS")
    on = legacy_keras_on(snap, kb)
    if on and not snap.has("tf-keras"):
        return [
            Finding(
                "keras.legacy-without-tf-keras",
                "error",
                "TF_USE_LEGACY_KERAS is set but tf-keras is not installed",
                observed=f"TF_USE_LEGACY_KERAS={raw} with tensorflow {tf_v}; tf-keras missing",
                why=(
                    "With it set, tf.keras loads Keras 2 from the `tf_keras` package; without "
                    "the package, using tf.keras fails with \"No module named 'tf_keras'\"."
                ),
                fix=f"pip install 'tf-keras~={mm}.0'  # or: unset TF_USE_LEGACY_KERAS (Keras 3)",
                source=tfk["legacy_keras_source"],
            )
        ]
    if not snap.has("tf-keras"):
        return []
    tfk_v = snap.version_of("tf-keras")
    if on:
        if major_minor(tfk_v) != major_minor(tf_v):
            return [
                Finding(
                    "keras.tf-keras-version-mismatch",
                    "warning",
                    "tf-keras does not match the TensorFlow version",
                    observed=f"tf-keras {tfk_v} with tensorflow {tf_v} (TF_USE_LEGACY_KERAS={raw})",
                    why="tf-keras is released in step with TensorFlow; other pairs are untested.",
                    fix=f"pip install 'tf-keras~={mm}.0'",
                    source=tfk["legacy_keras_source"],
                )
            ]
        return []
    state = "unset" if raw is None else f"'{raw}' (TF only accepts 1, true or True)"
    return [
        Finding(
            "keras.tf-keras-unused",
            "info" if raw is None else "warning",
            "tf-keras is installed but tf.keras is Keras 3",
            observed=(
                f"tf-keras {tfk_v} installed, TF_USE_LEGACY_KERAS is {state}; tensorflow {tf_v}"
                f", keras {snap.version_of('keras') or '?'}"
            ),
            why=(
                "Since TF 2.16 tf.keras is Keras 3; tf-keras (Keras 2) is used only when "
                "TF_USE_LEGACY_KERAS=1 is set before TensorFlow is imported. Keras 2 code (e.g. "
                "tf.keras.optimizers.legacy) fails under Keras 3."
            ),
            fix=(
                "export TF_USE_LEGACY_KERAS=1  # if your code needs Keras 2; otherwise: "
                "pip uninstall -y tf-keras"
            ),
            source=tfk["keras3_source"],
        )
    ]


def _failure_hint(name: str, probe_error: str, snap: EnvSnapshot, kb: KB) -> tuple[str, str, tuple]:
    """(why, fix, related) for a failed import, recognising well-known messages."""
    err = probe_error.lower()
    dist = _DIST_OF.get(name, name)
    if "symbol not found" in err and ("metal" in err or snap.has("tensorflow-metal")):
        return (
            "Metal plugin mismatch: tensorflow-metal was built against another TensorFlow and "
            "references a symbol this TensorFlow does not export.",
            metal_install_fix(snap, kb),
            ("metal.symbol-not-found", "metal.tf-too-new", "metal.version-mismatch"),
        )
    if any(lib in err for lib in _CUDA_LIBS):
        fixes = {
            "tensorflow": kb["tensorflow"]["cuda_install"],
            "jax": "pip install -U 'jax[cuda12]'",
            "torch": "pip install --force-reinstall torch",
        }
        return (
            "CUDA libraries are missing or not on the library path (libcuda comes with the "
            "NVIDIA driver; cuDNN/cuBLAS come from the framework's CUDA wheels).",
            fixes.get(name, f"pip install --force-reinstall {dist}"),
            ("cuda.driver-too-old",),
        )
    if "illegal instruction" in err or "illegal hardware instruction" in err or "sigill" in err:
        if snap.host.rosetta:
            return (
                "The x86 build uses AVX, which Rosetta 2 lacked before macOS 15.",
                "install an arm64 Python and reinstall into a fresh venv (see env.rosetta)",
                ("env.rosetta",),
            )
        return (
            "The binary uses CPU instructions (e.g. AVX) this CPU does not have.",
            f"install a {dist} build for this CPU (e.g. from conda-forge), or build from source",
            (),
        )
    if "numpy" in err and ("_array_api" in err or "numpy 1.x" in err or "numpy.core" in err):
        return (
            "The framework was compiled against NumPy 1.x and cannot run with NumPy 2.",
            f"pip install 'numpy<2'  # or upgrade {dist} to a release built for NumPy 2",
            (),
        )
    if "timeout" in err or not err:
        return (
            "The import did not finish in time (a hung driver or plugin initialisation, or a "
            "very slow disk).",
            f"python -c 'import {name}'  # run by hand to see where it stops",
            (),
        )
    return (
        f"{DISPLAY.get(name, name)} cannot be used in this environment; the error says why.",
        f"python -c 'import {name}'  # reproduce; then: pip install --force-reinstall {dist}",
        (),
    )


def check_probe_failures(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A framework whose import errored, crashed or hung -> error with the captured text."""
    out: list[Finding] = []
    for name, probe in sorted(snap.frameworks.items()):
        if probe.status not in _FAILED:
            continue
        display = DISPLAY.get(name, name)
        version = probe.version or snap.version_of(_DIST_OF.get(name, name)) or "?"
        error = probe.error or ("import timed out" if probe.status == "timeout" else "")
        why, fix, related = _failure_hint(name, error or probe.status, snap, kb)
        out.append(
            Finding(
                "framework.import-failed",
                "error",
                f"{display} failed to import ({probe.status})",
                observed=(
                    f"{display} {version}: probe {probe.status}; error: "
                    f"{shorten(error) or '(no output captured)'}"
                ),
                why=why,
                fix=fix,
                related=related,
            )
        )
    return out


def check_no_frameworks(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """No TensorFlow, JAX or PyTorch at all -> say what to install."""
    if tf_distributions(snap, kb) or snap.has("jax") or snap.has("torch"):
        return []
    if any(name in snap.frameworks for name in ("tensorflow", "jax", "torch")):
        return []
    looked = ", ".join([*kb["tensorflow"]["distributions"], "jax", "torch"])
    extras = "tensorflow,metal" if snap.is_apple_silicon else "tensorflow"
    return [
        Finding(
            "frameworks.none",
            "warning",
            "No deep-learning framework is installed",
            observed=(
                f"none of {looked} is installed in {snap.host.python_executable or 'this Python'}"
            ),
            why=(
                "doctor can only check the host; devicebench measures training through "
                "TensorFlow, JAX or PyTorch with Keras."
            ),
            fix=f"pip install 'devicebench[{extras}]'  # or: pip install tensorflow",
            source=kb["backends"]["source"],
        )
    ]


def check_other_backends(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """JAX or PyTorch missing -> info: another Keras backend may train this model faster."""
    if not (
        tf_distributions(snap, kb) or snap.has("keras") or snap.has("jax") or snap.has("torch")
    ):
        return []
    keras_v = snap.version_of("keras")
    need_k3 = bool(keras_v) and parse_version(keras_v)[:1] < (3,)
    k3 = " 'keras>=3'" if need_k3 else ""
    out: list[Finding] = []
    if not snap.has("jax"):
        out.append(
            Finding(
                "keras.jax-missing",
                "info",
                "JAX is not installed: Keras' JAX backend may train your model faster",
                observed=f"jax not installed; keras {keras_v or 'not installed'}",
                why=(
                    "Keras 3 runs the same model on TensorFlow, JAX or PyTorch; which is fastest "
                    f"depends on the model and machine ({kb['backends']['rnn_evidence']})."
                ),
                fix=f"pip install jax{k3}  # then: KERAS_BACKEND=jax python train.py",
                source=kb["backends"]["source"],
            )
        )
    if not snap.has("torch"):
        out.append(
            Finding(
                "keras.torch-missing",
                "info",
                "PyTorch is not installed: one more Keras backend to compare",
                observed=f"torch not installed; keras {keras_v or 'not installed'}",
                why=(
                    "Keras 3 can also train on PyTorch (KERAS_BACKEND=torch); it uses cuDNN for "
                    "LSTM/GRU on CUDA, though it was slower than TF and JAX for a tiny RNN on CPU."
                ),
                fix=f"pip install torch{k3}  # then: KERAS_BACKEND=torch python train.py",
                source=kb["backends"]["source"],
            )
        )
    return out


def check_onednn(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """TensorFlow on x86_64 Linux/Windows: state of oneDNN custom ops (info)."""
    h = snap.host
    arch = (h.python_arch or h.machine).lower()
    if arch not in ("x86_64", "amd64") or h.os not in kb["onednn"]["default_on_from"]:
        return []
    tf_v = tf_version(snap, kb)
    if not tf_v:
        return []
    var = kb["onednn"]["env_var"]
    since = kb["onednn"]["default_on_from"][h.os]
    raw = snap.env_vars.get(var)
    if raw is None:
        on = in_range(tf_v, since)
        state = (
            f"unset, so {'on' if on else 'off'} by default ({h.os} x86 default since TF {since})"
        )
    elif raw.strip().lower() in ("1", "true"):
        on, state = True, f"{var}={raw}: on"
    elif raw.strip().lower() in ("0", "false"):
        on, state = False, f"{var}={raw}: off"
    else:
        on, state = in_range(tf_v, since), f"{var}={raw} is not 0/1; TF ignores it"
    source = kb["onednn"]["source" if h.os == "Linux" else "source_windows"]
    return [
        Finding(
            "tf.onednn",
            "info",
            f"oneDNN custom operations are {'on' if on else 'off'}",
            observed=f"TensorFlow {tf_v} on {h.os} {h.python_arch or h.machine}; {state}",
            why=(
                "oneDNN fuses and reorders CPU ops: usually faster, but float results differ "
                "slightly from runs with it off (different rounding order), so compare runs "
                "only with the same setting."
            ),
            fix=(
                f"export {var}=0  # off, e.g. for bit-for-bit comparisons"
                if on
                else f"export {var}=1  # on: usually faster on x86 CPUs"
            ),
            source=source,
        )
    ]
