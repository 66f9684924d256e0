"""The installed packages' own requirements, checked the way ``pip check`` does (issue 24).

Each installed distribution's ``Requires-Dist`` lines (recorded verbatim by the probe) are
evaluated against the installed versions: a requirement whose environment marker holds on the
*recorded* host (its OS, architecture and Python, not the machine doctor runs on), on a package
that is installed at a version outside its specifier, is a conflict; a requirement of a
framework add-on on a package that is not installed at all is a missing dependency. Extras are
ignored unless every package an extra names is installed and one of them is not a base
requirement (the user then evidently installed it with that extra). Only pairs that matter
here are reported: either side a framework, a framework component or an add-on
(tensorflow*, keras, tf-keras, torch*, jax*, nvidia-*, mlx, ...).

Paraphrases pip's own behaviour: ``pip check`` reports "<dist> <ver> has requirement <req>,
but you have <name> <ver>" and "<dist> <ver> requires <name>, which is not installed", reading
the same metadata (https://pip.pypa.io/en/stable/cli/pip_check/).
"""

from __future__ import annotations

import re

from packaging.markers import Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from devicebench.env.checks._util import KB
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot, HostInfo

SOURCE = "https://pip.pypa.io/en/stable/cli/pip_check/ (pip check: Requires-Dist vs installed)"

# Framework families, their components and add-ons (normalised-name prefixes and names).
_ML_PREFIXES = ("tensorflow", "tf-keras", "tf-nightly", "keras", "torch", "jax", "flax",
                "nvidia-", "mlx", "triton", "xformers", "flash-attn", "tensorboard",
                "intel-extension-for-", "libtpu", "pytorch-", "segmentation-models",
                "classification-models", "efficientnet", "bitsandbytes", "deepspeed",
                "transformers", "accelerate", "diffusers", "peft")
# Packages other code is compiled against: an exact pin on one of these is an ABI pin.
_COMPILED_AGAINST = {"torch", "tensorflow", "tensorflow-cpu", "tensorflow-gpu",
                     "tensorflow-macos", "jaxlib"}
_SYS_PLATFORM = {"Linux": "linux", "Darwin": "darwin", "Windows": "win32"}


def is_ml(name: str) -> bool:
    """A framework, a framework component or an add-on, by its distribution name."""
    return canonicalize_name(name).startswith(_ML_PREFIXES)


def marker_environment(host: HostInfo) -> dict[str, str]:
    """PEP 508 marker variables for the recorded host (what pip would evaluate there)."""
    py = host.python_version or "3"
    machine = host.python_arch or host.machine
    impl = host.python_implementation or "CPython"
    return {
        "python_version": ".".join(py.split(".")[:2]), "python_full_version": py,
        "os_name": "nt" if host.os == "Windows" else "posix",
        "sys_platform": _SYS_PLATFORM.get(host.os, host.os.lower()),
        "platform_system": host.os, "platform_machine": machine,
        "platform_release": "", "platform_version": "",
        "platform_python_implementation": impl, "implementation_name": impl.lower(),
        "implementation_version": py, "extra": "",
    }


def _applies(marker: Marker | None, env: dict[str, str], extras: set[str]) -> bool:
    if marker is None:
        return True
    try:
        return any(marker.evaluate({**env, "extra": e}) for e in ("", *sorted(extras)))
    except (UndefinedComparison, UndefinedEnvironmentName, ValueError):
        return False


def _parsed(lines: list[str]) -> list[Requirement]:
    out = []
    for line in lines:
        try:
            out.append(Requirement(line))
        except InvalidRequirement:
            continue
    return out


def _active_extras(reqs: list[Requirement], env: dict[str, str],
                   installed: dict[str, str]) -> set[str]:
    """The extras the install evidently used: every package the extra names is installed and
    at least one of them is not a base requirement (jax's "minimum-jaxlib" extra only re-pins
    the jaxlib jax always needs: an installed jaxlib is no sign of it)."""
    base = {canonicalize_name(r.name) for r in reqs
            if r.marker is None or "extra" not in str(r.marker)}
    names: dict[str, set[str]] = {}
    for req in reqs:
        if req.marker is None or "extra" not in str(req.marker):
            continue
        for extra in re.findall(r"""extra\s*==\s*["']([^"']+)["']""", str(req.marker)):
            if _applies(req.marker, env, {extra}) and not _applies(req.marker, env, set()):
                names.setdefault(extra, set()).add(canonicalize_name(req.name))
    return {e for e, pkgs in names.items()
            if pkgs and pkgs <= set(installed) and pkgs - base}


def compact(name: str, spec: SpecifierSet) -> str:
    """``name~=X.Y.Z`` when ``spec`` is exactly ``>=X.Y[.Z],<X.(Y+1)``, else "".

    Example:
        >>> compact("keras", SpecifierSet(">=2.15.0,<2.16"))
        'keras~=2.15.0'
    """
    ops = {s.operator: s.version for s in spec}
    if len(spec) != 2 or set(ops) != {">=", "<"}:
        return ""
    try:
        low, high = Version(ops[">="]), Version(ops["<"])
    except InvalidVersion:
        return ""
    if len(high.release) != 2 and not (len(high.release) == 3 and high.release[2] == 0):
        return ""
    if (high.release[0], high.release[1]) != (low.release[0], low.release[1] + 1) or \
            len(low.release) > 3 or low.pre or high.pre:
        return ""
    x, y, *z = (*low.release, 0)[:3]
    return f"{name}~={x}.{y}.{z[0]}"


