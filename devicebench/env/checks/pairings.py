"""Which build and which release of a component belongs with the rest of the stack (issue 24,
round 9): read from what the installer recorded, not from a framework import.

* ``[[conda_gpu_builds]]``: a conda package with CPU and CUDA builds (pytorch, pyg, jaxlib,
  tensorflow) installed as its CPU build (the build string of its ``conda-meta`` record names
  ``cpu``) on a machine with an NVIDIA GPU. conda's solver takes the CPU build whenever it
  ranks higher (a newer timestamp, a channel order): the version looks right, the device
  never appears. conda-forge's documented fix pins the build string: ``name=*=*cu*``.
* A standalone ``keras`` 2.x of another minor release than TensorFlow 2.6..2.15, whose
  tf.keras *is* that keras package (TF 2.x requires ``keras>=2.x,<2.(x+1)``); and a keras 2.x
  under TF >= 2.16, which requires Keras 3.
* ``[[keras3_addons]]``: add-ons that always import Keras 3 (``import keras``) while
  TF_USE_LEGACY_KERAS=1 makes the user's tf.keras models Keras 2 (tf_keras) objects: the
  mirror image of ``[[keras2_addons]]``.
"""

from __future__ import annotations

from devicebench.env.checks._util import (
    KB,
    at_least,
    fmt_mm,
    has_nvidia_gpu,
    legacy_keras_on,
    major_minor,
    tf_version,
)
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot


def cpu_build(build: str) -> bool:
    """Whether a conda build string names a CPU build (a ``cpu`` token).

    Example:
        >>> [cpu_build(b) for b in ("py311_torch_2.2.0_cpu", "cpu_mkl_py311h6a7d3b1_100",
        ...                         "py3.11_cuda12.1_cudnn8.9.2_0", "cuda120py311h1234_200")]
        [True, True, False, False]
    """
    return "cpu" in build.lower().replace("-", "_").split("_")


def _pytorch_channel_fix(snap: EnvSnapshot, version: str) -> str:
    """The pytorch channel's CUDA build with its pytorch-cuda metapackage pinned: without the
    pin (or when a nightly's CUDA builds are not up yet) the solver takes the CPU build
    (pytorch/test-infra#4567, AI4OPT/ML4OPF#9, round 27 step 0)."""
    rec = snap.conda_builds.get("pytorch-cuda")
    smi = snap.nvidia_smi.cuda_version if snap.nvidia_smi else ""
    cuda = rec["version"] if rec else ("12.1" if at_least(smi, "12.1") else "11.8")
    channel = "pytorch-nightly" if ".dev" in version else "pytorch"
    return (f"conda install 'pytorch={version}=*cuda*' pytorch-cuda={cuda} -c {channel} "
            "-c nvidia  # the CUDA build string and pytorch-cuda pinned together")


