"""The worker side of the pipe protocol: JSON lines over two dedicated pipes."""

from __future__ import annotations

import json
import os
from typing import Any


class Channel:
    """JSON lines over the two dedicated pipes (commands in, replies out).

    ``pending`` holds a command read ahead (by a loop that must stop on it) for the next
    :meth:`recv`.
    """

    def __init__(self, cmd_fd: int, res_fd: int) -> None:
        self._in = os.fdopen(cmd_fd, "r", encoding="utf-8")
        self._out = os.fdopen(res_fd, "w", encoding="utf-8", buffering=1)
        self.pending: dict[str, Any] | None = None

    def recv(self) -> dict[str, Any] | None:
        """The next command, or None when the parent closed the command pipe."""
        if self.pending is not None:
            msg, self.pending = self.pending, None
            return msg
        line = self._in.readline()
        return json.loads(line) if line else None

    def send(self, reply: dict[str, Any]) -> None:
        """Send one reply."""
        self._out.write(json.dumps(reply, default=float) + "\n")
        self._out.flush()
