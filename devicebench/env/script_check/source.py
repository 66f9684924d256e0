"""Reading a script from disk: bytes -> text, with one clear error per bad input."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

from devicebench.errors import InputError


def read_text(path: str | Path) -> str:
    """The source text of ``path``.

    Raises:
        InputError: missing, a directory, unreadable, binary, or not decodable.
    """
    p = Path(path)
    if p.is_dir():
        raise InputError(f"script path is a directory: {p}",
                         fix="pass the training script itself, e.g. path/to/train.py")
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"script not found: {p}",
                         fix="check the path and the current directory") from None
    except OSError as exc:
        raise InputError(f"cannot read script {p}: {exc.strerror or exc}",
                         fix="check the file's permissions") from None
    if b"\x00" in data:
        raise InputError(f"script {p} is a binary file, not Python source",
                         fix="pass the .py training script")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        raise InputError(f"script {p} is not readable as Python source text ({exc})",
                         why="Python source must be UTF-8 or declare its encoding",
                         fix="save it as UTF-8") from None
