"""Versions that must agree and builds that must fit the hardware, as knowledge data:
components of one stack from one release, dependency ranges per framework release,
Keras 2 add-ons on Keras 3, GPU architectures a build has kernels for (CUDA and ROCm),
frameworks without GPU support on native Windows."""

from __future__ import annotations

import re

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
    tf_version,
)
from devicebench.env.checks.installs import jax_plugin_for, plugin_release_known
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot


def _base(version: str) -> str:
    v = as_version(version)
    return v.base_version if v is not None else version


def map_pair(stack: dict, key: str, reverse: bool = False) -> str | None:
    """A ``pair = "map"`` stack's partner of ``key`` (component -> anchor major.minor, or the
    other way with ``reverse``); past the table's last entry the map goes on in ``step``s
    (torchvision 0.26 <-> torch 2.11 after 0.25 <-> 2.10), within the same majors.

    Example:
        >>> map_pair({"map": {"0.25": "2.10"}, "step": 1}, "0.27")
        '2.12'
        >>> map_pair({"map": {"0.25": "2.10"}, "step": 1}, "2.11", reverse=True)
        '0.26'
    """
    table = {v: k for k, v in stack["map"].items()} if reverse else dict(stack["map"])
    if key in table:
        return table[key]
    step = int(stack.get("step", 0))
    have = major_minor(key)
    if not step or not have or not table:
        return None
    last = max(table, key=lambda k: major_minor(k) or (0, 0))
    lk, lv = major_minor(last), major_minor(table[last])
    if not lk or not lv or have[0] != lk[0] or have[1] <= lk[1]:
        return None
    return fmt_mm((lv[0], lv[1] + (have[1] - lk[1]) * step))


