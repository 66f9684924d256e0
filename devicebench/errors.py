"""Domain errors. Each carries what went wrong, why, and how to fix it.

The CLI turns any :class:`DevicebenchError` into one line on stderr and exit code 2;
library callers catch them as ordinary exceptions.
"""

from __future__ import annotations


class DevicebenchError(Exception):
    """Base class: a problem the user can fix. ``str()`` is the one-line message.

    Args:
        what: what was observed ("snapshot file not found: x.json").
        why: why it is a problem (optional).
        fix: the exact thing to do (optional).

    Example:
        >>> raise DevicebenchError("no such file: a.json", fix="pass an existing file")
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


class SnapshotError(InputError):
    """An environment snapshot file cannot be used (corrupt, newer schema, wrong shape)."""


class SpecError(InputError):
    """A trial specification names an unknown value or an out-of-range number."""


class StoreError(DevicebenchError):
    """The results database cannot be opened, read or written."""
