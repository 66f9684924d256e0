"""``devicebench doctor``: which devices does my framework see, and is my setup sane?"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from devicebench.cli import app, fail, is_stdout, user_errors, write_output
from devicebench.cli.calls import calls
from devicebench.jobs import default_of
from devicebench.jobs.doctor import doctor as doctor_job
from devicebench.validate import LIMITS

DOCTOR_HELP = """Diagnose this machine's deep-learning setup and say what to fix.

Probes the OS, CPU, Python and installed frameworks (each framework is imported in its
own subprocess with a timeout), checks the result against a knowledge base of known
problems, and, given SCRIPT, reads your training script (never runs it) for pitfalls.

Exit code: 0 no errors found, 1 errors found, 2 bad input.
"""


@app.command(help=DOCTOR_HELP)
@user_errors
@calls(doctor_job, cli_only=("json_out",),
       convert={"sequential": ("concurrent", lambda v: not v)})
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
        default_of(doctor_job, "timeout"), "--timeout", min=LIMITS["doctor_timeout"].lo,
        help="Seconds allowed for each framework's import."
    ),
    sequential: bool = typer.Option(
        False, "--sequential",
        help="Import frameworks one after another: exact import times, slower doctor.",
    ),
) -> None:
    from devicebench.cli.progress import progress
    from devicebench.report.doctor import render_doctor

    to_stdout = is_stdout(save)  # `--save -`: the snapshot on stdout, the report on stderr
    if to_stdout and json_out:
        fail("--save - and --json would both write to stdout — fix: save the snapshot to "
             "a file (--save env.json); --json's output holds the snapshot too")
    selected = _parse_frameworks(frameworks)  # with --snapshot: refused by the job
    with progress(not json_out and snapshot is None, lines_off_terminal=True) as on_progress:
        result = doctor_job(script, frameworks=selected, timeout=timeout, snapshot=snapshot,
                            concurrent=not sequential, save=None if to_stdout else save,
                            on_progress=on_progress)
    if to_stdout:
        from devicebench.report.console import make_console

        write_output(save, result.snapshot.to_json(), "snapshot")
        render_doctor(result.snapshot, result.findings, console=make_console(stderr=True),
                      from_file=snapshot, script=result.script)
    elif json_out:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        render_doctor(result.snapshot, result.findings, saved_to=save, from_file=snapshot,
                      script=result.script)
    raise typer.Exit(1 if result.errors else 0)


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

