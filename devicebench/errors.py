"""Domain errors. Each carries what went wrong, why, and how to fix it.

The CLI turns any :class:`DevicebenchError` into one line on stderr and exit code 2;
library callers catch them as ordinary exceptions.
"""

from __future__ import annotations

import re


class DevicebenchError(Exception):
    """Base class: a problem the user can fix. ``str()`` is the one-line message.

    Args:
        what: what was observed ("snapshot file not found: x.json").
        why: why it is a problem (optional).
        fix: the exact thing to do (optional).

    Example:
        >>> raise DevicebenchError("no such file: a.json", fix="pass an existing file")
        Traceback (most recent call last):
        devicebench.errors.DevicebenchError: no such file: a.json — fix: pass an existing file
    """

    exit_code = 2

    def __init__(self, what: str, why: str | None = None, fix: str | None = None) -> None:
        self.what = what
        self.why = why
        self.fix = fix
        super().__init__(self.message)

    @property
    def message(self) -> str:
        parts = [self.what]
        if self.why:
            parts.append(self.why)
        if self.fix:
            parts.append(f"fix: {self.fix}")
        return " — ".join(parts)


class InputError(DevicebenchError):
    """A file, argument or option given by the user is missing, unreadable or invalid."""


class ArgumentError(InputError, ValueError):
    """A library call's argument of the wrong type or out of range; also a ValueError,
    as Python's own argument errors are (``except ValueError`` still catches it)."""


class SnapshotError(InputError):
    """An environment snapshot file cannot be used (corrupt, newer schema, wrong shape)."""


class SpecError(InputError):
    """A trial specification names an unknown value or an out-of-range number."""


class StoreError(DevicebenchError):
    """The results database cannot be opened, read or written."""


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# Lines that wrap an error rather than name its cause (Keras layers, TF graph errors).
_WRAPPERS = re.compile(
    r"^(Exception encountered when calling|Graph execution error|Detected at node|"
    r"Arguments received by|Traceback \(most recent call last\)|\[\[|•)")


_CALLED = re.compile(r"when calling (\S+\(\))")


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape codes (colours, bold), as stored and shown."""
    return _ANSI.sub("", text)


def cause_line(message: str, limit: int = 300) -> str:
    """The line of an exception message that names its cause.

    Keras wraps a layer's error as "Exception encountered when calling Sequential.call()."
    with the cause two lines further down, TensorFlow a graph error as "Graph execution
    error:" with a stack in between: the first line that is neither such a wrapper nor
    indented is the cause (else the first non-empty line). ANSI codes are removed.

    Example:
        >>> cause_line("Exception encountered when calling X.call().\\n\\nbad shape (32, 5)")
        'bad shape (32, 5)'
    """
    lines = [ln.rstrip() for ln in strip_ansi(message).splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if not ln[0].isspace() and not _WRAPPERS.match(ln):
            if ln.endswith("Error encountered:") and i + 1 < len(lines):
                # Keras' "could not infer the output shape ... Error encountered:" wraps
                # the exception a layer's call() raised: that exception is the cause.
                where = _CALLED.search(message)
                cause = lines[i + 1].strip()
                return (f"{cause} (raised in {where.group(1)})" if where else cause)[:limit]
            return ln[:limit]
    return lines[0].strip()[:limit] if lines else ""


def exception_line(exc: BaseException) -> str:
    """``ValueError: <the line naming the cause>`` for an exception."""
    cause = cause_line(str(exc))
    return f"{type(exc).__name__}: {cause}" if cause else type(exc).__name__
