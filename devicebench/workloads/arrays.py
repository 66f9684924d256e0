"""Training data that is one array, or a dict or list/tuple of arrays (a model with named
or several inputs or outputs, as Keras' ``fit`` takes them): row slicing, the sample
count, concatenating batches, and storing it in one ``.npz`` file.

One level only (``{"image": a, "meta": b}``, ``[a, b]``): what Keras' functional models
with several ``Input``s or outputs take. Deeper nesting is refused by the capture.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

Structure = dict[str, Any] | None  # None: one array; {"dict": [keys]}; {"list"|"tuple": n}


def is_nested(value: Any) -> bool:
    """A dict, list or tuple of arrays (not one array)."""
    return isinstance(value, dict | list | tuple)


def tree_map(fn: Callable[[Any], Any], value: Any) -> Any:
    """``fn`` on each array of ``value``, keeping its dict/list/tuple shape."""
    if isinstance(value, dict):
        return {k: fn(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(fn(v) for v in value)
    return fn(value)


def leaves(value: Any) -> list[Any]:
    """The arrays of ``value`` in order."""
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, list | tuple):
        return list(value)
    return [value]


def n_samples(value: Any) -> int:
    """Rows of ``value`` (its first array's length: Keras requires them all equal)."""
    first = leaves(value)
    return int(len(first[0])) if first else 0


def take(value: Any, start: int | None, stop: int | None) -> Any:
    """Rows ``start:stop`` of every array of ``value``.

    Example:
        >>> take({"a": np.arange(4), "b": np.arange(4)}, 1, 3)["b"].tolist()
        [1, 2]
    """
    return tree_map(lambda a: a[start:stop], value)


def concat(parts: list[Any]) -> Any:
    """The batches ``parts`` (all of one shape: arrays, or dicts/lists of arrays) joined
    along the rows."""
    first = parts[0]
    if isinstance(first, dict):
        return {k: np.concatenate([p[k] for p in parts]) for k in first}
    if isinstance(first, list | tuple):
        return type(first)(np.concatenate([p[i] for p in parts]) for i in range(len(first)))
    return np.concatenate(parts)


def check_flat(value: Any, what: str) -> None:
    """ValueError unless ``value`` is an array or one level of dict/list of arrays."""
    if is_nested(value) and any(is_nested(v) or v is None for v in leaves(value)):
        raise ValueError(f"its {what} nest dicts or lists more than one level deep "
                         "(or hold None)")
    if isinstance(value, dict) and not all(isinstance(k, str) for k in value):
        raise ValueError(f"its {what} are a dict whose keys are not all strings")


def to_npz(name: str, value: Any) -> tuple[dict[str, np.ndarray], Structure]:
    """``{npz key: array}`` and the structure :func:`from_npz` rebuilds ``value`` from."""
    if isinstance(value, dict):
        keys = list(value)
        return ({f"{name}.{i}": np.asarray(value[k]) for i, k in enumerate(keys)},
                {"dict": keys})
    if isinstance(value, list | tuple):
        kind = "list" if isinstance(value, list) else "tuple"
        return ({f"{name}.{i}": np.asarray(v) for i, v in enumerate(value)},
                {kind: len(value)})
    return {name: np.asarray(value)}, None


def from_npz(name: str, npz: Mapping[str, np.ndarray], structure: Structure) -> Any:
    """The value :func:`to_npz` stored under ``name``."""
    if not structure:
        return npz[name]
    if "dict" in structure:
        return {k: npz[f"{name}.{i}"] for i, k in enumerate(structure["dict"])}
    kind = "list" if "list" in structure else "tuple"
    items = [npz[f"{name}.{i}"] for i in range(int(structure[kind]))]
    return items if kind == "list" else tuple(items)


def describe(value: Any) -> str:
    """``a dict of 2 arrays (image, meta)``, ``a list of 2 arrays``, or ``""``."""
    if isinstance(value, dict):
        return f"a dict of {len(value)} arrays ({', '.join(map(str, value))})"
    if isinstance(value, list | tuple):
        return f"a {type(value).__name__} of {len(value)} arrays"
    return ""