def no_wheels_for(name: str, spec: SpecifierSet, python: str, kb: KB) -> str:
    """The Python range of the releases ``spec`` allows when none of them has wheels for
    ``python`` (TensorFlow's and PyTorch's support tables), else "" (installable or unknown).

    Example:
        >>> no_wheels_for("tensorflow", SpecifierSet(">=2.15.0,<2.16.0"), "3.12",
        ...               {"tensorflow_python": {"releases": {"2.15": ">=3.9,<3.12"}}})
        '>=3.9,<3.12'
    """
    table = kb.get(f"{name}_python", {}).get("releases", {})
    ranges = [py for minor, py in table.items()
              if any(spec.contains(f"{minor}.{patch}", prereleases=True) for patch in range(10))]
    if not ranges or not python:
        return ""
    try:
        fits = any(SpecifierSet(r).contains(python) for r in ranges)
    except InvalidVersion:
        return ""
    return "" if fits else " or ".join(dict.fromkeys(ranges))


def lower_first(spec: SpecifierSet) -> str:
    """A specifier set written with its lower bounds first (pip sorts them as text).

    Example:
        >>> lower_first(SpecifierSet("<1.0,>=0.15.1"))
        '>=0.15.1,<1.0'
    """
    return ",".join(sorted((str(s) for s in spec),
                           key=lambda t: (not t.startswith((">", "~", "==")), t)))


def _conflict(owner: str, owner_v: str, req: Requirement, have: str, snap: EnvSnapshot,
              kb: KB) -> Finding:
    os_name = snap.host.os
    python = ".".join(snap.host.python_version.split(".")[:2])
    name, spec = canonicalize_name(req.name), req.specifier
    exact = len(spec) == 1 and next(iter(spec)).operator in ("==", "===") \
        and "*" not in str(spec)
    error = exact and name in _COMPILED_AGAINST and not name.startswith(owner)
    short = compact(name, spec)
    other = f"install the {owner} release whose requirement {name} {have} meets"
    no_wheels = no_wheels_for(name, spec, python, kb)
    fix = (f"pip install '{name}{lower_first(spec)}'  # " + (f"= {short}, " if short else "")
           + f"what {owner} {owner_v} requires; or {other}" if not no_wheels else
           f"{other}  # {name}{spec} has no wheels for Python {python} (it supports "
           f"Python {no_wheels})")
    why = (f"{owner} {owner_v} declares that it needs {name}{spec}"
           + (f" on {os_name}" if req.marker is not None and os_name else "")
           + f"; {name} {have} is outside that range, so pip check reports it. pip installs "
             "one package at a time and a later install (or an upgrade of the other side) "
             "does not undo an earlier package's requirement.")
    if error:
        why += (f" An exact pin on {name} from an add-on means its compiled extension is built "
                f"against that release: with {name} {have} it does not load.")
    return Finding(
        "install.requirement-conflict", "error" if error else "warning",
        f"{owner} {owner_v} has requirement {name}{spec}, but {name} {have} is installed",
        observed=f"{owner} {owner_v} requires '{req}'; installed: {name} {have}",
        why=why, fix=fix, source=SOURCE, related=(f"dist:{owner}", f"dist:{name}"))


def _missing(owner: str, owner_v: str, req: Requirement) -> Finding:
    name = canonicalize_name(req.name)
    return Finding(
        "install.requirement-missing", "warning",
        f"{owner} {owner_v} requires {name}, which is not installed",
        observed=f"{owner} {owner_v} requires '{req}'; {name} is not installed",
        why=f"{owner} imports {name} (its metadata says so); an interrupted install or a "
            f"later 'pip uninstall' left it out, so importing {owner} can fail.",
        fix=f"pip install '{name}{req.specifier}'", source=SOURCE,
        related=(f"dist:{owner}", f"dist:{name}"))


def check_pip_requirements(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """Installed versions outside another installed package's own requirement, where either
    side is a framework, a framework component or an add-on (``pip check``)."""
    if not snap.requires:
        return []
    installed = {canonicalize_name(k): v for k, v in snap.distributions.items()}
    env = marker_environment(snap.host)
    out = []
    for owner_raw, lines in sorted(snap.requires.items()):
        owner = canonicalize_name(owner_raw)
        owner_v = installed.get(owner, "")
        if not owner_v:
            continue
        reqs = _parsed(lines)
        extras = _active_extras(reqs, env, installed)
        for req in reqs:
            name = canonicalize_name(req.name)
            if name == owner or not _applies(req.marker, env, extras):
                continue
            have = installed.get(name, "")
            if not have:
                if is_ml(owner) and (req.marker is None or "extra" not in str(req.marker)):
                    out.append(_missing(owner, owner_v, req))
                continue
            if not (is_ml(owner) or is_ml(name)):
                continue
            try:
                if req.specifier.contains(Version(have), prereleases=True):
                    continue
            except InvalidVersion:
                continue
            out.append(_conflict(owner, owner_v, req, have, snap, kb))
    return out


_OWN_IDS = ("install.requirement-conflict", "install.requirement-missing")


def drop_covered(findings: list[Finding]) -> list[Finding]:
    """Leave out a pip-check finding whose pair another finding already names (both
    distributions in its title or observed text): that rule says it with more knowledge."""
    others = [f"{f.title}\n{f.observed}".lower() for f in findings if f.id not in _OWN_IDS]

    def named(text: str, dist: str) -> bool:
        forms = {dist, dist.replace("-", "_"), dist.replace("-", "")}
        return any(re.search(rf"(?<![\w-]){re.escape(d)}(?![\w-])", text) for d in forms)

    def covered(f: Finding) -> bool:
        pair = [r.removeprefix("dist:") for r in f.related if r.startswith("dist:")]
        return bool(pair) and any(all(named(t, d) for d in pair) for t in others)

    return [f for f in findings if f.id not in _OWN_IDS or not covered(f)]
