"""Libraries that need a name, a companion or a platform the environment lacks (issue 24,
round 24 step 0).

* ``[[jax_removed_names]]``: a jax name that jax removed in a known release, with the
  jax-dependent libraries (and their releases) that still refer to it: beside a jax at or past
  the removal, importing that library fails with an AttributeError. One row per removed name,
  any number of users, so the rule is not one library's.
* ``[[undeclared_imports]]``: a library release that imports a companion it does not declare
  (keras-cv 0.6 and keras-core): pip leaves the companion out and the import fails.
* ``[open3d_windows_ml]``: Open3D's Windows wheels carry no PyTorch ML ops (open3d.ml.torch).
* ``[nvcc_on_path]``: CUDA_HOME and CUDA_PATH unset beside a CUDA-extension builder: torch's
  extension builder takes the nvcc found on PATH, on Ubuntu the distribution's own toolkit
  (``/usr/bin/nvcc``) of another CUDA major than torch's.
"""

from __future__ import annotations

from devicebench.env.checks._util import KB, installed_version, matches, ok_probe, tf_version
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot


def _version(snap: EnvSnapshot, dist: str, kb: KB) -> str:
    if dist == "tensorflow" and "tensorflow" in kb:
        return tf_version(snap, kb)
    return installed_version(snap, dist)


