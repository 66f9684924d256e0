"""The monitor job: run a training script unchanged with devicebench's TrainingMonitor
attached to every Keras fit() (``devicebench monitor -- python train.py``). The parent
only starts the child; no framework is imported here."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devicebench.errors import InputError


@dataclass(frozen=True)
class MonitorOutcome:
    """How the monitored command ended.

    Attributes:
        exit_code: its exit code (128+N when a signal N killed it, as a shell reports it).
        death_line: what the signal means for what was stored, or "" when it exited.
    """

    exit_code: int
    death_line: str = ""
    fits: int | None = None  # Keras fit() calls the monitor attached to (None: not counted)
    script: str = "SCRIPT"  # the .py file the command runs, for the lines it is told

    @property
    def nothing_monitored(self) -> str:
        """One line when the script ran no Keras fit() (the monitor timed nothing), else ""."""
        if self.fits != 0:
            return ""
        return ("no Keras fit() ran, so nothing was timed: the monitor attaches to keras "
                "Model.fit in this Python and the Python processes it starts; for a custom "
                f"training loop (PyTorch, JAX, tf.GradientTape) `devicebench doctor {self.script}` "
                "reads the loop for pitfalls")

    def to_dict(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code, "death_line": self.death_line,
                "fits": self.fits}


def run_monitored(command: list[str], *, csv: Path | None = None,
                  tensorboard: Path | None = None, stop_on_nan: bool = False,
                  block_steps: int | None = None, db: Path | None = None,
                  store: bool = True) -> MonitorOutcome:
    """Run ``command`` with the monitor armed (the parent imports no framework: it only
    starts the child) and wait for it.

    The store, CSV and TensorBoard targets are checked first: a bad one raises an
    :class:`~devicebench.errors.InputError` (one line, exit 2 in the CLI) and the
    script is not started.

    Raises:
        devicebench.errors.InputError: no command, a program that is not there or not
            executable, an output that cannot be written.
    """
    from devicebench.launch.forward import run_forwarding_signals, signal_death_line

    if not command or not command[0].strip():
        raise InputError("no command to monitor",
                         fix="pass it after --, e.g. `devicebench monitor -- python train.py`")
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
    from devicebench.monitor import ENV_VAR, FITS_ENV_VAR

    package_parent = str(Path(devicebench.__file__).resolve().parent.parent)
    site_dir = str(Path(devicebench.__file__).resolve().parent / "monitor" / "_site")
    env = dict(os.environ)
    env[ENV_VAR] = json.dumps(options) if options else "1"
    env["DEVICEBENCH_MONITOR_PATH"] = package_parent
    env["PYTHONPATH"] = os.pathsep.join(p for p in (site_dir, env.get("PYTHONPATH")) if p)
    # SIGTERM as before the CLI's handler: the monitored training is the user's own
    # process, left to its own handling, never killed by us mid-epoch.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    fd, count_file = tempfile.mkstemp(prefix="devicebench-fits-")
    os.close(fd)
    env[FITS_ENV_VAR] = count_file
    try:
        code = run_forwarding_signals(command, env)
    except FileNotFoundError:
        raise InputError(f"no such program: {command[0]}",
                         fix="give the command as you would run it, e.g. "
                             "`devicebench monitor -- python train.py`") from None
    except PermissionError:
        raise InputError(f"cannot execute {command[0]} (permission denied)",
                         fix="run it through its interpreter, e.g. "
                             "`devicebench monitor -- python train.py`") from None
    finally:
        fits = _fits_counted(count_file)
    return MonitorOutcome(code if code >= 0 else 128 - code,
                          signal_death_line(code, stored=store) or "", fits,
                          next((a for a in command[1:] if a.endswith(".py")), "SCRIPT"))


def _fits_counted(path: str) -> int | None:
    """The fits the script's processes counted into ``path`` (then removed)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return sum(1 for line in fh if line.strip())
    except OSError:
        return None
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


def check_targets(*, csv: Path | None, tensorboard: Path | None, db: Path | None,
                  store: bool) -> None:
    """Raise an InputError (one line) unless every output of the monitor can be
    written."""
    from devicebench.errors import DevicebenchError
    from devicebench.store import ResultStore
    from devicebench.validate import refuse_stdout

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
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{what}: cannot create {path} ({exc.strerror or exc})",
                         fix="pass a path in a writable directory") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise InputError(f"{what}: the directory {path} is not writable",
                         fix="pass a path in a writable directory")
