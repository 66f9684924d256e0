"""Checks on installed frameworks: conflicts, Keras 2/3, import failures, backends, oneDNN."""

from __future__ import annotations

from packaging.version import Version

from devicebench.env.checks._util import (
    DISPLAY,
    KB,
    as_version,
    at_least,
    fmt_mm,
    has_nvidia_gpu,
    legacy_keras_on,
    major_minor,
    matches,
    tf_distributions,
    tf_version,
)
from devicebench.env.checks.apple import metal_install_fix
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot


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
    keep = max(
        (snap.version_of(d) for d in involved), key=lambda v: as_version(v) or Version("0")
    )
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
    if not tf_v or not at_least(tf_v, kb["tensorflow"]["keras3_from"]):
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


def tf_releases_for_python(python: str, kb: KB) -> list[str]:
    """The TensorFlow releases (major.minor) with wheels for this Python version."""
    v = ".".join(python.split(".")[:2])
    return [rel for rel, spec in kb["tensorflow_python"]["releases"].items()
            if v and matches(v, spec)]


def python_newer_than_pins(python: str, kb: KB) -> tuple[str, str]:
    """Where ``python`` is newer than older framework releases support: ("TensorFlow 2.12
    and PyTorch 2.0", the newest Python those older releases have wheels for), else ("", "").

    Example:
        >>> from devicebench.env.checks import load_knowledge
        >>> python_newer_than_pins("3.11.2", load_knowledge())
        ('TensorFlow 2.12 and PyTorch 2.0', '3.10')
        >>> python_newer_than_pins("3.10.12", load_knowledge())
        ('', '')
    """
    v = fmt_mm(major_minor(python)) if major_minor(python) else ""
    if not v:
        return "", ""
    firsts, olders = [], []
    for name, table in (("TensorFlow", kb["tensorflow_python"]), ("PyTorch", kb["torch_python"])):
        releases = sorted(table["releases"], key=as_version)
        ok = [r for r in releases if matches(v, table["releases"][r])]
        if not ok or ok[0] == releases[0]:
            continue
        before = releases[releases.index(ok[0]) - 1]
        spec = table["releases"][before]
        best = next((f"3.{m}" for m in range(30, 5, -1) if matches(f"3.{m}", spec)), "")
        firsts.append(f"{name} {ok[0]}")
        if best:
            olders.append(best)
    older = min(olders, key=as_version) if olders else ""
    return " and ".join(firsts), older


def pythons_for_older_releases(python: str, kb: KB) -> str:
    """The newest Python each run of older releases has wheels for, per framework, for the
    releases before the first one with wheels for ``python`` (round 15: a project's pin lives
    in its requirements, which the snapshot does not hold, so every run is named).

    Example:
        >>> from devicebench.env.checks import load_knowledge
        >>> pythons_for_older_releases("3.12.1", load_knowledge())[:46]
        'TensorFlow 2.12-2.15: 3.11, 2.10-2.11: 3.10; P'
    """
    v = fmt_mm(major_minor(python)) if major_minor(python) else ""
    parts = []
    for name, table in (("TensorFlow", kb["tensorflow_python"]), ("PyTorch", kb["torch_python"])):
        runs: list[tuple[str, str, str]] = []  # (newest Python, first release, last release)
        for rel in sorted(table["releases"], key=as_version):
            if v and matches(v, table["releases"][rel]):
                break
            best = next((f"3.{m}" for m in range(30, 5, -1)
                         if matches(f"3.{m}", table["releases"][rel])), "")
            if runs and runs[-1][0] == best:
                runs[-1] = (best, runs[-1][1], rel)
            elif best:
                runs.append((best, rel, rel))
        if runs:
            parts.append(f"{name} " + ", ".join(
                f"{a}-{b}: {py}" if a != b else f"{a}: {py}" for py, a, b in reversed(runs)))
    return "; ".join(parts)


