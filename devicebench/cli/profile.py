"""``devicebench profile record|replay``: machine profiles for judging advice on machines
you do not have."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from devicebench.cli import app, user_errors
from devicebench.schema import envelope

profile_app = typer.Typer(
    help="Record this machine's profile (every candidate configuration measured), or "
         "replay advise on a recorded one (shipped: h200, m1-published).",
    no_args_is_help=True)
app.add_typer(profile_app, name="profile")


@profile_app.command("record", help="An exhaustive interleaved sweep of advise's candidate "
                     "space for each WORKLOAD on this machine, written as a profile FILE.")
@user_errors
def record(
    workloads: list[str] = typer.Argument(None, help="Built-in workloads (default: seed-rnn "
                                          "mnist-cnn)."),
    out: Path = typer.Option(..., "-o", "--output", metavar="FILE",
                             help="Profile file to write (JSON; '-': stdout)."),
    name: str = typer.Option("this-machine", "--name", help="Short id of the profile."),
    label: str = typer.Option("", "--label", help="What the machine is, in words."),
    max_rounds: int = typer.Option(12, "--max-rounds", min=3,
                                   help="Interleaved rounds at most per workload."),
) -> None:
    import sys

    from devicebench.advisor.advice import default_baseline
    from devicebench.cli import is_stdout, say, write_output
    from devicebench.env.probe import probe_host_layer
    from devicebench.profiles.record import record_profile
    from devicebench.workloads import get_workload

    names = workloads or ["seed-rnn", "mnist-cnn"]
    for w in names:
        get_workload(w)  # unknown names: one line, exit 2
    if not is_stdout(out) and out.is_dir():
        from devicebench.errors import InputError

        raise InputError(f"-o {out} is a directory",
                         fix=f"pass a file name, e.g. -o {out / 'profile.json'}, or - for stdout")
    snapshot = probe_host_layer()
    host = snapshot.host
    profile = record_profile(
        name, label or f"{host.cpu_model} ({host.cpu_cores_logical} logical cores), "
        f"{host.os} {host.os_version}", snapshot, names,
        baseline_for=lambda w: default_baseline(snapshot, w)[0], max_rounds=max_rounds,
        on_progress=lambda s: print(s, file=sys.stderr, flush=True))
    write_output(out, profile.to_json(), "profile")
    say(f"wrote {'the profile to stdout' if is_stdout(out) else out}: "
        + "; ".join(profile.notes), to_stderr=is_stdout(out))


@profile_app.command("replay", help="Run advise on a recorded machine profile (a file, or a "
                     "shipped one: h200, m1-published) and show what it would answer there.")
@user_errors
def replay(
    profile: str = typer.Argument(..., help="Profile file or shipped name."),
    workload: str = typer.Argument(..., help="A workload the profile recorded."),
    budget: float = typer.Option(40.0, "--budget", min=1.0,
                                 help="Seconds of the profiled machine's time."),
    baseline: str | None = typer.Option(None, "--baseline", help="e.g. backend=torch,"
                                        "device=gpu:0 (default: what the main job picks)."),
    epochs: int | None = typer.Option(None, "--epochs", min=1),
    json_out: bool = typer.Option(False, "--json"),
) -> None:
    from devicebench.advisor.advice import parse_baseline
    from devicebench.errors import InputError
    from devicebench.profiles import load_profile
    from devicebench.profiles.replay import replay_advise
    from devicebench.report.advise import render_advice

    prof = load_profile(profile)
    if workload not in prof.workloads:
        raise InputError(f"profile {prof.name} has no workload {workload!r}",
                         fix=f"use one of: {', '.join(prof.workloads)}")
    spec = parse_baseline(baseline, workload, "tensorflow") if baseline else None
    advice, spent = replay_advise(prof, workload, budget_s=budget, baseline=spec,
                                  epochs=epochs)
    if json_out:
        print(json.dumps(envelope("profile-replay", {
            "profile": prof.name, "derived": prof.derived, "spent_s": spent,
            "advice": advice.to_dict()}), indent=2, default=str))
        return
    print(f"replayed on profile {prof.name}: {prof.label}"
          + (" (DERIVED from published figures)" if prof.derived else ""))
    render_advice(advice)
