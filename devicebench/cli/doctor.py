"""``devicebench doctor``: which devices does my framework see, and is my setup sane?"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from devicebench.cli import app, fail, is_stdout, user_errors, write_output
from devicebench.validate import LIMITS

DOCTOR_HELP = """Diagnose this machine's deep-learning setup and say what to fix.

Probes the OS, CPU, Python and installed frameworks (each framework is imported in its
own subprocess with a timeout), checks the result against a knowledge base of known
problems, and, given SCRIPT, reads your training script (never runs it) for pitfalls.

Exit code: 0 no errors found, 1 errors found, 2 bad input.
"""


@app.command(help=DOCTOR_HELP)
@user_errors
def doctor(
    script: Path | None = typer.Argument(
        None, help="A training script to check for pitfalls (read with ast, never executed)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print findings and snapshot as JSON."),
    save: Path | None = typer.Option(
        None, "--save", metavar="FILE",
        help="Write the environment snapshot to FILE (JSON; '-': stdout, the report then "
             "goes to stderr)."
    ),
    snapshot: Path | None = typer.Option(
        None,
        "--snapshot",
        metavar="FILE",
        help="Diagnose a saved snapshot (another machine) instead of probing this one.",
    ),
    frameworks: str | None = typer.Option(
        None,
        "--frameworks",
        metavar="LIST",
        help="Comma-separated frameworks to import (default: all installed; 'none' to skip).",
    ),
    timeout: float = typer.Option(
        60.0, "--timeout", min=LIMITS["doctor_timeout"].lo,
        help="Seconds allowed for each framework's import."
    ),
    sequential: bool = typer.Option(
        False, "--sequential",
        help="Import frameworks one after another: exact import times, slower doctor.",
    ),
) -> None:
    from devicebench.api import doctor as run_doctor
    from devicebench.report.doctor import doctor_json, render_doctor

    if is_stdout(save) and json_out:
        fail("--save - and --json would both write to stdout — fix: save the snapshot to "
             "a file (--save env.json); --json's output holds the snapshot too")
    if save is not None and not is_stdout(save) and save.is_dir():
        fail(f"--save path is a directory: {save} — fix: pass a file name, e.g. {save}/env.json")
    selected = _parse_frameworks(frameworks)  # with --snapshot: refused by the API
    result = run_doctor(script, frameworks=selected, timeout=timeout, snapshot=snapshot,
                        concurrent=not sequential,
                        on_framework=None if json_out or snapshot is not None
                        else _progress_printer())
    snap, findings, read = result.snapshot, result.findings, result.script

    if is_stdout(save):
        write_output(save, snap.to_json(), "snapshot")
    elif save is not None:
        try:
            save.write_text(snap.to_json() + "\n", encoding="utf-8")
        except OSError as exc:
            fail(f"cannot write snapshot to {save}: {exc.strerror} — fix: choose a writable path")

    if json_out:
        print(json.dumps(doctor_json(snap, findings, script=read), indent=2))
    elif is_stdout(save):  # stdout carries the snapshot: the report goes to stderr
        from devicebench.report.console import make_console

        render_doctor(snap, findings, console=make_console(stderr=True), from_file=snapshot,
                      script=read)
    else:
        render_doctor(snap, findings, saved_to=save, from_file=snapshot, script=read)
    raise typer.Exit(1 if any(f.severity == "error" for f in findings) else 0)


def _parse_frameworks(value: str | None) -> list[str] | None:
    from devicebench.backends import FRAMEWORKS

    if value is None:
        return None
    names = [v.strip().lower() for v in value.split(",") if v.strip()]
    if names == ["none"]:
        return []
    unknown = [n for n in names if n not in FRAMEWORKS]
    if unknown:
        fail(
            f"unknown framework {unknown[0]!r} in --frameworks — "
            f"fix: use a comma-separated list of {', '.join(FRAMEWORKS)} (or 'none')"
        )
    return names


def _progress_printer():
    def show(name: str) -> None:
        print(f"probing {name} (imported in a subprocess)...", file=sys.stderr, flush=True)

    return show
