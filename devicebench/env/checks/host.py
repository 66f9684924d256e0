"""Checks on the host outside any framework: numpy's BLAS."""

from __future__ import annotations

from devicebench.env.checks._util import KB
from devicebench.env.finding import Finding
from devicebench.env.snapshot import EnvSnapshot


def check_blas(snap: EnvSnapshot, kb: KB) -> list[Finding]:
    """numpy linked to a reference (unoptimised) BLAS, or reporting none -> warning."""
    numpy_v = snap.blas.numpy_version or snap.version_of("numpy")
    if not numpy_v:
        return []
    name = snap.blas.name.strip()
    low = name.lower()
    if low not in kb["blas"]["unoptimised"]:
        return []  # an optimised BLAS, or one we do not know: stay quiet
    reported = f"BLAS '{name}'" if name else "no BLAS library"
    return [
        Finding(
            "numpy.blas-unoptimised",
            "warning",
            "numpy has no optimised BLAS",
            observed=f"numpy {numpy_v} reports {reported}",
            why=(
                "Without an optimised BLAS (OpenBLAS, MKL, Accelerate, BLIS, ...) numpy's matrix "
                "products run on unvectorised single-threaded code, many times slower: input "
                "pipelines and CPU baselines measured with numpy read far too slow."
            ),
            fix=(
                "pip install --force-reinstall numpy  # PyPI wheels bundle OpenBLAS "
                "(Accelerate on recent macOS arm64)"
            ),
            source=kb["blas"]["source"],
        )
    ]
