"""Python libraries that must match each other's releases, and platform limits read from a
package's release alone (issue 24, round 23 step 0).

* ``[[library_pairings]]``: a library release that imports a name its partner added or removed
  in a known release (peft 0.14 and transformers' EncoderDecoderCache, trl before 0.8.1 and
  transformers' top_k_top_p_filtering, diffusers before 0.29 and huggingface_hub's
  cached_download). The snapshot records installed versions, not each distribution's declared
  ``requires``, so the rows are a cited table of the releases on each side.
* ``[jax_cuda_plugin_no_gpu]``: jax's CUDA plugin installed on a host where no NVIDIA GPU is
  seen; jax 0.4.30 and older fail at backend initialisation instead of falling back to the CPU.
* ``[bitsandbytes_windows]``: a bitsandbytes release older than the first with Windows wheels,
  on Windows.
"""

from __future__ import annotations

from devicebench.env.checks._util import KB, at_least, has_nvidia_gpu, installed_version, matches
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot


def check_library_pairing(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A library release beside a partner release it cannot import from -> warning.

    Example:
        >>> kb = {"library_pairings": [{"dist": "trl", "spec": "<0.8.1", "partner": "transformers",
        ...     "partner_spec": ">=4.39", "name": "n", "why": "w", "fix": "f", "source": "s"}]}
        >>> snap = EnvSnapshot(distributions={"trl": "0.7.6", "transformers": "4.39.1"})
        >>> [f.id for f in check_library_pairing(snap, kb)]
        ['package.pairing-mismatch']
        >>> snap.distributions["trl"] = "0.8.1"
        >>> check_library_pairing(snap, kb)
        []
    """
    out = []
    for row in kb.get("library_pairings", []):
        mine, theirs = installed_version(snap, row["dist"]), installed_version(snap, row["partner"])
        if not (matches(mine, row["spec"]) and matches(theirs, row["partner_spec"])):
            continue
        if row.get("effect"):  # a pair that imports but fails at run time (round 23)
            out.append(Finding(
                "package.pairing-mismatch", "warning",
                f"{row['dist']} {mine} {row['effect']} {row['partner']} {theirs}",
                observed=f"{row['dist']} {mine} beside {row['partner']} {theirs}",
                why=row["why"], fix=row["fix"], source=row["source"]))
            continue
        out.append(Finding(
            "package.pairing-mismatch", "warning",
            f"{row['dist']} {mine} does not import with {row['partner']} {theirs}",
            observed=f"{row['dist']} {mine} beside {row['partner']} {theirs}",
            why=f"{row['dist']} imports {row['name']} from {row['partner']}, which this "
                f"{row['partner']} release does not have: importing {row['dist']} (or a library "
                f"that imports it) fails with an ImportError. {row['why']}",
            fix=row["fix"], source=row["source"]))
    return out


def check_jax_cuda_plugin_without_gpu(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """jax's CUDA plugin on a host with no NVIDIA GPU seen, at a jax release that fails there
    instead of falling back to the CPU -> warning."""
    entry = kb.get("jax_cuda_plugin_no_gpu")
    jax = snap.version_of("jax")
    if not entry or not jax or has_nvidia_gpu(snap) or at_least(jax, entry["fixed_in"]):
        return []
    if any(d.kind == "GPU" for p in snap.frameworks.values() for d in p.physical_devices):
        return []
    plugins = [d for d in entry["dists"] if snap.has(d)]
    platforms = snap.env_vars.get("JAX_PLATFORMS", "").lower().replace(" ", "")
    if not plugins or (platforms and "cuda" not in platforms and "gpu" not in platforms):
        return []
    if not at_least(jax, entry["from"]):
        return []
    plugin = plugins[0]
    return [Finding(
        "jax.cuda-plugin-without-gpu", "warning",
        f"jax {jax} with {plugin} on a host where no NVIDIA GPU is seen: initialising "
        "jax's backends fails",
        observed=f"{plugin} {snap.version_of(plugin)}, jax {jax}; nvidia-smi lists no GPU",
        why="jax loads every installed PJRT plugin at its first backend call; the CUDA plugin "
            "finds no visible GPU and, before jax "
            f"{entry['fixed_in']}, that failure is an error (\"Unable to initialize backend "
            "'cuda': No visible GPU devices\") instead of a fall-back to the CPU. "
            "JAX_PLATFORMS only takes effect when set before jax is imported.",
        fix=f"export JAX_PLATFORMS=cpu before starting Python (or JAX_PLATFORMS=cuda,cpu to "
            f"fall back), pip uninstall {' '.join(plugins)} on hosts without a GPU, or "
            f"pip install -U 'jax>={entry['fixed_in']}' (it skips the CUDA backend when no "
            "NVIDIA GPU is visible)",
        source=entry["source"])]


def check_bitsandbytes_windows(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """A bitsandbytes release older than the first with Windows wheels, on Windows -> warning."""
    entry = kb.get("bitsandbytes_windows")
    have = snap.version_of("bitsandbytes")
    if not entry or snap.host.os != "Windows" or not have or at_least(have, entry["from"]):
        return []
    return [Finding(
        "bitsandbytes.no-windows-support", "warning",
        f"bitsandbytes {have} has no Windows support (Windows wheels start at {entry['from']})",
        observed=f"bitsandbytes {have} on Windows",
        why="bitsandbytes releases before "
            f"{entry['from']} ship only Linux CUDA libraries; their PyPI package installs on "
            "any OS, so on Windows its CUDA setup fails and it falls back to the CPU library "
            "(8-bit and 4-bit GPU operations are unavailable).",
        fix=f"pip install -U 'bitsandbytes>={entry['from']}' (the first release with official "
            "Windows CUDA wheels), then python -m bitsandbytes to check its setup",
        source=entry["source"])]
