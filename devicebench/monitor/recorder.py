"""How a monitored fit reaches the results store whatever ends it.

Keras calls ``on_train_end`` only when ``fit`` returns normally: an exception, Ctrl-C
or a SIGTERM skips it. So the run is started in the store when the fit starts, blocks
are appended as they are measured (at each epoch's end, and every
:data:`FLUSH_SECONDS` within a long epoch), and the run is marked how it ended:

- ``completed``: ``on_train_end``;
- ``error`` / ``interrupted``: at interpreter exit (``atexit``) after an exception left
  ``fit`` (``sys.last_value``: the uncaught exception; ``KeyboardInterrupt`` =
  interrupted), or when the same monitor starts another fit;
- ``terminated``: SIGTERM while the fit runs (a handler is installed only where the
  script has none: it records, then re-raises the signal with its default action, so
  the process still dies of SIGTERM);
- killed by SIGKILL or ``os._exit``: the run keeps no end time (history: interrupted),
  with every block flushed before.

Nothing here ever raises into the user's training: a store failure is one line (via
``warn``) and the recording stops, the training goes on.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

FLUSH_SECONDS = 10.0


def store_problem(db: Any) -> str | None:
    """Why the store ``db`` (a path, True = the default) cannot take monitored runs, or
    None when it can (the file is created and migrated as a side effect)."""
    from devicebench.errors import DevicebenchError
    from devicebench.store import ResultStore

    if not isinstance(db, str | Path | bool):
        return (f"db={db!r} is not a path: pass db='results.db', db=True (the default "
                "results file) or db=None")
    try:
        with ResultStore.open(None if db is True else db):
            return None
    except DevicebenchError as exc:
        return exc.message


class StoreRecorder:
    """One fit's run in the store: started now, blocks appended, ended once.

    Args:
        db: a path, or True for the default results file.
        options: what the fit was (stored with the run).
        blocks: ``blocks(start)`` returns the fit's blocks from index ``start`` as dicts.
        summary: returns the fit's figures when the run is ended.
        warn: prints one warning line.
    """

    def __init__(self, db: str | Path | bool, options: dict[str, Any],
                 blocks: Callable[[int], list[dict[str, Any]]],
                 summary: Callable[[], dict[str, Any]], warn: Callable[[str], None]) -> None:
        from devicebench.env.probe import probe_host_layer
        from devicebench.store import ResultStore
        from devicebench.store.monitor import start_monitor_run

        self.blocks = blocks
        self.summary = summary
        self.warn = warn
        self.stored = 0
        self.ended = False
        self._last_flush = time.monotonic()
        self._store = ResultStore.open(None if db is True else db)
        try:
            self.run_id: int = start_monitor_run(self._store, probe_host_layer(), options)
        except BaseException:
            self._store.close()
            raise
        self._previous_term: Any = None
        atexit.register(self._at_exit)
        if threading.current_thread() is threading.main_thread():
            try:
                if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                    self._previous_term = signal.signal(signal.SIGTERM, self._on_sigterm)
            except (ValueError, OSError):  # pragma: no cover - no signals here
                pass

    def flush(self, after_seconds: float = 0.0) -> None:
        """Append the blocks not stored yet, when ``after_seconds`` have passed since the
        last append (0: now).

        Raises:
            StoreError: the database cannot be written (the caller warns and stops).
        """
        if self.ended or time.monotonic() - self._last_flush < after_seconds:
            return
        from devicebench.store.monitor import add_monitor_blocks

        new = self.blocks(self.stored)
        self._last_flush = time.monotonic()
        if new:
            add_monitor_blocks(self._store, self.run_id, new, self.stored)
            self.stored += len(new)

    def end(self, ended: str, detail: str = "") -> None:
        """Store the remaining blocks and mark the run ``ended``; once (later calls do
        nothing). A failure is one warning line."""
        if self.ended:
            return
        from devicebench.store.monitor import end_monitor_run

        try:
            self.flush()
            self.ended = True
            end_monitor_run(self._store, self.run_id, self.summary(), ended, detail)
        except Exception as exc:  # noqa: BLE001 - never into the user's training
            self.warn(f"could not store the end of this fit ({one_line(exc)})")
        finally:
            self.ended = True
            self._release()

    def abandon(self) -> None:
        """Stop recording (the store failed): nothing more is written."""
        self.ended = True
        self._release()

    def _release(self) -> None:
        atexit.unregister(self._at_exit)
        if self._previous_term is not None:
            try:
                if signal.getsignal(signal.SIGTERM) == self._on_sigterm:
                    signal.signal(signal.SIGTERM, self._previous_term)
            except (ValueError, OSError):  # pragma: no cover - not the main thread
                pass
            self._previous_term = None
        try:
            self._store.close()
        except Exception:  # noqa: BLE001
            pass

    def _at_exit(self) -> None:
        exc = getattr(sys, "last_value", None)
        if isinstance(exc, KeyboardInterrupt):
            self.end("interrupted", "Ctrl-C (KeyboardInterrupt) in fit()")
        elif exc is not None:
            self.end("error", one_line(exc))
        else:
            self.end("error",
                     "fit() did not return: the script exited from inside it")

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self.end("terminated", "SIGTERM")
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line (at most 300 characters)."""
    text = getattr(exc, "message", None) or str(exc)
    return f"{type(exc).__name__}: {' '.join(str(text).split())}"[:300]
