"""``devicebench monitor -- python train.py``: attach the training monitor to an
unmodified script. The parent only starts the child (no framework is imported here)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import typer

from devicebench.cli import DB_HELP, app, fail, user_errors

MONITOR_HELP = "\n\n".join([
    "Run a training script unchanged with devicebench's TrainingMonitor attached to every "
    "Keras fit() call: step time and samples/s over blocks of steps (each ended by a device "
    "sync), compilation apart, memory, GPU utilisation (NVML), NaN and stall alerts, and one "
    "line at the end.",
    "Example: devicebench monitor --csv steps.csv -- python train.py --epochs 3",
    "The script runs with DEVICEBENCH_MONITOR set (its value: the monitor's options as "
    "JSON) and a sitecustomize on PYTHONPATH; a script can also call "
    "devicebench.keras.install_from_env() itself. Results go to the SQLite store as a "
    "run tagged 'monitor' unless --no-store.",
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
    """Run ``command`` with the monitor armed; returns its exit code."""
    if not command or not command[0].strip():
        fail("no command to monitor — pass it after --, e.g. "
             "`devicebench monitor -- python train.py`")
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
    from devicebench.keras import ENV_VAR

    package_parent = str(Path(devicebench.__file__).resolve().parent.parent)
    site_dir = str(Path(devicebench.__file__).resolve().parent / "keras" / "_site")
    env = dict(os.environ)
    env[ENV_VAR] = json.dumps(options) if options else "1"
    env["DEVICEBENCH_MONITOR_PATH"] = package_parent
    env["PYTHONPATH"] = os.pathsep.join(p for p in (site_dir, env.get("PYTHONPATH")) if p)
    # SIGTERM as before the CLI's handler: the monitored training is the user's own
    # process, left to its own handling, never killed by us mid-epoch.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        return subprocess.call(command, env=env)
    except FileNotFoundError:
        fail(f"no such program: {command[0]} — give the command as you would run it, "
             "e.g. `devicebench monitor -- python train.py`")
    except PermissionError:
        fail(f"cannot execute {command[0]} (permission denied) — run it through its "
             "interpreter, e.g. `devicebench monitor -- python train.py`")
    return 2
