"""``devicebench advise train.py [-- ARGS]`` and the main job on a script: capture the
script's first fit(), advise, print the patch. Registers no command of its own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from devicebench.cli import DB_HELP, app, fail, user_errors


def _run(script: str, args: list[str], progress: bool, **kwargs: Any):
    from devicebench.jobs.advise_script import advise_script
    from devicebench.report.advise import with_spinner

    return with_spinner(script, progress,
                        lambda on_event: advise_script(script, args, on_event=on_event, **kwargs))


def advise_script_command(script: str, args: list[str], *, baseline: str | None,
                          budget: float, allow_batch_change: bool, db: Path | None,
                          epochs: int | None, json_out: bool) -> None:
    """What ``devicebench advise SCRIPT`` prints (the advice, then the patch)."""
    from devicebench.workloads.script import is_script_ref

    if not is_script_ref(script):
        fail(f"arguments after -- ({' '.join(args)}) go with a training script, not "
             f"{script!r} — fix: devicebench advise train.py -- ARGS")
    result = _run(script, args, not json_out, baseline=baseline, budget=budget,
                  allow_batch_change=allow_batch_change, db=db, epochs=epochs)
    if json_out:
        print(json.dumps(result.to_dict(), indent=2, default=str))
        return
    from devicebench.report.script import render_script_advice

    render_script_advice(result)


MAIN_SCRIPT_COMMAND = "main-script"
MAIN_SCRIPT_BUDGET_S = 60.0


def main_script_argv(argv: list[str]) -> list[str]:
    """``devicebench train.py [-- ARGS]`` -> the hidden main-script command."""
    if argv and argv[0].endswith(".py") and not argv[0].startswith("-") \
            and Path(argv[0]).is_file():
        return [MAIN_SCRIPT_COMMAND, *argv]
    return argv


def main_script(script: str, args: list[str], db: Path | None = None,
                budget: float = MAIN_SCRIPT_BUDGET_S) -> int:
    """The main job on a script: doctor on the machine and the script (its findings
    first), then advise on that script."""
    from devicebench.api import doctor
    from devicebench.report.console import make_console
    from devicebench.report.script import render_script_advice

    con = make_console()
    con.print(f"[bold]devicebench {script}[/bold]: doctor on this machine and your script, "
              "then advise on the model it trains", highlight=False)
    found = doctor(script)
    mine = [f for f in found.findings if f.location]
    rest = [f for f in found.findings if not f.location and f.severity != "info"]
    for f in mine + rest:
        where = f" ({f.location})" if f.location else ""
        con.print(f"  {f.severity}: [{f.id}] {f.title}{where} — fix: {f.fix}", markup=False,
                  highlight=False)
    con.print(f"  ({len(found.findings)} findings; `devicebench doctor {script}` for details)",
              markup=False, highlight=False)
    result = _run(script, args, True, baseline=None, budget=budget,
                  allow_batch_change=False, db=db, epochs=None, snapshot=None)
    render_script_advice(result, console=con, brief=True)
    return 1 if found.errors else 0


@app.command(MAIN_SCRIPT_COMMAND, hidden=True, context_settings={"allow_extra_args": True})
@user_errors
def main_script_command(
    ctx: typer.Context,
    script: str = typer.Argument(...),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
    budget: float = typer.Option(MAIN_SCRIPT_BUDGET_S, "--budget", min=10.0),
) -> None:
    raise typer.Exit(main_script(script, ctx.args, db=db, budget=budget))
