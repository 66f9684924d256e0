"""Trial worker: ``python -m devicebench.trials.worker CMD_FD RESULT_FD``.

Started by :class:`devicebench.launch.WorkerProcess` with the trial's
environment already set (backend, device visibility, threads). It reads JSON-line
commands from CMD_FD and answers on RESULT_FD — never stdout, which workloads may use.

Commands: ``prepare`` (set the device and threads, import the framework: the parent
starts every worker of a comparison at once so their imports overlap), ``setup`` (build,
compile, equivalence steps), ``measure`` (warm-up, then timed blocks, each ending with a
device sync), ``finish`` (memory, final loss; then exit). The work itself is
:class:`devicebench.trials.session.TrialSession` (re-exported here).
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any

from devicebench.errors import exception_line, strip_ansi
from devicebench.launch.child import Channel, die_with_parent, exit_now
from devicebench.trials.protocol import MeasureRequest, PrepareRequest, SetupRequest
from devicebench.trials.session import (  # noqa: F401  (re-exported)
    CHECKPOINT_STEPS,
    MAX_WARMUP_BLOCKS,
    VALIDATION_TIMINGS,
    NonFiniteLoss,
    TrialSession,
)


def _failure(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, MemoryError):
        status = "oom"
    elif isinstance(exc, NonFiniteLoss):
        status = "nan"
    else:
        status = "oom" if "out of memory" in str(exc).lower() else "error"
    # The line naming the cause (not Keras' "Exception encountered when calling ..."),
    # and the whole text without colour codes.
    return {"ok": False, "status": status, "error": exception_line(exc),
            "traceback": strip_ansi(traceback.format_exc())[-2000:]}


def main(argv: list[str]) -> int:
    die_with_parent()
    channel = Channel(int(argv[0]), int(argv[1]))
    session: TrialSession | None = None
    while (msg := channel.recv()) is not None:
        cmd = msg.get("cmd")
        try:
            if cmd == "ping":
                channel.send({"ok": True, "pid": os.getpid()})
                continue
            if cmd in ("prepare", "setup"):
                req = (PrepareRequest if cmd == "prepare" else SetupRequest).from_message(msg)
                if session is None or session.spec != req.spec:
                    session = TrialSession(req.spec)
                if isinstance(req, PrepareRequest):
                    channel.send(session.prepare().to_message())
                else:
                    channel.send(session.setup(req).to_message())
                continue
            if session is None:
                raise RuntimeError(f"command {cmd!r} before setup")
            if cmd == "measure":
                # Returns when a command other than "measure" arrives.
                req = MeasureRequest.from_message(msg)
                session.run_blocks(channel, req.whole_epochs, req.steps_per_block)
                continue
            if cmd == "finish":
                channel.send(session.finish().to_message())
                return 0
            raise RuntimeError(f"unknown command {cmd!r}")
        except BaseException as exc:  # noqa: BLE001 - every failure goes to the parent
            channel.send(_failure(exc))
            return 1
    return 0


if __name__ == "__main__":
    exit_now(main(sys.argv[1:]))
