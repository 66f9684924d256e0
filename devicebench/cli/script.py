"""The main job on a script (``devicebench train.py [-- ARGS]``): its hidden command
and its rendering; ``devicebench advise train.py`` is the advise command's."""

from __future__ import annotations

from pathlib import Path

import typer

from devicebench.cli import DB_HELP, app, user_errors
from devicebench.cli.calls import calls
from devicebench.jobs import default_of
from devicebench.jobs.main import main_script as main_script_job

MAIN_SCRIPT_COMMAND = "main-script"


def main_script_argv(argv: list[str]) -> list[str]:
    """``devicebench [--db DB] train.py [-- ARGS]`` -> the hidden main-script command
    (after the group's own ``--db``, which the README shows before any command).

    Example:
        >>> main_script_argv(["--db", "r.db", "devicebench/__init__.py"])[:3]
        ['--db', 'r.db', 'main-script']
        >>> main_script_argv(["--db", "r.db", "run", "seed-rnn"])
        ['--db', 'r.db', 'run', 'seed-rnn']
    """
    i = 0
    while i < len(argv) and argv[i].startswith("--db"):
        i += 1 if "=" in argv[i] else 2
    first = argv[i] if i < len(argv) else ""
    if first.endswith(".py") and not first.startswith("-") and Path(first).is_file():
        return [*argv[:i], MAIN_SCRIPT_COMMAND, *argv[i:]]
    return argv


def main_script(script: str, args: list[str], db: Path | None = None,
                budget: float = default_of(main_script_job, "budget")) -> int:
    """The main job on a script (:func:`devicebench.jobs.main.main_script`): the doctor's
    findings on the script first, then the advice on it; returns the exit code."""
    from devicebench.cli.progress import progress
    from devicebench.report.console import make_console
    from devicebench.report.script import render_script_advice

    con = make_console()
    con.print(f"[bold]devicebench {script}[/bold]: doctor on this machine and your script, "
              "then advise on the model it trains", highlight=False)

    def show(step) -> None:
        if step.kind == "doctor":
            found = step.value
            mine = [f for f in found.findings if f.location]
            rest = [f for f in found.findings if not f.location and f.severity != "info"]
            for f in mine + rest:
                where = f" ({f.location})" if f.location else ""
                con.print(f"  {f.severity}: [{f.id}] {f.title}{where} — fix: {f.fix}",
                          markup=False, highlight=False)
            con.print(f"  ({len(found.findings)} findings; `devicebench doctor {script}` for "
                      "details)", markup=False, highlight=False)
        elif step.kind == "advice":
            render_script_advice(step.value, console=con, brief=True)

    with progress() as on_progress:
        outcome = main_script_job(script, args, budget=budget, db=db, on_step=show,
                                  on_progress=on_progress)
    return outcome.exit_code


@app.command(MAIN_SCRIPT_COMMAND, hidden=True, context_settings={"allow_extra_args": True})
@user_errors
@calls(main_script_job)
def main_script_command(
    ctx: typer.Context,
    script: str = typer.Argument(...),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
    budget: float = typer.Option(default_of(main_script_job, "budget"), "--budget", min=10.0),
) -> None:
    raise typer.Exit(main_script(script, ctx.args, db=db, budget=budget))