def check_conda_cpu_build(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A conda package's CPU build installed on a machine with an NVIDIA GPU."""
    if not snap.conda_builds or not has_nvidia_gpu(snap):
        return []
    out = []
    for entry in kb["conda_gpu_builds"]:
        rec = snap.conda_builds.get(entry["name"])
        if rec is None or not cpu_build(rec["build"]):
            continue
        name, version = entry["name"], rec["version"]
        channel = f" -c {entry['channel']}" if entry.get("channel") else ""
        gpu = snap.nvidia_smi.gpus[0].name if snap.nvidia_smi and snap.nvidia_smi.gpus else ""
        out.append(Finding(
            "conda.cpu-build", "warning",
            f"conda installed the CPU build of {name} {version} on a machine with an NVIDIA GPU",
            observed=f"conda-meta: {name}-{version}-{rec['build']}"
                     + (f"; GPU: {gpu}" if gpu else ""),
            why=f"conda packages such as {name} come in CPU and CUDA builds of one version, told "
                "apart only by the build string; the solver picks whichever ranks higher (a newer "
                "build timestamp, channel order), so the version is right and the GPU code is "
                "absent.",
            fix=(f"conda install -c conda-forge '{name}={version}=cuda*'  # conda-forge's CUDA "
                 "builds; or: conda install -c conda-forge pytorch-gpu"
                 if name == "pytorch" and rec["build"].startswith("cpu_") else
                 _pytorch_channel_fix(snap, version) if name == "pytorch" else
                 f"conda install '{name}={version}=*cu*'{channel}  # pin a CUDA build string"),
            source=entry["source"]))
    return out


def check_keras2_release(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A standalone keras 2.x that is not the Keras of the installed TensorFlow release."""
    keras_v, tf_v = snap.version_of("keras"), tf_version(snap, kb)
    if not keras_v or not tf_v or at_least(keras_v, "3") or not at_least(keras_v, "2"):
        return []
    info = kb["keras2_release"]
    tf_mm, k_mm = major_minor(tf_v)[:2], major_minor(keras_v)[:2]
    if at_least(tf_v, kb["tensorflow"]["keras3_from"]):
        mm = fmt_mm(tf_mm)
        return [Finding(
            "keras.keras2-with-keras3-tf", "warning",
            f"keras {keras_v} (Keras 2) is installed with TensorFlow {mm}, which needs Keras 3",
            observed=f"keras {keras_v} with tensorflow {tf_v}",
            why=f"From TensorFlow {kb['tensorflow']['keras3_from']} on, tf.keras is the keras 3 "
                "package (TensorFlow requires keras>=3); a Keras 2 `keras` package breaks "
                "tf.keras. Keras 2 code runs on the tf-keras package instead.",
            fix=f"pip install -U 'keras>=3'  # or keep Keras 2 code: pip install "
                f"'tf-keras~={mm}.0' && export TF_USE_LEGACY_KERAS=1",
            source=info["source"])]
    if not (at_least(tf_v, info["in_step_from"]) and len(tf_mm) == len(k_mm) == 2) \
            or tf_mm == k_mm:
        return []
    mm = fmt_mm(tf_mm)
    return [Finding(
        "keras.keras2-release-not-tf", "warning",
        f"keras {keras_v} is not TensorFlow {mm}'s Keras (keras {mm})",
        observed=f"keras {keras_v} with tensorflow {tf_v}",
        why=f"TensorFlow {info['in_step_from']}..2.15 ships tf.keras as the separate keras "
            f"package, released in step with it: TensorFlow {mm} requires keras>={mm},<"
            f"{tf_mm[0]}.{tf_mm[1] + 1}. Another keras release is what `import keras` and "
            "tf.keras load, and models or modules of the other release fail to load or import.",
        fix=f"pip install 'keras~={mm}.0'  # the keras of TensorFlow {mm}",
        source=info["source"])]


def check_keras3_addons_on_legacy(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A Keras-3-only add-on while TF_USE_LEGACY_KERAS makes tf.keras Keras 2."""
    if not legacy_keras_on(snap, kb) or not at_least(snap.version_of("keras"), "3"):
        return []
    tf_v = tf_version(snap, kb)
    if not tf_v or not at_least(tf_v, kb["tensorflow"]["keras3_from"]):
        return []
    out = []
    for entry in kb["keras3_addons"]:
        have = snap.version_of(entry["dist"])
        if not have or not at_least(have, entry["from"]):
            continue
        out.append(Finding(
            "keras.keras3-addon-on-legacy", "warning",
            f"{entry['dist']} uses Keras 3, but TF_USE_LEGACY_KERAS makes tf.keras Keras 2",
            observed=f"{entry['dist']} {have}, keras {snap.version_of('keras')}, tensorflow "
                     f"{tf_v}, TF_USE_LEGACY_KERAS={snap.env_vars.get('TF_USE_LEGACY_KERAS')}",
            why=f"{entry['dist']} {entry['from']}+ imports the keras package (Keras 3) whatever "
                "TF_USE_LEGACY_KERAS says, while tf.keras models are then tf_keras (Keras 2) "
                "objects: Keras 2 and Keras 3 objects cannot be mixed, so it rejects the models.",
            fix=f"unset TF_USE_LEGACY_KERAS  # and build the models {entry['dist']} gets with "
                f"Keras 3 (import keras); or keep the Keras 2 code off {entry['dist']}",
            source=entry["source"]))
    return out


def check_keras_two_distributions(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """keras and keras-nightly installed together: both write the one keras/ package, so the
    tree mixes two releases (keras-team/keras#19875, round 27 step 0)."""
    if not (snap.has("keras") and snap.has("keras-nightly")):
        return []
    return [Finding(
        "keras.two-distributions", "error",
        "keras and keras-nightly are both installed: they write the same keras package",
        observed=f"keras {snap.version_of('keras')} and keras-nightly "
                 f"{snap.version_of('keras-nightly')}",
        why="keras-nightly and keras install into one keras/ directory; the second install "
            "overwrites part of the first, leaving a mixed tree whose keras/__init__.py imports "
            "modules the other release's files do not provide, so import keras fails.",
        fix="pip uninstall keras keras-nightly  # both; then: pip install keras (or "
            "keras-nightly alone)",
        source="https://github.com/keras-team/keras/issues/19875 (the Keras maintainer: an "
               "environment conflict; uninstall the keras packages first)")]
