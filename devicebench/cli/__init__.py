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
from devicebench.cli.calls import calls
from devicebench.errors import DevicebenchError
from devicebench.jobs.main import main_job

# `-` as a file: one test and one refusal for the CLI and the jobs.
from devicebench.validate import STDOUT, is_stdout, refuse_stdout  # noqa: F401

F = TypeVar("F", bound=Callable[..., Any])

DB_HELP = ("SQLite results file (default: $DEVICEBENCH_DB, else results.db in the user data "
           "directory).")

app = typer.Typer(
    name="devicebench",
    help=(
        "Is my accelerator actually speeding up my training, why or why not, and what is "
        "the fastest way to train my model on this machine?  Without a command: the main "
        "job (a doctor summary, then advise on the built-in seed-rnn and mnist-cnn); "
        "`devicebench train.py`: the same on your own script."
    ),
    invoke_without_command=True,
    add_completion=False,
    # Click's own help: upper-case metavars, no <bool> placeholder on flags, paragraphs
    # rewrapped to the terminal, and text printed as written (no rich markup, so
    # `pip install 'devicebench[report]'` keeps its brackets).
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def fail(message: str, code: int = 2) -> None:
    """Print one ``devicebench: error: ...`` line to stderr and exit."""
    print(f"devicebench: error: {message}", file=sys.stderr)
    raise typer.Exit(code)


def write_output(path: Path, text: str, what: str) -> bool:
    """Write ``text`` to the file ``path``, or to stdout when ``path`` is ``-``.

    Returns True when it went to stdout: the caller then prints nothing else there (its
    "wrote ..." line goes to stderr, so ``export 9 -o - > bundle.json`` stays clean).

    Raises:
        InputError: ``path`` is a directory or cannot be written.
    """
    from devicebench.errors import InputError

    if is_stdout(path):
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
        return True
    if path.is_dir():
        raise InputError(f"{what} path is a directory: {path}",
                         fix=f"pass a file name, e.g. {path / ('out.' + what.lower())}, "
                             "or - for stdout")
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}",
                         fix="pass a path in a writable directory, or - for stdout") from None
    return False


def say(message: str, *, to_stderr: bool = False) -> None:
    """A confirmation line ("wrote ..."): on stdout, or on stderr when stdout carries
    the output itself."""
    print(message, file=sys.stderr if to_stderr else sys.stdout)


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
@calls(main_job, cli_only=("version",))
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Show the version."
    ),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Is my accelerator actually speeding up my training? Measured answers and the fix.

    Without a command: the main job — a doctor summary, then `advise` on the built-in
    seed-rnn and mnist-cnn workloads under a short budget, with one verdict per workload.
    """
    if ctx.invoked_subcommand is None:
        from devicebench.cli.advise import main_job as run_main_job

        raise typer.Exit(run_main_job(db))


from devicebench.cli import advise as _advise  # noqa: E402,F401
from devicebench.cli import doctor as _doctor  # noqa: E402,F401  (registers commands)
from devicebench.cli import fleet as _fleet  # noqa: E402,F401
from devicebench.cli import history as _history  # noqa: E402,F401
from devicebench.cli import monitor as _monitor  # noqa: E402,F401
from devicebench.cli import ops as _ops  # noqa: E402,F401
from devicebench.cli import profile as _profile  # noqa: E402,F401
from devicebench.cli import report as _report  # noqa: E402,F401
from devicebench.cli import run as _run  # noqa: E402,F401
from devicebench.cli import script as _script  # noqa: E402,F401


def _name_metavars(cmd: Any) -> None:
    """Upper-case metavars named for what they hold (``--budget BUDGET``, ``WORKLOAD``),
    where a command did not give one, in place of typer's ``<float range>``; flags get
    none, and an argument's usage reads ``WORKLOAD`` / ``[WORKLOADS]...`` (typer writes
    ``{workload}`` and appends the type). Walks every subcommand."""
    for sub in getattr(cmd, "commands", {}).values():
        _name_metavars(sub)
    for param in cmd.params:
        if getattr(param, "is_flag", False) or not param.name:
            continue
        if param.metavar is None:
            param.metavar = param.name.upper()
        if param.param_type_name != "argument":
            continue
        usage = param.metavar if param.required else f"[{param.metavar}]"
        usage += "..." if param.nargs != 1 else ""
        # Instance attributes shadow typer's methods of the same names (its usage and
        # help-column renderers); the help test renders every command through them.
        param._usage_display_name = lambda usage=usage: usage
        param.display_type_rich = lambda ctx: None


def command() -> Any:
    """The click command behind ``devicebench`` (typer builds it), with its metavars
    named (:func:`_name_metavars`)."""
    cmd = typer.main.get_command(app)
    _name_metavars(cmd)
    return cmd


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


def _command_path(args: list[str]) -> tuple[str, Any]:
    """``devicebench report`` (and its click command) for ``report --md``: click's
    "requires an argument" error carries no context to name the command by."""
    cmd, path = command(), ["devicebench"]
    for arg in args:
        sub = getattr(cmd, "commands", {}).get(arg)
        if sub is None:
            break
        cmd, path = sub, [*path, arg]
    return " ".join(path), cmd


def _takes_dash(cmd: Any, option: str | None) -> bool:
    """Whether ``option`` of ``cmd`` is a file option whose help says '-' is stdout."""
    return any(option in p.opts and "'-': stdout" in (p.help or "")
               for p in getattr(cmd, "params", []) if option)


def main() -> None:
    """Console-script entry point.

    Typer's own usage errors (an unknown option, ``--budget -1``) become one line and
    exit 2, like every other bad input, instead of a boxed message.
    """
    from devicebench.cli.script import main_script_argv

    sys.argv[1:] = main_script_argv(sys.argv[1:])  # `devicebench train.py`: the main job
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        code = command()(standalone_mode=False)
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
        where, cmd = _command_path(sys.argv[1:])
        if where == "devicebench" and ctx is not None:  # options before the command
            where = ctx.command_path
        message = exc.format_message()
        if _takes_dash(cmd, getattr(exc, "option_name", None)):
            message = message.rstrip(".") + ": a file name, or - for stdout"
        print(f"devicebench: error: {message} — fix: see `{where} --help`", file=sys.stderr)
        sys.exit(exc.exit_code if isinstance(exc.exit_code, int) and exc.exit_code else 2)
    if _terminated and code == 130:
        code = 143  # 128 + SIGTERM, as a shell reports a process it ended
    sys.exit(code if isinstance(code, int) else 0)