def check_no_frameworks(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """No TensorFlow, JAX or PyTorch at all -> say what to install."""
    if tf_distributions(snap, kb) or snap.has("jax") or snap.has("torch"):
        return []
    if any(name in snap.frameworks for name in ("tensorflow", "jax", "torch")):
        return []
    if snap.has("mlx"):
        return []  # round 14: MLX is a framework too; the probe does not import it
    looked = ", ".join([*kb["tensorflow"]["distributions"], "jax", "torch"])
    extras = "tensorflow,metal" if snap.is_apple_silicon else "tensorflow"
    fix = f"pip install 'devicebench[{extras}]'  # or: pip install tensorflow"
    supported = tf_releases_for_python(snap.host.python_version, kb)
    if snap.host.python_version and not supported:
        newest = max(kb["tensorflow_python"]["releases"], key=as_version)
        spec = kb["tensorflow_python"]["releases"][newest]
        py = next((f"3.{m}" for m in range(30, 5, -1) if matches(f"3.{m}", spec)), "3.12")
        fix = (f"no TensorFlow release has wheels for Python {snap.host.python_version} "
               f"(TensorFlow {newest}: {spec}): create the environment with a supported "
               f"Python, e.g. python{py} -m venv .venv, then pip install tensorflow")
    why = ("doctor can only check the host; devicebench measures training through "
           "TensorFlow, JAX or PyTorch with Keras.")
    python = snap.host.python_version
    newer, older_py = python_newer_than_pins(python, kb)
    if newer:
        why += (f" Python {fmt_mm(major_minor(snap.host.python_version))} has wheels only "
                f"from {newer} on: an install pinned to an older release (a project's "
                "requirements) finds none ('No matching distribution found ... from "
                "versions: none').")
    if snap.host.os == "Windows":
        tfk = kb["tensorflow"]
        last = tfk["windows_native_gpu_max"]
        why += (f" On native Windows TensorFlow {last} was the last release with GPU support "
                f"(there is no tensorflow-gpu after {last}; see {tfk['windows_source']}): newer "
                "releases run on the CPU there, and on the GPU only in WSL2.")
        legacy = kb["tensorflow_python"]["releases"].get(last, "")
        if legacy and matches(snap.host.python_version, legacy):
            fix += ("  # CPU; for the NVIDIA GPU: run it in WSL2 (pip install "
                    "'tensorflow[and-cuda]' there), or natively: pip install 'tensorflow<2.11'")
        else:
            fix += ("  # CPU; for the NVIDIA GPU: run it in WSL2 (pip install "
                    "'tensorflow[and-cuda]' there)")
    if snap.is_apple_silicon and supported:
        metal = kb["metal"]
        why += (f" On Apple Silicon TensorFlow reaches the GPU only through Apple's "
                f"tensorflow-metal plugin, whose releases have wheels for a few Pythons and "
                f"TensorFlow releases each (tensorflow-metal {metal['recommended']}: see "
                f"{metal['source']}); install the pair together, or pip fails on the plugin.")
        fix = metal_install_fix(snap, kb) + "  # TensorFlow with the Apple GPU plugin"
    if newer and older_py:
        fix += (f"  # if pip found no wheel for a pinned older release: create the "
                f"environment with Python {older_py} (python{older_py} -m venv .venv), or "
                f"the newest Python the pin supports ({pythons_for_older_releases(python, kb)})")
    return [
        Finding(
            "frameworks.none",
            "warning",
            "No deep-learning framework is installed",
            observed=(
                f"none of {looked} is installed in {snap.host.python_executable or 'this Python'}"
                + (f" (Python {snap.host.python_version})" if snap.host.python_version else "")
            ),
            why=why,
            fix=fix,
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
    need_k3 = bool(keras_v) and not at_least(keras_v, "3")
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
        on = at_least(tf_v, since)
        state = (
            f"unset, so {'on' if on else 'off'} by default ({h.os} x86 default since TF {since})"
        )
    elif raw.strip().lower() in ("1", "true"):
        on, state = True, f"{var}={raw}: on"
    elif raw.strip().lower() in ("0", "false"):
        on, state = False, f"{var}={raw}: off"
    else:
        on, state = at_least(tf_v, since), f"{var}={raw} is not 0/1; TF ignores it"
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


def check_keras_backend(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """Keras 3's backend (KERAS_BACKEND, else keras.json, else tensorflow) is not installed."""
    keras_v = snap.version_of("keras")
    if not keras_v or not at_least(keras_v, "3"):
        return []
    backends: dict[str, list[str]] = kb["keras"]["backends"]
    installed = [
        b for b in kb["keras"]["suggest_order"] if any(snap.has(d) for d in backends[b])
    ]
    if not installed:
        return []  # no framework at all: frameworks.none says what to install
    env_value = snap.env_vars.get("KERAS_BACKEND")
    if env_value:
        name, where = env_value.strip().lower(), f"KERAS_BACKEND={env_value}"
    elif snap.keras_config_backend:
        name, where = snap.keras_config_backend.strip().lower(), "keras.json sets it"
    else:
        name, where = "tensorflow", "KERAS_BACKEND unset and no keras.json: Keras' default"
    if name in backends and any(snap.has(d) for d in backends[name]):
        return []
    known = name in backends
    missing = (
        f"{DISPLAY.get(name, name)} is not installed"
        if known
        else f"'{name}' is not a Keras backend (Keras knows {', '.join(backends)})"
    )
    pick = installed[0]
    fix = f"export KERAS_BACKEND={pick}"
    if not env_value and snap.keras_config_backend:
        fix += f'  (or set "backend": "{pick}" in ~/.keras/keras.json)'
    fix += f"  # installed backends: {', '.join(installed)}"
    return [
        Finding(
            "keras.backend-missing",
            "error",
            f"Keras' backend '{name}' cannot load: `import keras` fails",
            observed=(
                f"Keras {keras_v} backend '{name}' ({where}); {missing}; installed backends: "
                f"{', '.join(installed)}"
            ),
            why=(
                "Keras imports its backend at `import keras`; when that framework is missing "
                "every script using Keras fails at its first line (\"No module named "
                f"'{name}'\" or \"Unable to import backend\"), whatever else is installed."
            ),
            fix=fix,
            source=kb["keras"]["source"],
        )
    ]


def check_keras3_old_tf(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """Keras 3 installed with TensorFlow <= 2.15, which needs Keras 2 (unsupported pair)."""
    tf_v = tf_version(snap, kb)
    needs = kb["tensorflow"]["keras3_needs_tf"]
    # keras-nightly installs the same `keras` module: a Keras 3 nightly counts as Keras 3
    keras3 = [(d, snap.version_of(d)) for d in kb["tensorflow"]["keras_module_dists"]
              if snap.version_of(d) and at_least(snap.version_of(d), "3")]
    if not keras3 or not tf_v or matches(tf_v, needs):
        return []
    keras_dist, keras_v = keras3[0]
    mm = fmt_mm(major_minor(tf_v))
    dist = (tf_distributions(snap, kb) or ["tensorflow"])[0]
    if snap.is_apple_silicon and snap.has("tensorflow-metal"):
        upgrade = metal_install_fix(snap, kb)
    else:
        upgrade = "pip install -U 'tensorflow>=2.16'"
    return [
        Finding(
            "keras.keras3-with-old-tf",
            "error",
            f"Keras 3 is installed with TensorFlow {mm}, which needs Keras 2",
            observed=f"{keras_dist} {keras_v} with {dist} {tf_v} (Keras 3 needs TensorFlow "
                     f"{needs})",
            why=(
                f"TensorFlow {mm} requires keras<{mm.split('.')[0]}.{int(mm.split('.')[1]) + 1}"
                " (Keras 2): its tf.keras and Keras 3 do not work together, and Keras 3's "
                f"TensorFlow backend needs TF {needs.lstrip('>=')}+. Imports of tf.keras or "
                "keras fail or mix the two versions."
            ),
            fix=(
                f"pip install 'keras~={mm}.0'  # keep TF {mm} with its Keras 2; or move to Keras"
                f" 3: {upgrade}"
            ),
            source=kb["tensorflow"]["keras3_needs_tf_source"],
        )
    ]
