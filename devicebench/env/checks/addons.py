"""Add-ons built for one release of their framework, and JAX backends whose plugin library
does not load (issue 24, round 7).

* ``[[addon_builds]]``: an add-on whose wheels are compiled against, and pin, one framework
  release (xformers for torch, torch-directml for torch). With another release installed its
  native extension does not load ("xFormers can't load C++/CUDA extensions", "No module named
  'torch_directml_native'"); the probe never imports the add-on, so its version pair is read
  from the installed distributions.
* A deep-learning distribution at version 0.0.0: the empty placeholder pip settles on when no
  real release of it (or of a dependency it requires) installs on this Python (keras-nlp 0.0.0
  on Python 3.12, where tensorflow-text had no wheels: keras-hub#1649).
* ``[[keras_internal_imports]]``: an add-on release that imports a Keras private module from
  the path an older Keras used (keras.engine, moved to keras.src.engine in Keras 2.13), beside a
  Keras that moved it: its Keras/TensorFlow code fails to import.
* JAX's "Unable to initialize backend '<name>': ... Failed to open <library>: ... cannot open
  shared object file": the plugin package is installed but its library is missing or cannot be
  loaded (a broken pinned libtpu-nightly, an interrupted install), whatever the backend.
"""

from __future__ import annotations

from devicebench.env.checks._util import DISPLAY, KB, at_least, matches
from devicebench.env.checks.installs import jax_plugin_for, torch_cuda_index
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot


def _built_for(entry: dict, version: str) -> str:
    """The framework release the add-on ``version`` is built for ("" when not listed)."""
    return next((fw for spec, fw in entry["builds"] if matches(version, spec)), "")


def _release_for(entry: dict, framework_version: str) -> str:
    """A requirement for the add-on release built for ``framework_version`` ("" if none)."""
    spec = next((s for s, fw in entry["builds"] if matches(framework_version, f"=={fw}")), "")
    return f"{entry['dist']}{spec}" if spec else ""


