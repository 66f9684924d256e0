"""Reading a script or a notebook from disk, with one clear error per bad input."""

from __future__ import annotations

import ast
import io
import json
import os
import re
import select
import stat
import time
import tokenize
from dataclasses import dataclass
from pathlib import Path

from devicebench.errors import InputError

MAX_FILE_BYTES = 64 * 2**20  # read no more (``/dev/zero``, a huge notebook)
PIPE_WAIT_S = 10.0  # a pipe or FIFO that gives nothing for this long is refused


def _read_bounded(p: Path) -> bytes:
    """The bytes of ``p``, read once, at most MAX_FILE_BYTES + 1 of them, never blocking
    for more than PIPE_WAIT_S on a pipe: a FIFO with no writer opens at once
    (O_NONBLOCK) and is refused after the wait instead of hanging."""
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        mode = os.fstat(fd).st_mode
        chunks: list[bytes] = []
        size = 0
        deadline = time.monotonic() + PIPE_WAIT_S
        while size <= MAX_FILE_BYTES:
            try:
                chunk: bytes | None = os.read(fd, 1 << 16)
            except BlockingIOError:  # a pipe whose writer has not written yet
                chunk = None
            if chunk:
                chunks.append(chunk)
                size += len(chunk)
                continue
            if chunk == b"" and (size or not stat.S_ISFIFO(mode)):
                break  # the end of the file, or of what the pipe's writer sent
            if time.monotonic() > deadline:
                raise InputError(f"script {p} is a pipe that sent nothing in "
                                 f"{PIPE_WAIT_S:.0f} s (no writer, or a stalled one)",
                                 fix=f"write the script to it (`cat train.py > {p}`) or "
                                     "pass the file itself")
            if chunk is None:
                select.select([fd], [], [], 0.1)
            else:  # EOF before any byte: no writer yet; select would not wait
                time.sleep(0.05)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str | Path) -> str:
    """The source text of ``path``, read once (a pipe such as ``/dev/stdin`` works).

    Raises:
        InputError: missing, a directory, unreadable, binary, not decodable, over 64 MiB,
            or a pipe that sends nothing within 10 s.
    """
    p = Path(path)
    if p.is_dir():
        raise InputError(f"script path is a directory: {p}",
                         fix="pass the training script itself, e.g. path/to/train.py")
    try:
        data = _read_bounded(p)
    except FileNotFoundError:
        raise InputError(f"script not found: {p}",
                         fix="check the path and the current directory") from None
    except OSError as exc:
        raise InputError(f"cannot read script {p}: {exc.strerror or exc}",
                         fix="check the file's permissions") from None
    if len(data) > MAX_FILE_BYTES:
        raise InputError(f"script {p} is over {MAX_FILE_BYTES // 2**20} MiB",
                         why="a training script is a text file of kilobytes",
                         fix="pass the .py training script or the .ipynb notebook")
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


_PYTHON_CELL_MAGICS = ("%%time", "%%timeit", "%%capture", "%%prun", "%%memit")


@dataclass(frozen=True)
class Notebook:
    """A notebook's code cells joined into one Python source, with the way back to cells.

    Attributes:
        source: the code cells, IPython magics and shell lines blanked to ``pass``.
        origin: for each source line (index 0 = line 1), its (cell number, line in cell);
            cells are numbered from 1 over all cells, markdown included, as shown in the file.
        code_cells: how many code cells were read.
        skipped: numbers of the cells that do not parse as Python (left out).
    """

    source: str
    origin: list[tuple[int, int]]
    code_cells: int
    skipped: tuple[int, ...]

    def cell_of(self, line: int) -> tuple[int, int]:
        """(cell number, line within the cell) of a line of :attr:`source`."""
        return self.origin[line - 1] if 0 < line <= len(self.origin) else (0, line)


_TIME_MAGIC = re.compile(r"%(?:time|timeit)((?:\s+-[A-Za-z]\S*(?:\s+\d+)?)*)\s+(\S.*)$")


def _timed_magic(body: str) -> str | None:
    """``%timeit -n10 f(x)`` / ``%time f(x)`` -> ``timeit.timeit(lambda: (f(x)))``: the same
    line, readable by the timing rules (``None`` if the timed code is not an expression)."""
    m = _TIME_MAGIC.match(body.rstrip())
    if not m:
        return None
    expr = m.group(2).split("  #", 1)[0].strip()
    try:
        ast.parse(expr, mode="eval")
    except (SyntaxError, ValueError):
        return None
    return f"timeit.timeit(lambda: ({expr}))"


def _unmagic(lines: list[str]) -> list[str]:
    """IPython-only lines (``%magic``, ``!shell``, ``x = !cmd``, ``obj?``) -> ``pass``;
    ``%time``/``%timeit`` of an expression -> a ``timeit.timeit`` call on the same line."""
    if lines and lines[0].lstrip().startswith("%%"):
        if not lines[0].strip().startswith(_PYTHON_CELL_MAGICS):
            return ["pass"] * len(lines)  # %%bash, %%writefile, ...: not Python
        lines = ["pass", *lines[1:]]
    out = []
    for ln in lines:
        body = ln.lstrip()
        indent = ln[:len(ln) - len(body)]
        timed = _timed_magic(body) if body.startswith("%time") else None
        if timed is not None:
            out.append(indent + timed)
        elif body.startswith(("%", "!")) or body.rstrip().endswith("?") and not body.startswith(
                "#"):
            out.append(indent + "pass")
        elif "= !" in body or "= %" in body:
            out.append(indent + body.split("=", 1)[0].rstrip() + " = None")
        else:
            out.append(ln)
    return out


def read_notebook(path: str | Path) -> Notebook:
    """The code cells of a Jupyter notebook as one source text.

    Raises:
        InputError: the file is not a readable notebook (JSON with a list of cells).
    """
    p = Path(path)
    text = read_text(p)
    try:
        cells = json.loads(text)["cells"]
        if not isinstance(cells, list):
            raise TypeError("cells is not a list")
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"notebook {p} is not valid Jupyter JSON ({exc})",
                         fix="pass an .ipynb saved by Jupyter, or the .py script") from None
    parts: list[str] = []
    origin: list[tuple[int, int]] = []
    code, skipped = 0, []
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        if isinstance(src, list) and all(isinstance(x, str) for x in src):
            src = "".join(src)
        elif not isinstance(src, str):
            raise InputError(f"notebook {p}: cell {number}'s source is {src!r:.40}, not text",
                             why="Jupyter stores a cell's code as a string or a list of lines",
                             fix="open and save it in Jupyter, or pass the .py script")
        lines = _unmagic(src.splitlines())
        code += 1
        try:
            ast.parse("\n".join(lines))
        except (SyntaxError, ValueError):
            skipped.append(number)
            continue
        parts.extend(lines)
        origin.extend((number, row) for row in range(1, len(lines) + 1))
    return Notebook("\n".join(parts) + "\n", origin, code, tuple(skipped))
