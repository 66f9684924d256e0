"""JSON values into annotated dataclasses, naming the first field of the wrong shape
(``host.cpu_cores_logical: expected an integer, got a string "four"``): how snapshots and the
probe's raw records are read back."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any

from devicebench.errors import SnapshotError


class _FieldError(Exception):
    def __init__(self, path: str, expected: str, got: Any) -> None:
        super().__init__(path)
        self.path = path or "(top level)"
        self.expected = expected
        self.got = "null" if got is None else f"{_json_type(got)} {_preview(got)}"


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _preview(value: Any) -> str:
    if isinstance(value, dict | list):
        return ""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


_EXPECTED = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


def _build(tp: Any, value: Any, path: str) -> Any:
    """Recursively turn JSON values into the annotated dataclass types, naming bad fields."""
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise _FieldError(path, "an object", value)
        hints = typing.get_type_hints(tp)
        if value and not set(value) & set(hints):  # {"bogus": 1}: none of its fields
            raise _FieldError(path, f"an object with {tp.__name__}'s fields", value)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in value:
                sub = f"{path}.{f.name}" if path else f.name
                kwargs[f.name] = _build(hints[f.name], value[f.name], sub)
        return tp(**kwargs)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _build(inner[0], value, path)
    if origin is list:
        if not isinstance(value, list):
            raise _FieldError(path, "a list", value)
        (item,) = typing.get_args(tp)
        return [_build(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise _FieldError(path, "an object", value)
        _, vt = typing.get_args(tp)
        return {str(k): _build(vt, v, f"{path}.{k}") for k, v in value.items()}
    if tp is Any:
        return value
    if tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise _FieldError(path, _EXPECTED[float], value)
    if tp is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise _FieldError(path, _EXPECTED[int], value)
    if tp in (str, bool) and not isinstance(value, tp):
        raise _FieldError(path, _EXPECTED[tp], value)
    return value


def build_dataclass(tp: Any, value: Any, what: str = "field", why: str | None = None) -> Any:
    """Build dataclass ``tp`` from JSON ``value``; raises SnapshotError naming a bad field
    (``what`` PATH: expected ..., got ...)."""
    try:
        return _build(tp, value, "")
    except _FieldError as exc:
        raise SnapshotError(
            f"{what} {exc.path}: expected {exc.expected}, got {exc.got}", why=why,
            fix="re-save it with `devicebench doctor --save FILE`",
        ) from None
