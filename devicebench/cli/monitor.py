"""``devicebench monitor -- python train.py``: attach the training monitor to an
unmodified script. The parent only starts the child (no framework is imported here)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sys
from pathlib import Path

import typer

from devicebench.cli import DB_HELP, app, fail, refuse_stdout, user_errors

MONITOR_HELP = "\n\n".join([
    "Run a training script unchanged with devicebench's TrainingMonitor attached to every "
    "Keras fit() call: step time and samples/s over blocks of steps (each ended by a device "
    "sync), compilation apart, memory, GPU utilisation (NVML), NaN and stall alerts, and one "
    "line at the end.",
    "Example: devicebench monitor --csv steps.csv -- python train.py --epochs 3",
    "The script runs with DEVICEBENCH_MONITOR set (its value: the monitor's options as "
    "JSON) and a sitecustomize on PYTHONPATH; a script can also call "
    "devicebench.monitor.install_from_env() itself. Results go to the SQLite store as a "
    "run tagged 'monitor' unless --no-store (devicebench history, devicebench report RUN).",
    "The store, --csv and --tensorboard are checked before the script starts (exit 2 if one "
    "cannot be written); after that the monitor never stops the training: a failure of its "
    "own is one warning line. SIGINT and SIGTERM are passed to the script; a script killed "
    "by signal N exits 128+N.",
])


@app.command("monitor", help=MONITOR_HELP,
             context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@user_errors
def monitor(
    command: list[str] = typer.Argument(None, help="The command to run, after --."),
    csv: Path | None = typer.Option(None, "--csv", help="Write blocks and epochs to this CSV."),
    tensorboard: Path | None = typer.Option(None, "--tensorboard",
                                            help="Write TensorBoard scalars to this directory "
                                            "(needs tensorboardX)."),
    stop_on_nan: bool = typer.Option(False, "--stop-on-nan",
                                     help="Stop training when the loss becomes NaN/Inf."),
    block_steps: int | None = typer.Option(None, "--block-steps", min=1,
                                           help="Steps per timed block (default: automatic)."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
    no_store: bool = typer.Option(False, "--no-store", help="Do not record in the store."),
) -> None:
    raise typer.Exit(run_monitored(command or [], csv=csv, tensorboard=tensorboard,
                                   stop_on_nan=stop_on_nan, block_steps=block_steps,
                                   db=db, store=not no_store))


def run_monitored(command: list[str], *, csv: Path | None = None,
                  tensorboard: Path | None = None, stop_on_nan: bool = False,
                  block_steps: int | None = None, db: Path | None = None,
                  store: bool = True) -> int:
    """Run ``command`` with the monitor armed; returns its exit code (128+N when a
    signal N killed it, as a shell reports it).

    The store, CSV and TensorBoard targets are checked first: a bad one is one line and
    exit 2, and the script is not started.
    """
    from devicebench.launch.forward import run_forwarding_signals, signal_death_line

    if not command or not command[0].strip():
        fail("no command to monitor — pass it after --, e.g. "
             "`devicebench monitor -- python train.py`")
    check_targets(csv=csv, tensorboard=tensorboard, db=db if store else None, store=store)
    options: dict[str, object] = {}
    if csv is not None:
        options["csv_path"] = str(csv.resolve())
    if tensorboard is not None:
        options["tensorboard_dir"] = str(tensorboard.resolve())
    if stop_on_nan:
        options["stop_on_nan"] = True
    if block_steps is not None:
        options["block_steps"] = block_steps
    if store:
        options["db"] = str(db.resolve()) if db is not None else True
    import devicebench
    from devicebench.monitor import ENV_VAR

    package_parent = str(Path(devicebench.__file__).resolve().parent.parent)
    site_dir = str(Path(devicebench.__file__).resolve().parent / "monitor" / "_site")
    env = dict(os.environ)
    env[ENV_VAR] = json.dumps(options) if options else "1"
    env["DEVICEBENCH_MONITOR_PATH"] = package_parent
    env["PYTHONPATH"] = os.pathsep.join(p for p in (site_dir, env.get("PYTHONPATH")) if p)
    # SIGTERM as before the CLI's handler: the monitored training is the user's own
    # process, left to its own handling, never killed by us mid-epoch.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        code = run_forwarding_signals(command, env)
    except FileNotFoundError:
        fail(f"no such program: {command[0]} — give the command as you would run it, "
             "e.g. `devicebench monitor -- python train.py`")
    except PermissionError:
        fail(f"cannot execute {command[0]} (permission denied) — run it through its "
             "interpreter, e.g. `devicebench monitor -- python train.py`")
    line = signal_death_line(code, stored=store)
    if line:
        print(f"devicebench monitor: {line}", file=sys.stderr)
    return code if code >= 0 else 128 - code


def check_targets(*, csv: Path | None, tensorboard: Path | None, db: Path | None,
                  store: bool) -> None:
    """Exit 2 with one line unless every output of the monitor can be written."""
    from devicebench.errors import DevicebenchError, InputError
    from devicebench.store import ResultStore

    refuse_stdout(csv, "--csv", why="the script's own output (and Keras' progress bar) "
                  "goes to stdout while the monitor writes its rows",
                  fix="pass a file name, e.g. --csv steps.csv")
    refuse_stdout(tensorboard, "--tensorboard", why="TensorBoard reads event files from "
                  "a directory", fix="pass a directory, e.g. --tensorboard logs")
    if csv is not None:
        if csv.is_dir():
            raise InputError(f"--csv {csv} is a directory",
                             fix=f"pass a file name, e.g. --csv {csv / 'steps.csv'}")
        _writable_dir(csv.parent, f"--csv {csv}")
        if csv.exists() and not os.access(csv, os.W_OK):
            raise InputError(f"--csv {csv} is not writable", fix="pass another file")
    if tensorboard is not None:
        if tensorboard.exists() and not tensorboard.is_dir():
            raise InputError(f"--tensorboard {tensorboard} is a file, not a directory",
                             fix="pass a directory (created if missing), e.g. "
                                 "--tensorboard logs")
        if importlib.util.find_spec("tensorboardX") is None:
            raise InputError("--tensorboard needs tensorboardX, which is not installed",
                             why="it writes the event files without TensorFlow",
                             fix="pip install 'devicebench[tensorboard]'")
        _writable_dir(tensorboard, f"--tensorboard {tensorboard}")
    if store:
        try:
            ResultStore.open(db).close()
        except DevicebenchError as exc:
            raise InputError(f"the monitor cannot record in the store: {exc.message}",
                             fix="pass --db NEW.db, or --no-store") from None


def _writable_dir(path: Path, what: str) -> None:
    from devicebench.errors import InputError

    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{what}: cannot create {path} ({exc.strerror or exc})",
                         fix="pass a path in a writable directory") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise InputError(f"{what}: the directory {path} is not writable",
                         fix="pass a path in a writable directory")
