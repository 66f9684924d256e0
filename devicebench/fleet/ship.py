"""Ship a user's workload to the nodes inside the task's arguments (Ray's object store),
never through a shared filesystem: the files a workload reference names travel as bytes
and are written to a temporary directory on each node."""

from __future__ import annotations

from pathlib import Path

from devicebench.errors import InputError

PLACEHOLDER = "{shipped}"


def _split(ref: str) -> list[tuple[str, str]]:
    """``(path, suffix)`` pieces of a reference: ``file.py:func``, ``model.keras``,
    ``model.keras::data.npz``; a built-in name has none."""
    pieces = []
    for part in ref.split("::"):
        path, sep, func = part.rpartition(":") if part.count(":") and \
            not part.endswith(".keras") else (part, "", "")
        if not sep:
            path, func = part, ""
        if path.endswith((".py", ".keras", ".npz")):
            pieces.append((path, f":{func}" if sep else ""))
    return pieces


def pack_workload(ref: str) -> tuple[str, dict[str, bytes]]:
    """A reference the nodes can rebuild, and the bytes of the files it names.

    Returns:
        ``(template, files)``: the reference with each file replaced by
        ``{shipped}/<name>``, and ``name -> bytes``; a built-in name comes back as is.

    Raises:
        InputError: a named file that cannot be read.
    """
    files: dict[str, bytes] = {}
    template = ref
    for i, (path, _) in enumerate(_split(ref)):
        p = Path(path)
        try:
            data = p.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read {path} to ship it to the nodes: "
                             f"{exc.strerror or exc}", fix="pass a readable file") from None
        name = f"{i}-{p.name}"
        files[name] = data
        template = template.replace(path, f"{PLACEHOLDER}/{name}", 1)
    return template, files


def unpack_workload(template: str, files: dict[str, bytes], where: Path) -> str:
    """Write the shipped files under ``where`` (on the node); the reference to them."""
    for name, data in files.items():
        (where / name).write_bytes(data)
    return template.replace(PLACEHOLDER, str(where))
