"""The rich console used by every terminal renderer."""

from __future__ import annotations

import os
import sys

from rich.console import Console

PIPE_WIDTH = 140


def make_console(stderr: bool = False) -> Console:
    """A console; when writing to a pipe or file (no terminal, no COLUMNS), use a width
    wide enough for the tables instead of rich's 80 columns."""
    stream = sys.stderr if stderr else sys.stdout
    width = None
    if not stream.isatty() and "COLUMNS" not in os.environ:
        width = PIPE_WIDTH
    return Console(stderr=stderr, width=width)
