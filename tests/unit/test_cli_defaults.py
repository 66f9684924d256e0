"""Every command's defaults are its job's, written once in the job's signature: this
walks every command of the CLI (click's view of devicebench.cli.app), the job it calls
(devicebench.cli.calls) and, option by option, the job parameter it maps to, and fails
on a default that differs, an option that maps to nothing, or a command with no job."""

from __future__ import annotations

import inspect
from typing import Any

from devicebench.cli import command
from devicebench.cli.calls import job_of

# Commands that run no job: they print a constant or list what is built in.
NO_JOB = {"workloads", "fleet resources"}


def _commands(cmd: Any, path: str = "") -> list[tuple[str, Any]]:
    subs = getattr(cmd, "commands", None)
    if subs is None:
        return [(path, cmd)]
    # A group runs a job of its own only when invoked alone: devicebench's main job.
    out = [("(main job)", cmd)] if path == "" else []
    for name, sub in sorted(subs.items()):
        out += _commands(sub, f"{path} {name}".strip())
    return out


def _mismatches(path: str, cmd: Any) -> list[str]:
    marked = getattr(cmd.callback, "devicebench_job", None)
    if marked is None:
        return [f"{path}: no job (mark the command with devicebench.cli.calls.calls)"]
    job = job_of(marked)
    params = inspect.signature(job).parameters
    out = []
    for p in cmd.params:
        if p.name in marked["cli_only"]:
            continue
        convert = marked["convert"].get(p.name)
        name, as_job = convert if convert else (marked["renamed"].get(p.name, p.name),
                                                lambda v: v)
        if name not in params:
            out.append(f"{path} --{p.name}: no parameter {name!r} in "
                       f"{job.__module__}.{job.__name__}")
            continue
        job_default = params[name].default
        if job_default is inspect.Parameter.empty:  # required by the job: no default
            continue
        cli_default = None if p.default is None else as_job(p.default)
        if isinstance(cli_default, list | tuple) and not cli_default:
            cli_default = None  # typer's empty multiple option: "not given"
        if cli_default != job_default:
            out.append(f"{path} --{p.name}: {cli_default!r} here, {job_default!r} in "
                       f"{job.__module__}.{job.__name__}({name}=)")
    return out


def test_every_command_default_is_its_jobs() -> None:
    problems = []
    for path, cmd in _commands(command()):
        if path in NO_JOB:
            continue
        found = _mismatches(path, cmd)
        problems += found
    assert not problems, "defaults written twice or options unmapped:\n" + "\n".join(problems)


def test_the_walk_finds_a_default_that_differs() -> None:
    """A command whose --timeout default is not the job's is caught."""
    import typer

    from devicebench.cli.calls import calls

    def job(*, timeout: float = 300.0, budget: float = 120.0) -> None: ...

    app = typer.Typer()

    @app.command()
    @calls(job, cli_only=("json_out",))
    def cmd(timeout: float = typer.Option(600.0), budget: float = typer.Option(120.0),
            json_out: bool = typer.Option(False), extra: int = typer.Option(1)) -> None: ...

    @app.command()
    def other() -> None: ...

    click_cmd = typer.main.get_command(app)
    assert _mismatches("cmd", click_cmd.commands["cmd"]) == [
        "cmd --timeout: 600.0 here, 300.0 in "
        f"{__name__}.job(timeout=)",
        f"cmd --extra: no parameter 'extra' in {__name__}.job"]
    assert _mismatches("other", click_cmd.commands["other"]) == [
        "other: no job (mark the command with devicebench.cli.calls.calls)"]
