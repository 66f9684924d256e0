"""``devicebench profile record|replay``: machine profiles for judging advice on machines
you do not have."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from devicebench.cli import app, user_errors
from devicebench.cli.calls import calls
from devicebench.jobs import default_of
from devicebench.jobs.profile import record as record_job
from devicebench.jobs.profile import replay as replay_job

profile_app = typer.Typer(
    help="Record this machine's profile (every candidate configuration measured), or "
         "replay advise on a recorded one (shipped: h200, m1-published).",
    no_args_is_help=True)
app.add_typer(profile_app, name="profile")


@profile_app.command("record", help="An exhaustive interleaved sweep of advise's candidate "
                     "space for each WORKLOAD on this machine, written as a profile FILE.")
@user_errors
@calls(record_job)
def record(
    workloads: list[str] = typer.Argument(None, help="Built-in workloads (default: seed-rnn "
                                          "mnist-cnn)."),
    out: Path = typer.Option(..., "-o", "--output", metavar="FILE",
                             help="Profile file to write (JSON; '-': stdout)."),
    name: str = typer.Option(default_of(record_job, "name"), "--name",
                             help="Short id of the profile."),
    label: str = typer.Option(default_of(record_job, "label"), "--label",
                              help="What the machine is, in words."),
    max_rounds: int = typer.Option(default_of(record_job, "max_rounds"), "--max-rounds",
                                   min=3, help="Interleaved rounds at most per workload."),
) -> None:
    from devicebench.cli import is_stdout, say, write_output
    from devicebench.cli.progress import progress

    to_stdout = is_stdout(out)
    with progress(lines_off_terminal=True) as on_progress:
        outcome = record_job(workloads or None, out=None if to_stdout else out, name=name,
                             label=label, max_rounds=max_rounds, on_progress=on_progress)
    if to_stdout:
        write_output(out, outcome.profile.to_json(), "profile")
    say(f"wrote {'the profile to stdout' if to_stdout else out}: " + "; ".join(outcome.notes),
        to_stderr=to_stdout)


@profile_app.command("replay", help="Run advise on a recorded machine profile (a file, or a "
                     "shipped one: h200, m1-published) and show what it would answer there.")
@user_errors
@calls(replay_job, cli_only=("json_out",))
def replay(
    profile: str = typer.Argument(..., help="Profile file or shipped name."),
    workload: str = typer.Argument(..., help="A workload the profile recorded."),
    budget: float = typer.Option(default_of(replay_job, "budget"), "--budget", min=1.0,
                                 help="Seconds of the profiled machine's time."),
    baseline: str | None = typer.Option(None, "--baseline", help="e.g. backend=torch,"
                                        "device=gpu:0 (default: what the main job picks)."),
    epochs: int | None = typer.Option(None, "--epochs", min=1),
    json_out: bool = typer.Option(False, "--json"),
) -> None:
    from devicebench.report.advise import render_advice

    outcome = replay_job(profile, workload, budget=budget, baseline=baseline, epochs=epochs)
    if json_out:
        print(json.dumps(outcome.to_dict(), indent=2, default=str))
        return
    prof = outcome.profile
    print(f"replayed on profile {prof.name}: {prof.label}"
          + (" (DERIVED from published figures)" if prof.derived else ""))
    render_advice(outcome.advice)