def check_addon_builds(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """An add-on built for another release of the framework installed beside it."""
    out = []
    for entry in kb["addon_builds"]:
        dist, fw = entry["dist"], entry["framework"]
        have, fw_have = snap.version_of(dist), snap.version_of(fw)
        built = _built_for(entry, have) if have and fw_have else ""
        if not built or matches(fw_have, f"=={built}"):
            continue
        name = DISPLAY.get(fw, fw)
        other = _release_for(entry, fw_have)
        index = ""
        if fw == "torch" and "+cpu" not in fw_have:
            cu = torch_cuda_index(snap, kb, built)
            index = f" --index-url https://download.pytorch.org/whl/{cu}" if cu else ""
        keep = f"pip install '{fw}=={built}'{index}"
        fix = (f"pip install '{other}'  # the {dist} built for {name} {fw_have}; or keep this "
               f"{dist}: {keep}" if other else
               f"{keep}  # the {name} this {dist} was built for; or install the {dist} "
               f"release built for {name} {fw_have}")
        out.append(Finding(
            "stack.addon-built-for-other-release", "warning",
            f"{dist} {have} is built for {name} {built}; {name} {fw_have} is installed",
            observed=f"installed: {dist} {have} (built for {fw} {built}), {fw} {fw_have}",
            why=entry["why"] + ".", fix=fix, source=entry["source"]))
    return out


def check_keras_internal_imports(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """An add-on release older than ``fixed_in`` beside a Keras (>= ``keras_from``) that moved
    the private module it imports."""
    keras = snap.version_of("keras")
    out = []
    for row in kb.get("keras_internal_imports", []):
        have = snap.version_of(row["dist"])
        if not have or not keras or at_least(have, row["fixed_in"]) \
                or not at_least(keras, row["keras_from"]):
            continue
        moved = row["module"].replace("keras.", "keras.src.", 1)
        out.append(Finding(
            "keras.addon-imports-moved-internals", "warning",
            f"{row['dist']} {have} imports {row['module']}, which Keras {keras} no longer has",
            observed=f"installed: {row['dist']} {have}, keras {keras}",
            why=f"Keras {row['keras_from']} moved its internals under keras.src ({row['module']} "
                f"is now {moved}); {row['dist']} releases before {row['fixed_in']} import the old "
                f"path, so their Keras/TensorFlow code fails with \"No module named "
                f"'{row['module']}'\".",
            fix=f"pip install -U '{row['dist']}>={row['fixed_in']}'  # or keep this {row['dist']} "
                f"with a Keras before {row['keras_from']}: "
                f"pip install 'tensorflow<{row['keras_from']}' 'keras<{row['keras_from']}'",
            source=row["source"]))
    return out


def check_backend_library_missing(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """JAX could not initialise a backend because its plugin's library did not load."""
    probe = snap.frameworks.get("jax")
    said = probe.reported.get("backend_library_missing") if probe is not None else None
    if not said:
        return []
    backend, library = said["backend"], said["library"]
    plugin = jax_plugin_for(snap, kb, backend)
    extra = kb["jax_backend_extras"].get(backend.lower(), "")
    dist = plugin["dist"] if plugin else (f"jax[{extra}]" if extra else "the plugin")
    fix = (f"pip install -U 'jax[{extra}]'  # a jax release whose pinned plugin carries "
           f"{library.rsplit('/', 1)[-1]}; reinstalling the same pin brings the same files back"
           if extra else f"reinstall the package that provides JAX's '{backend}' backend")
    return [Finding(
        "jax.backend-library-missing", "error",
        f"JAX cannot initialise its '{backend}' backend: {library.rsplit('/', 1)[-1]} "
        "does not load",
        observed=f"Unable to initialize backend '{backend}': failed to open {library} ({dist} "
                 f"{snap.version_of(dist) if plugin else ''})".replace(" )", ")"),
        why=f"JAX loads each backend from its plugin's shared library; {dist} is installed but "
            f"{library.rsplit('/', 1)[-1]} is missing or cannot be opened (a release whose "
            "wheel lacks it, or a broken install), so JAX runs on the CPU.",
        fix=fix,
        source="https://github.com/jax-ml/jax/issues/24987 ; jax/_src/xla_bridge.py "
               "(Unable to initialize backend)")]


_ML_PREFIXES = ("keras", "tensorflow", "tf-", "tf_", "torch", "jax", "flax", "nvidia-")


def check_placeholder_release(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A deep-learning package installed at 0.0.0, the placeholder of a failed resolution."""
    out = []
    py = snap.host.python_version
    mm = ".".join(py.split(".")[:2])
    older = ""
    if mm.count(".") == 1 and mm.split(".")[1].isdigit() and int(mm.split(".")[1]) > 9:
        older = f"{mm.split('.')[0]}.{int(mm.split('.')[1]) - 1}"
    for dist, version in sorted(snap.distributions.items()):
        if version != "0.0.0" or not dist.lower().startswith(_ML_PREFIXES):
            continue
        fix = (f"recreate the environment with Python {older} (or older), whose wheels exist "
               f"for {dist} and its dependencies, then pip install {dist}" if older else
               f"pip install '{dist}>0.0.0'  # pip then says which requirement has no wheel")
        out.append(Finding(
            "install.placeholder-release", "warning",
            f"{dist} 0.0.0 is installed: an empty placeholder, not a release",
            observed=f"{dist} 0.0.0 on Python {py}",
            why=f"pip falls back to a package's 0.0.0 placeholder when none of its real "
                f"releases can be installed here, most often because it or a dependency it "
                f"requires has no wheel for Python {mm}; importing it then fails or finds "
                "nothing.",
            fix=fix,
            source="https://github.com/keras-team/keras-hub/issues/1649 (keras-nlp 0.0.0: "
                   "tensorflow-text had no Python 3.12 wheels)"))
    return out


def check_addon_sets_legacy_keras(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """An add-on that sets TF_USE_LEGACY_KERAS=1 inside the process (``[[sets_legacy_keras]]``)
    beside TensorFlow 2.15 without tf_keras: once the add-on is imported, tf.keras loads the
    missing tf_keras package and fails.

    Silent with tf_keras installed, with TensorFlow other than 2.15 (before 2.15 the variable
    is ignored; from 2.16 the add-on needs tf_keras anyway) and for add-on releases before
    ``from``.
    """
    tf_v = snap.version_of("tensorflow") or snap.version_of("tensorflow-cpu") \
        or snap.version_of("tensorflow-macos")
    if not tf_v or not matches(tf_v, "==2.15.*") or snap.has("tf-keras") or snap.has("tf_keras"):
        return []
    out = []
    for row in kb.get("sets_legacy_keras", []):
        have = snap.version_of(row["dist"])
        if not have or not at_least(have, row["from"]):
            continue
        set_by_user = snap.env_vars.get("TF_USE_LEGACY_KERAS")
        out.append(Finding(
            "keras.addon-sets-legacy-keras", "warning",
            f"{row['dist']} {have} sets TF_USE_LEGACY_KERAS=1, and TensorFlow {tf_v} then needs "
            "tf_keras, which is not installed",
            observed=f"{row['dist']} {have}, tensorflow {tf_v}, no tf-keras"
                     + (f"; TF_USE_LEGACY_KERAS={set_by_user} in the environment"
                        if set_by_user else "; the variable is set inside the process"),
            why=f"Importing {row['where']} sets TF_USE_LEGACY_KERAS=1 when it is unset. "
                "TensorFlow 2.15 honours the variable by making tf.keras the separate tf_keras "
                "package (Keras 2.15 itself needs no tf_keras, so it is often not installed); "
                "after the add-on's import, tf.keras and every model load through it fail "
                "('... you do not have the tf_keras package installed').",
            fix="pip install 'tf-keras~=2.15.0'  # the tf_keras of TensorFlow 2.15; or export "
                f"TF_USE_LEGACY_KERAS=0 before starting Python ({row['dist']} then keeps it and "
                "only warns; tf.keras is Keras 2.15 anyway)",
            source=row["source"]))
    return out


def check_split_halves(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A package split into two distributions (``[[split_packages]]``: mlx and mlx-metal from
    MLX 0.26.5) installed with one half missing or the halves at different releases (round 15):
    the native library the other half carries is absent, and the import fails on it."""
    out = []
    for entry in kb.get("split_packages", []):
        if entry.get("os") and snap.host.os != entry["os"]:
            continue
        main, half = entry["dist"], entry["half"]
        v, hv = snap.version_of(main), snap.version_of(half)
        if not v or not at_least(v, entry["from"]) or v == hv:
            continue
        observed = (f"{main} {v} with {half} {hv}" if hv
                    else f"{main} {v} installed, {half} not installed")
        out.append(Finding(
            "install.split-package-half",
            "warning",
            f"{main} {v} needs {half} {v}: {entry['library']} is in {half}",
            observed=observed,
            why=(f"From {main} {entry['from']} the native library {entry['library']} ships in the "
                 f"separate {half} distribution, pinned to the same release. Without it, or "
                 f"at another release (an environment upgraded across the split: removing the "
                 f"old single wheel deletes the file the new {half} put there), the import "
                 f"fails with '{entry['library']}' (no such file)."),
            fix=(f"pip uninstall -y {main} {half} && pip install '{main}=={v}'  "
                 "# or recreate the environment"),
            source=entry["source"],
        ))
    return out