def check_jax_removed_name(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A jax-dependent library release that refers to a name the installed jax removed.

    Example:
        >>> kb = {"jax_removed_names": [{"name": "jax.random.KeyArray", "removed_in": "0.4.24",
        ...       "keep": "0.4.23", "users": [{"dist": "dynamax", "spec": "<1.0.0"}],
        ...       "why": "w", "source": "s"}]}
        >>> snap = EnvSnapshot(distributions={"jax": "0.4.38", "dynamax": "0.1.5"})
        >>> [f.id for f in check_jax_removed_name(snap, kb)]
        ['jax.removed-name-in-dependent']
        >>> snap.distributions["jax"] = "0.4.23"
        >>> check_jax_removed_name(snap, kb)
        []
    """
    jax = snap.version_of("jax")
    out = []
    for row in kb.get("jax_removed_names", []) if jax else []:
        if not matches(jax, ">=" + row["removed_in"]):
            continue
        for user in row["users"]:
            mine = _version(snap, user["dist"], kb)
            if not matches(mine, user["spec"]):
                continue
            out.append(Finding(
                "jax.removed-name-in-dependent", "warning",
                f"{user['dist']} {mine} refers to {row['name']}, which jax {jax} no longer has",
                observed=f"{user['dist']} {mine} beside jax {jax}",
                why=f"jax removed {row['name']} in {row['removed_in']}; {user['dist']} {mine} "
                    "still refers to it, so importing it (or a library that imports it) fails "
                    "with an AttributeError although jax itself works (the probe imports jax, "
                    f"not {user['dist']}). {row['why']}",
                fix=f"pip install 'jax=={row['keep']}' 'jaxlib=={row['keep']}' (jax<"
                    f"{row['removed_in']}: the last release with {row['name']}) until "
                    f"{user['dist']} releases a fix" + (
                        f", or pip install -U '{user['dist']}>={user['fixed']}'"
                        if user.get("fixed") else ""),
                source=user.get("source", row["source"])))
    return out


def check_undeclared_import(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A library release that imports a companion it does not declare, companion missing.

    Example:
        >>> kb = {"undeclared_imports": [{"dist": "keras-cv", "spec": "==0.6.0",
        ...       "needs": "keras-core", "when": [], "why": "w", "fix": "f", "source": "s"}]}
        >>> snap = EnvSnapshot(distributions={"keras-cv": "0.6.0"})
        >>> [f.id for f in check_undeclared_import(snap, kb)]
        ['package.undeclared-import-missing']
        >>> snap.distributions["keras-core"] = "0.1.7"
        >>> check_undeclared_import(snap, kb)
        []
    """
    out = []
    for row in kb.get("undeclared_imports", []):
        mine = _version(snap, row["dist"], kb)
        if not matches(mine, row["spec"]) or snap.has(row["needs"]) \
                or snap.has(row["needs"].replace("-", "_")):
            continue
        if not all(matches(_version(snap, d, kb), s) for d, s in row.get("when", [])):
            continue
        beside = ", ".join(f"{d} {_version(snap, d, kb)}" for d, _ in row.get("when", []))
        out.append(Finding(
            "package.undeclared-import-missing", "warning",
            f"{row['dist']} {mine} needs {row['needs']}, which is not installed",
            observed=f"{row['dist']} {mine}" + (f" beside {beside}" if beside else "")
                     + f"; no {row['needs']}",
            why=f"{row['dist']} {mine} imports {row['needs'].replace('-', '_')} without "
                f"declaring it, so pip does not install it and importing {row['dist']} fails "
                f"(No module named '{row['needs'].replace('-', '_')}'). {row['why']}",
            fix=row["fix"], source=row["source"]))
    return out


def check_open3d_windows_ml(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """Open3D beside torch on Windows, where Open3D's wheels carry no PyTorch ML ops."""
    entry = kb.get("open3d_windows_ml")
    o3d, torch = snap.version_of("open3d"), snap.version_of("torch")
    if not entry or snap.host.os != "Windows" or not o3d or not torch:
        return []
    return [Finding(
        "open3d.no-ml-ops-on-windows", "warning",
        f"open3d {o3d} on Windows has no PyTorch ML ops: open3d.ml.torch does not import here",
        observed=f"open3d {o3d} beside torch {torch} on Windows",
        why="Open3D's Windows wheels are built without its ML module's PyTorch ops, so "
            "import open3d.ml.torch raises 'Open3D was not built with PyTorch support!' "
            "whatever torch is installed; Open3D's geometry and visualisation work. "
            + entry["why"],
        fix="run the code that uses open3d.ml.torch on Linux or in WSL2 (Ubuntu), where the "
            "pip wheel holds the PyTorch ops for its torch release, or build Open3D from "
            "source on Windows with BUILD_PYTORCH_OPS=ON",
        source=entry["source"])]


def check_nvcc_on_path(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """CUDA_HOME/CUDA_PATH unset, a CUDA toolkit dir not on PATH, beside a CUDA-extension
    builder, on an Ubuntu release whose own nvcc is another CUDA major than torch's."""
    entry = kb.get("nvcc_on_path")
    probe = ok_probe(snap, "torch")
    if not entry or snap.host.os != "Linux" or probe is None:
        return []
    built = str(probe.build.get("cuda_version") or "")
    builders = [d for d in entry["builders"] if snap.has(d)]
    path = snap.env_vars.get("PATH", "")
    dirs = path.split(":")
    if not built or not builders or "/usr/bin" not in dirs or "cuda" in path.lower() \
            or snap.env_vars.get("CUDA_HOME") or snap.env_vars.get("CUDA_PATH"):
        return []
    distro = next((d for d in entry["distro_nvcc"] if d in snap.host.os_version), "")
    nvcc = entry["distro_nvcc"].get(distro, "")
    if not nvcc or nvcc.split(".")[0] == built.split(".")[0]:
        return []
    fix = entry.get("builder_fix", {}).get(builders[0], "")
    return [Finding(
        "cuda.nvcc-on-path-other-major", "warning",
        f"CUDA_HOME is unset: a build of {builders[0]}'s CUDA extensions takes the nvcc on "
        f"PATH, on {distro} the distribution's CUDA {nvcc}, not torch's CUDA {built}",
        observed=f"{', '.join(f'{d} {snap.version_of(d)}' for d in builders)}; torch "
                 f"{snap.version_of('torch')} built with CUDA {built}; CUDA_HOME and CUDA_PATH "
                 f"unset; PATH={path}",
        why="With CUDA_HOME and CUDA_PATH unset, torch's extension builder uses the nvcc that "
            f"PATH finds; no CUDA toolkit directory is on PATH, so on {distro} that is "
            f"/usr/bin/nvcc of the distribution's nvidia-cuda-toolkit (CUDA {nvcc}) where it "
            "is installed, and torch refuses a toolkit of another major (the detected CUDA "
            f"version ({nvcc}) mismatches the version that was used to compile PyTorch "
            f"({built})) when mim, pip or setup.py compiles mmcv or another extension. "
            + entry["why"],
        fix=(fix + "; or " if fix else "")
            + f"install NVIDIA's CUDA {built} toolkit and export CUDA_HOME=/usr/local/cuda-"
              f"{built} and PATH=$CUDA_HOME/bin:$PATH before the build",
        source=entry["source"])]
