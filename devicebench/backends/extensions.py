"""Packages that extend a framework, imported after it by the probe worker (issue 24).

Most environments users report broken are broken inside such a package: a compiled PyTorch
extension built for another torch (``undefined symbol: _ZN3c10...``), a JAX library calling a
name a newer jax removed (``jax.random.KeyArray``), a Keras add-on that needs Keras 2. The
framework itself imports fine there, so a probe that imports only the framework sees a healthy
machine. The worker therefore imports each installed package of :data:`EXTENSIONS` after its
framework, in the same process, and keeps what each one raised, bounded in text and in time.

A package that kills the process (a segfault in a native library) must not lose the
framework's own result: the worker writes its result before each import, naming the module it
is about to import (``extension_pending``); a result still naming one was cut short by it.
"""

from __future__ import annotations

import importlib
import importlib.util
import time
from collections.abc import Callable
from typing import Any

# (distribution, module imported): the module whose import loads the package's compiled part
# where it has one (``mmcv._ext``, ``amp_C``), else the package. Large serving stacks (vllm,
# sglang) are left out: their import alone takes longer than the probe's whole budget.
EXTENSIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "torch": (
        ("flash-attn", "flash_attn_2_cuda"), ("torchvision", "torchvision"),
        ("torchaudio", "torchaudio"), ("xformers", "xformers"), ("torchtext", "torchtext"),
        ("torch-scatter", "torch_scatter"), ("torch-sparse", "torch_sparse"),
        ("torch-cluster", "torch_cluster"), ("torch-spline-conv", "torch_spline_conv"),
        ("torch-geometric", "torch_geometric"), ("dgl", "dgl"), ("mmcv", "mmcv._ext"),
        ("bitsandbytes", "bitsandbytes"), ("apex", "amp_C"), ("pytorch3d", "pytorch3d._C"),
        ("detectron2", "detectron2._C"), ("spconv", "spconv"), ("kaolin", "kaolin"),
        ("gsplat", "gsplat"), ("tinycudann", "tinycudann"), ("torch-npu", "torch_npu"),
        ("intel-extension-for-pytorch", "intel_extension_for_pytorch"),
        ("torch-directml", "torch_directml"), ("deepspeed", "deepspeed")),
    "jax": (
        ("flax", "flax"), ("optax", "optax"), ("orbax-checkpoint", "orbax.checkpoint"),
        ("chex", "chex"), ("equinox", "equinox"), ("dm-haiku", "haiku"),
        ("diffrax", "diffrax"), ("numpyro", "numpyro"), ("blackjax", "blackjax"),
        ("dynamax", "dynamax"), ("jraph", "jraph")),
    "tensorflow": (
        ("tf-keras", "tf_keras"), ("tensorflow-probability", "tensorflow_probability"),
        ("keras-hub", "keras_hub"), ("keras-cv", "keras_cv"), ("keras-nlp", "keras_nlp"),
        ("tensorflow-text", "tensorflow_text"), ("tensorflow-addons", "tensorflow_addons"),
        ("tensorflow-hub", "tensorflow_hub"), ("tensorflow-io", "tensorflow_io")),
}
BUDGET_S = 20.0  # all of a framework's extensions together; the rest is listed as skipped
MAX_ERROR_CHARS = 400


def dist_of(framework: str, module: str) -> str:
    """The distribution a module of :data:`EXTENSIONS` belongs to ("" if none).

    Example:
        >>> dist_of("torch", "mmcv._ext")
        'mmcv'
    """
    return next((d for d, m in EXTENSIONS.get(framework, ()) if m == module), "")


def _installed(module: str) -> bool:
    top = module.split(".")[0]
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def import_extensions(framework: str, extra: dict[str, Any],
                      save: Callable[[], None] = lambda: None,
                      modules: tuple[str, ...] | None = None,
                      budget_s: float = BUDGET_S) -> None:
    """Import each installed extension of ``framework`` (or ``modules``), recording into
    ``extra``: ``extension_errors`` (module -> its error, bounded), ``extensions_imported``
    and ``extensions_skipped`` (out of time). ``save()`` is called before each import with
    ``extension_pending`` naming it, and once more at the end without it."""
    names = modules if modules is not None else tuple(m for _, m in EXTENSIONS.get(framework, ()))
    errors: dict[str, str] = extra.setdefault("extension_errors", {})
    imported: list[str] = extra.setdefault("extensions_imported", [])
    start = time.perf_counter()
    for i, name in enumerate(names):
        if not _installed(name):
            continue
        if time.perf_counter() - start > budget_s:
            extra["extensions_skipped"] = [n for n in names[i:] if _installed(n)]
            break
        extra["extension_pending"] = name
        save()
        try:
            importlib.import_module(name)
            imported.append(name)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - an extension may exit()
            errors[name] = f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]
        extra.pop("extension_pending", None)
    if not errors:
        extra.pop("extension_errors", None)
    if not imported:
        extra.pop("extensions_imported", None)
    save()
