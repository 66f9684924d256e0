"""Thin typer commands. Heavy modules are imported inside commands, so that
``devicebench --help`` stays fast and the parent never imports a framework."""

from __future__ import annotations

import errno
import os
import signal
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import typer

from devicebench import __version__
from devicebench.errors import DevicebenchError

F = TypeVar("F", bound=Callable[..., Any])

app = typer.Typer(
    name="devicebench",
    help=(
        "Is my accelerator actually speeding up my training, why or why not, and what is "
        "the fastest way to train my model on this machine?  Without a command: the main "
        "job (a doctor summary, then advise on the built-in seed-rnn and mnist-cnn)."
    ),
    invoke_without_command=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def fail(message: str, code: int = 2) -> None:
    """Print one ``devicebench: error: ...`` line to stderr and exit."""
    print(f"devicebench: error: {message}", file=sys.stderr)
    raise typer.Exit(code)


def user_errors(func: F) -> F:
    """Turn DevicebenchError (and Ctrl-C) into one line and an exit code; no traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except DevicebenchError as exc:
            fail(exc.message, exc.exit_code)
        except KeyboardInterrupt:
            print("devicebench: interrupted", file=sys.stderr)
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def _version_callback(value: bool) -> None:
    if value:
        print(f"devicebench {__version__}")
        raise typer.Exit(0)


@app.callback()
@user_errors
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Show the version."
    ),
    db: Path | None = typer.Option(None, "--db", help="SQLite results file for the main job "
                                   "(default: $DEVICEBENCH_DB, else the user data directory)."),
) -> None:
    """Is my accelerator actually speeding up my training? Measured answers and the fix.

    Without a command: the main job — a doctor summary, then `advise` on the built-in
    seed-rnn and mnist-cnn workloads under a short budget, with one verdict per workload.
    """
    if ctx.invoked_subcommand is None:
        from devicebench.cli.advise import main_job

        raise typer.Exit(main_job(db))


from devicebench.cli import advise as _advise  # noqa: E402,F401
from devicebench.cli import doctor as _doctor  # noqa: E402,F401  (registers commands)
from devicebench.cli import history as _history  # noqa: E402,F401
from devicebench.cli import monitor as _monitor  # noqa: E402,F401
from devicebench.cli import ops as _ops  # noqa: E402,F401
from devicebench.cli import profile as _profile  # noqa: E402,F401
from devicebench.cli import report as _report  # noqa: E402,F401
from devicebench.cli import run as _run  # noqa: E402,F401


def _output_lost(exc: OSError) -> None:
    """stdout could not be written (``> /dev/full``, a full disk): one line, exit 1."""
    try:  # nothing more to stdout, not even Python's flush at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError:
        pass
    print(f"devicebench: error: cannot write the output: {exc.strerror} (errno "
          f"{exc.errno}) — anything measured is in the results database — fix: free "
          "some space, or send the output elsewhere (> FILE on another disk)",
          file=sys.stderr)
    sys.exit(1)


_terminated: list[int] = []


def _on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM ends the command as Ctrl-C does — workers' groups killed, finished trials
    stored, temporary directories removed — then exits 143; a second one ends at once."""
    _terminated.append(signum)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise KeyboardInterrupt


def main() -> None:
    """Console-script entry point.

    Typer's own usage errors (an unknown option, ``--budget -1``) become one line and
    exit 2, like every other bad input, instead of a boxed message.
    """
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        code = app(standalone_mode=False)
        sys.stdout.flush()  # here, not at exit: a full disk is said in one line
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        _output_lost(exc)
    except (typer.Abort, KeyboardInterrupt):  # Ctrl-C outside a command's own handler
        print("devicebench: interrupted", file=sys.stderr)
        sys.exit(143 if _terminated else 130)
    except Exception as exc:
        # click's UsageError and friends (vendored by typer, not public): duck-typed.
        if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
            raise
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else "devicebench"
        print(f"devicebench: error: {exc.format_message()} — fix: see `{where} --help`",
              file=sys.stderr)
        sys.exit(exc.exit_code if isinstance(exc.exit_code, int) and exc.exit_code else 2)
    if _terminated and code == 130:
        code = 143  # 128 + SIGTERM, as a shell reports a process it ended
    sys.exit(code if isinstance(code, int) else 0)
