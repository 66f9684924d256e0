"""Packages read from their installed versions alone (round 20): the oldest macOS a package's
wheels load on (MLX: 13.5), and companion releases known broken against their own
TensorFlow release (tensorflow-text 2.19.0 beside TensorFlow 2.19)."""

from __future__ import annotations

from devicebench.env.checks._util import KB, macos_version, matches, tf_distributions
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot


def check_package_macos_minimum(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A package whose macOS wheels need a newer macOS than this one -> error (counted whether
    or not the probe imports it).

    Example:
        >>> from devicebench.env.snapshot import HostInfo
        >>> kb = {"macos_minimums": [{"dist": "mlx", "macos": "13.5", "why": "w", "source": "s",
        ...                           "recommended": "14"}]}
        >>> snap = EnvSnapshot(host=HostInfo(os="Darwin", macos_version="13.0"),
        ...                    distributions={"mlx": "0.13.0"})
        >>> [f.id for f in check_package_macos_minimum(snap, kb)]
        ['macos.package-needs-newer']
        >>> snap.host.macos_version = "13.5"
        >>> check_package_macos_minimum(snap, kb)
        []
    """
    mac = macos_version(snap)
    if snap.host.os != "Darwin" or mac is None:
        return []
    out: list[Finding] = []
    for row in kb.get("macos_minimums", []):
        version = snap.version_of(row["dist"])
        if not version or matches(str(mac), ">=" + row["macos"]):
            continue
        rec = f" ({row['recommended']} recommended)" if row.get("recommended") else ""
        out.append(Finding(
            "macos.package-needs-newer", "error",
            f"{row['dist']} {version} needs macOS {row['macos']} or newer; this is macOS "
            f"{snap.host.macos_version}",
            observed=f"{row['dist']} {version} installed; macOS {snap.host.macos_version}",
            why=row["why"] + f": on macOS {snap.host.macos_version} it does not load "
                "(\"built for macOS ... which is newer than running OS\").",
            fix=f"upgrade to macOS {row['macos']} or newer{rec} (System Settings > General > "
                "Software Update); every release of it read so far needs that macOS",
            source=row["source"]))
    return out


def check_companion_broken_release(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A companion release known broken beside the TensorFlow release it was made for -> error;
    the fix pins the last pair read to work.

    Example:
        >>> kb = {"tensorflow": {"distributions": ["tensorflow", "tensorflow-cpu"]},
        ...       "companion_broken": [{"dist": "tensorflow-text", "version": "==2.19.0",
        ...       "framework": "2.19.*", "good": "2.18.1", "why": "w", "source": "s"}]}
        >>> snap = EnvSnapshot(distributions={"tensorflow-cpu": "2.19.0",
        ...                                   "tensorflow-text": "2.19.0"})
        >>> [f.fix for f in check_companion_broken_release(snap, kb)]
        ["pip install 'tensorflow-cpu==2.18.1' 'tensorflow-text==2.18.1'"]
    """
    out: list[Finding] = []
    for row in kb.get("companion_broken", []):
        version = snap.version_of(row["dist"])
        if not version or not matches(version, row["version"]):
            continue
        tf = next(((d, snap.version_of(d)) for d in tf_distributions(snap, kb)
                   if snap.version_of(d) and matches(snap.version_of(d), "==" + row["framework"])),
                  None)
        if tf is None:
            continue
        out.append(Finding(
            "tensorflow.companion-broken-release", "error",
            f"{row['dist']} {version} is known broken beside {tf[0]} {tf[1]}",
            observed=f"{row['dist']} {version}, {tf[0]} {tf[1]}",
            why=row["why"] + "; the versions match, so the minor-release rule does not catch it.",
            fix=f"pip install '{tf[0]}=={row['good']}' '{row['dist']}=={row['good']}'",
            source=row["source"]))
    return out