def check_stack_skew(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A component of a stack (a plugin half, tf-keras) of another release than its anchor."""
    out = []
    for stack in kb["stacks"]:
        anchor_v = snap.version_of(stack["anchor"])
        if not anchor_v:
            continue
        want = _base(anchor_v)
        bad = []
        for comp in stack["components"]:
            have = snap.version_of(comp)
            if not have:
                continue
            if stack["pair"] == "map":
                pairs = map_pair(stack, fmt_mm(major_minor(have)))
                same = pairs is None or pairs == fmt_mm(major_minor(want))
            else:
                same = (_base(have) == want if stack["pair"] == "equal"
                        else major_minor(have) == major_minor(want))
            if not same:
                bad.append((comp, have))
        if not bad:
            continue
        pin = want if stack["pair"] == "equal" else fmt_mm(major_minor(want)) + ".*"
        if stack["pair"] == "map":
            back = map_pair(stack, fmt_mm(major_minor(want)), reverse=True)
            if back is None:
                continue
            pin = back + ".*"
            if back == fmt_mm(major_minor(want)) and stack.get("equal_from") and \
                    major_minor(want) >= major_minor(stack["equal_from"]):
                pin = want  # the same release number on both sides: the exact one
        pins = " ".join(f"'{c}=={pin}'" for c, _ in bad)
        parsed = as_version(anchor_v)
        local = parsed.local if parsed is not None else None
        index = (f" --index-url https://download.pytorch.org/whl/{local}"
                 if stack["anchor"] == "torch" and local and stack.get("torch_index", True)
                 else "")
        if (parsed is not None and parsed.is_prerelease and stack["anchor"] == "torch"
                and stack.get("torch_index", True)):
            # A nightly has no release to pin: take the component from the same nightly index.
            pins = "--pre " + " ".join(c for c, _ in bad)
            index = f" --index-url https://download.pytorch.org/whl/nightly/{local or 'cpu'}"
        out.append(Finding(
            "stack.release-skew", "error",
            f"{', '.join(c for c, _ in bad)} not of the installed {stack['anchor']} release "
            f"({want})",
            observed="; ".join(f"{c} {v}" for c, v in bad) + f" with {stack['anchor']} {anchor_v}",
            why="The parts of one stack are built together; a plugin or add-on of another "
                "release fails to load, crashes, or is skipped (JAX then runs on the CPU).",
            fix=stack["fix"].format(pins=pins, index=index), source=stack["source"]))
    for name, probe in snap.frameworks.items():
        rep = probe.reported
        if out or not ("plugin_mismatch" in rep or "pjrt_mismatch" in rep):
            continue
        said = rep.get("plugin_mismatch") or rep.get("pjrt_mismatch")
        # Without a backend name (a fatal abort prints none) the installed plugin is the one.
        backend = said.get("backend", "")
        plugin = jax_plugin_for(snap, kb, backend) if backend else (
            jax_plugin_for(snap, kb) or jax_plugin_for(snap, kb, "cuda"))
        backend = backend or (plugin or {}).get("backend", "cuda")
        jl = _base(snap.version_of("jaxlib"))
        if plugin is not None and not plugin.get("lockstep"):
            if plugin_release_known(snap, plugin):
                continue  # check_jax_plugin_release pins the jax/jaxlib it works with
            dist = plugin["dist"]
            fix = (plugin["fix"].format(jax=_base(snap.version_of("jax")) or jl)
                   if plugin.get("fix") else
                   f"pip install the jax/jaxlib release {dist} "
                   f"{snap.version_of(dist)} lists ({plugin['source']}), "
                   f"or pip uninstall {dist} to run JAX on the CPU")
        elif plugin is None and backend.lower() != "cuda":
            dist = f"the '{backend}' plugin"
            fix = (f"install the jax/jaxlib release the '{backend}' plugin was built for, or "
                   "uninstall the plugin (JAX_PLATFORMS=cpu skips it)")
        else:
            dist = plugin["dist"] if plugin else "jax-cuda12-plugin"
            fix = (f"pip install '{dist}=={jl}' '{dist.replace('-plugin', '-pjrt')}=={jl}'"
                   if jl else "pip install -U 'jax[cuda12]'")
        out.append(Finding(
            "stack.release-skew", "error",
            f"{DISPLAY.get(name, name)}'s plugin {dist} is not of the jaxlib release",
            observed=f"{DISPLAY.get(name, name)} said: {said}; installed: "
                     + ", ".join(f"{d} {snap.version_of(d)}" for d in ("jax", "jaxlib", dist)
                                 if snap.has(d)),
            why="JAX skips (or crashes on) a plugin built for another jaxlib"
                + (f" (the plugin is built with a {said['plugin_built']} PJRT API than jaxlib)"
                   if said.get("plugin_built") else "") + ".",
            fix=fix, source=(plugin or kb["stacks"][0])["source"]))
    return out


def check_jax_jaxlib(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """jax and jaxlib of different releases: JAX's own check said so, or jaxlib is newer
    than jax (JEP 9419: jaxlib <= jax, and at least jax's minimum)."""
    probe = snap.frameworks.get("jax")
    said = probe.reported.get("jaxlib_skew", {}) if probe is not None else {}
    jax_v, jaxlib_v = snap.version_of("jax"), snap.version_of("jaxlib")
    if not said and not (as_version(jax_v) and as_version(jaxlib_v)
                         and as_version(_base(jaxlib_v)) > as_version(_base(jax_v))):
        return []
    jax_b, jaxlib_b = _base(said.get("jax", jax_v)), _base(said.get("jaxlib", jaxlib_v))
    older_lib = bool(said.get("jax_needs")) or (
        as_version(jaxlib_b) is not None and as_version(jax_b) is not None
        and as_version(jaxlib_b) < as_version(jax_b))
    plugin = next((d for d in sorted(snap.distributions) if d.startswith("jax-cuda")
                   and d.endswith("-plugin")), "")
    keep_jax = f"pip install -U 'jaxlib=={jax_b}'" + (
        f" '{plugin}=={jax_b}' '{plugin.replace('-plugin', '-pjrt')}=={jax_b}'"
        if plugin else "")
    if older_lib:
        fix = keep_jax + "  # jax's release"
    else:
        # Either side can move; a project's requirements usually pin jax (octo#125: jax==0.4.20
        # pinned, a newer jaxlib pulled in), so keeping jax is offered too.
        fix = (f"pip install 'jax=={jaxlib_b}'  # jaxlib's release; or keep this jax (a pinned "
               f"requirement): {keep_jax.replace('-U ', '')}")
    return [Finding(
        "stack.release-skew", "error",
        f"jaxlib {jaxlib_v} is not of the installed jax release ({jax_v})",
        observed=f"jax {jax_v} with jaxlib {jaxlib_v}"
                 + (f"; JAX said it needs jaxlib >= {said['jax_needs']}"
                    if said.get("jax_needs") else ""),
        why="jax and jaxlib are released together; jax refuses a jaxlib older than its "
            "minimum or newer than itself, so import jax fails.",
        fix=fix, source=kb["jax_jaxlib"]["source"])]


def check_requires(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A dependency outside the range a framework release was built for (NumPy 2 under a
    TensorFlow compiled for NumPy 1, ...), or the framework saying so."""
    out = []
    for req in kb["requires"]:
        v = tf_version(snap, kb) if req["dist"] == "tensorflow" else snap.version_of(req["dist"])
        dep = snap.version_of(req["needs"]) or (
            snap.blas.numpy_version if req["needs"] == "numpy" else "")
        if not v or not matches(v, req["when"]) or not dep or matches(dep, req["spec"]):
            continue
        if req.get("python") and not matches(snap.host.python_version, req["python"]):
            continue  # a pairing that breaks only on some Python releases
        out.append(Finding(
            "stack.dependency-range", "error",
            f"{req['needs']} {dep} with {req['dist']} {v}: it needs {req['needs']}{req['spec']}",
            observed=f"{req['dist']} {v} installed beside {req['needs']} {dep}",
            why=req["why"] + ".",
            fix=req.get("fix") or f"pip install '{req['needs']}{req['spec']}'",
            source=req["source"]))
    return out


def check_keras2_addons(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """An add-on that builds Keras 2 objects where tf.keras is Keras 3."""
    tf_v = tf_version(snap, kb)
    # Keras 3 is tf.keras from TF 2.16 on, or where the keras 3 package was installed beside an
    # older TF (round 7, from keras-hub#1417: tensorflow-hub then imports tf_keras, as on 2.16)
    keras3_pkg = at_least(snap.version_of("keras"), "3")
    if not tf_v or not (at_least(tf_v, kb["tensorflow"]["keras3_from"]) or keras3_pkg):
        return []
    legacy = legacy_keras_on(snap, kb)  # helps add-ons using tf.keras, not Keras 2 internals
    tfk = snap.has("tf-keras")
    mm = ".".join(map(str, major_minor(tf_v)))
    out = []
    for addon in kb["keras2_addons"]:
        if not snap.has(addon["dist"]) or (addon["needs"] == "tf-keras" and tfk):
            continue
        if (legacy and addon["needs"] != "keras2") or (
                addon["needs"] == "keras2" and snap.has("keras")
                and not at_least(snap.version_of("keras"), "3")):
            continue
        if addon.get("fixed_in") and at_least(snap.version_of(addon["dist"]), addon["fixed_in"]):
            continue
        fix = f"pip install 'tf-keras=={mm}.*'" if not tfk else ""
        if addon["needs"] == "keras2":
            have = snap.version_of(addon["dist"])
            fixed = addon.get("fixed_in", "")
            fix = (f"pip install -U '{addon['dist']}>={fixed}'  # or: " if fixed and
                   not at_least(have, fixed) else "") + "pip install 'tensorflow<2.16' 'keras<3'"
        elif addon["needs"] in ("legacy", "keras2-models"):
            fix = (fix + " && " if fix else "") + \
                "export TF_USE_LEGACY_KERAS=1  # before TensorFlow is imported"
        models = addon["needs"] == "keras2-models"
        out.append(Finding(
            "keras.keras2-addon-on-keras3", "warning",
            f"{addon['dist']} " + (f"(import {addon['module']}) " if addon.get("module")
                                   else "") + ("ships models saved by Keras 2" if models else
                                   "builds Keras 2 objects") + ", but tf.keras is Keras 3 here",
            observed=f"{addon['dist']} {snap.version_of(addon['dist'])} with TensorFlow {tf_v} "
                     + (f"(Keras 3 since {kb['tensorflow']['keras3_from']})"
                        if at_least(tf_v, kb["tensorflow"]["keras3_from"])
                        else f"and keras {snap.version_of('keras')}")
                     + ("" if tfk else "; tf-keras not installed"),
            why=("Keras 3's load_model reads only .keras and .h5 files: the Keras 2 SavedModel "
                 "directories this package loads fail ('File format not supported'); Keras 2 "
                 "(tf-keras) still reads them." if models else
                 "Keras 2 (tf_keras) and Keras 3 objects cannot be mixed: Keras 3 models reject "
                 "the add-on's layers ('Only instances of keras.Layer can be added')."),
            fix=fix, source=addon["source"]))
    return out


def _sm(cc: str) -> str:
    return "sm_" + cc.replace(".", "")


def runs_on(sm: str, cc: str) -> bool:
    """Whether a build's ``sm_XY`` kernels run on a GPU of compute capability ``cc``: CUDA
    binaries run on GPUs of the same major version and an equal or higher minor one
    (https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#binary-compatibility).

    Example:
        >>> runs_on("sm_60", "6.1"), runs_on("sm_86", "8.0"), runs_on("sm_90", "12.0")
        (True, False, False)
    """
    m = re.fullmatch(r"sm_(\d+)(\d)", sm)
    target = as_version(cc)
    if not m or target is None:
        return False
    major, minor = int(m[1]), int(m[2])
    return (target.release + (0,))[:2][0] == major and (target.release + (0,))[1] >= minor


def same_release_build(torch_version: str, cc: str, kb: KB) -> str:
    """The install command of ``torch_version``'s own release built for the oldest CUDA that
    has kernels for a GPU of compute capability ``cc`` (``[cuda_for_arch]``,
    ``[torch_cuda_indexes]``), or ``""`` when that release has no such build.

    Example:
        >>> from devicebench.env.checks import load_knowledge
        >>> same_release_build("1.7.1+cu101", "8.6", load_knowledge())
        "pip install 'torch==1.7.1+cu110' -f https://download.pytorch.org/whl/torch_stable.html"
    """
    target = as_version(cc)
    if target is None:
        return ""
    major = target.release[0]
    needs = [as_version(c) for a, c in kb.get("cuda_for_arch", {}).items() if a != "source"
             and as_version(a) is not None and as_version(a).release[0] == major
             and as_version(a) <= target]
    release = re.match(r"(\d+\.\d+)(\.\d+)?", torch_version or "")
    indexes = kb["torch_cuda_indexes"].get(release[1]) if release else None
    if not needs or not indexes:
        return ""
    need = min(needs)
    for index in indexes:
        if as_version(f"{index[2:-1]}.{index[-1]}") >= need:
            base = release[0] if release[2] else release[1] + ".0"
            if as_version(release[1]) < as_version("2.0"):
                return (f"pip install 'torch=={base}+{index}' "
                        "-f https://download.pytorch.org/whl/torch_stable.html")
            return (f"pip install --force-reinstall 'torch=={base}' "
                    f"--index-url https://download.pytorch.org/whl/{index}")
    return ""


def check_gpu_arch_in_build(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A GPU whose architecture the installed PyTorch build has no kernels for."""
    probe = snap.frameworks.get("torch")
    if probe is None or probe.build.get("is_rocm_build"):
        return []
    arch = probe.build.get("arch_list") or []
    said = probe.reported.get("arch_unsupported")
    gpus = [(d.description, d.compute_capability) for d in probe.gpu_devices
            if d.compute_capability]
    if not gpus and said:
        gpus = [(said["gpu"], said["arch"][3:-1] + "." + said["arch"][-1])]
    if not gpus and probe.gpu_devices and snap.nvidia_smi:  # torch's devices lack it
        gpus = [(g.name, g.compute_capability) for g in snap.nvidia_smi.gpus
                if g.compute_capability]
    # The worker's own first CUDA op is the observation: when it failed with "no kernel
    # image", the build's PTX did not cover the GPU, whatever the arch list suggests.
    no_kernel = "no kernel image is available" in str(probe.extra.get("first_use_error", ""))
    out = []
    for gpu, cc in gpus:
        sm = _sm(cc)
        ptx = [a for a in arch if a.startswith("compute_")
               and as_version(a[8:-1] + "." + a[-1]) <= as_version(cc)]
        runnable = ptx or any(runs_on(a, cc) for a in arch)
        # torch's own "sm_XY is not compatible with the current PyTorch installation" names
        # this GPU: its PTX (built for an older major) does not stand for a kernel.
        torch_says = bool(said and said["arch"] == sm)
        if arch and (sm in arch or (runnable and not no_kernel and not torch_says)):
            continue
        if not arch and not (said and said["arch"] == sm):
            continue
        variant = next((v for v in kb["torch_variants"]
                        if v.get("machine", snap.host.machine) == snap.host.machine
                        and any(runs_on(_sm(a), cc) for a in v["archs"])), None)
        fix = (f"pip install --force-reinstall 'torch>={variant['min_torch']}' --index-url "
               f"https://download.pytorch.org/whl/{variant['index']}" if variant
               else "no PyTorch wheel has kernels for it: build from source, or use the CPU")
        same = same_release_build(probe.version or snap.version_of("torch"), cc, kb)
        if same:
            fix = f"{same}  # the same release built for a CUDA that has {sm}; or a newer " \
                  f"torch: {fix}"
        out.append(Finding(
            "gpu.arch-not-in-build", "error",
            f"PyTorch {probe.version} has no kernels for the {gpu} ({sm})",
            observed=f"{gpu}: compute capability {cc} ({sm}); this build supports "
                     f"{' '.join(arch or (said or {}).get('supported', []))}",
            why="Every CUDA op fails with 'no kernel image is available for execution on the "
                "device'." + (" The build's PTX (" + ", ".join(ptx) + ") did not cover it: the "
                              "probe's first CUDA op failed that way." if ptx and no_kernel
                              else ""), fix=fix, source=kb["torch_variants_info"]["source"]))
    return out


def check_windows_no_gpu(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A framework without CUDA support on native Windows, on a machine with an NVIDIA GPU."""
    if snap.host.os != "Windows" or not has_nvidia_gpu(snap):
        return []
    out = []
    source = kb["windows_no_gpu"]["source"]
    for name in kb["windows_no_gpu"]["frameworks"]:
        if name in snap.frameworks or snap.has(name):
            out.append(Finding(
                "gpu.windows-native-unsupported", "warning",
                f"{DISPLAY.get(name, name)} has no GPU support on native Windows",
                observed=f"{DISPLAY.get(name, name)} {snap.version_of(name)} on "
                         f"{snap.host.os_version or 'Windows'} with an NVIDIA GPU",
                why="Its CUDA builds are Linux-only; on native Windows it runs on the CPU.",
                fix=f"run it in WSL2: wsl --install, then inside WSL2: pip install -U "
                    f"'{name}[cuda12]'", source=source))
    return out


def check_mask_set_too_late(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """Read in the user's process: a device mask listing fewer GPUs than PyTorch, which had
    already initialised CUDA, uses -- it was set after the initialisation."""
    torch_state = snap.process.get("torch") or {}
    mask = (snap.process.get("env") or {}).get("CUDA_VISIBLE_DEVICES")
    count = torch_state.get("device_count")
    if mask is None or not torch_state.get("cuda_initialized") or count is None:
        return []
    listed = [d for d in mask.split(",") if d.strip() and d.strip() != "-1"]
    if len(listed) >= count:
        return []
    return [Finding(
        "device.mask-set-too-late", "error",
        "CUDA_VISIBLE_DEVICES was set after PyTorch initialised CUDA: it has no effect",
        observed=f"in this process CUDA_VISIBLE_DEVICES='{mask}' ({len(listed)} GPU(s)), but "
                 f"PyTorch, initialised before, uses {count}",
        why="CUDA reads the mask once, when it initialises; setting os.environ afterwards "
            "(after import torch and a CUDA call, in a module imported late, or by a config "
            "framework) changes nothing, so the job runs on other GPUs than intended.",
        fix=f"set it before Python starts: CUDA_VISIBLE_DEVICES={mask} python train.py "
            "(or as the script's first lines, before any import of torch)",
        source="https://github.com/pytorch/pytorch/issues/9158")]


def check_python_supported(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """TensorFlow installed into a Python its release ships no wheels for."""
    tf_v = tf_version(snap, kb)
    spec = kb["tensorflow_python"]["releases"].get(".".join(map(str, major_minor(tf_v))))
    py = ".".join(snap.host.python_version.split(".")[:2])
    if not tf_v or not spec or not py or matches(py, spec):
        return []
    return [Finding(
        "python.unsupported-by-release", "warning",
        f"TensorFlow {tf_v} has no wheels for Python {py}",
        observed=f"Python {snap.host.python_version}; TensorFlow {tf_v} supports Python {spec}",
        why="A release installed outside its Python range (a source build, "
            "--ignore-requires-python, a copied environment) is untested there; binary "
            "modules may fail to import.",
        fix=f"use a Python in {spec} for TensorFlow {'.'.join(map(str, major_minor(tf_v)))}, "
            "or pip install -U tensorflow (a release built for this Python)",
        source=kb["tensorflow_python"]["source"])]
