"""``devicebench fleet``: doctor, advise and profile record on every machine of a Ray
cluster (``pip install 'devicebench[ray]'``); ``fleet resources`` for ``ray start``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from devicebench.cli import DB_HELP, app, user_errors
from devicebench.cli.calls import calls
from devicebench.fleet.job import (
    fleet_advise,
    fleet_doctor,
    fleet_doctor_document,
    fleet_profile_record,
)
from devicebench.jobs import default_of

fleet_app = typer.Typer(
    help="The same questions on every machine of a Ray cluster: which of them should train "
         "this model, with which configuration, and how much faster is it there? "
         "Needs Ray: pip install 'devicebench[ray]'. Start each node with "
         "`ray start ... --resources \"$(devicebench fleet resources)\"`.",
    no_args_is_help=True)
app.add_typer(fleet_app, name="fleet")
profile_app = typer.Typer(help="Machine profiles of every node kind.", no_args_is_help=True)
fleet_app.add_typer(profile_app, name="profile")

ADDRESS_HELP = "Ray cluster address, e.g. 10.0.0.5:6379 (default: $RAY_ADDRESS, else the " \
               "cluster this machine is part of)."
NODES_HELP = "Only these nodes (name, IP or node-id prefix; repeat). Default: one node " \
             "per distinct machine."


@fleet_app.command("resources", help="Print the `ray start --resources` JSON for this "
                   "machine (from the doctor's probe): a marker and one resource per device, "
                   "so a trial needing a device runs only where it is. Needs no Ray.")
@user_errors
def resources() -> None:
    from devicebench.fleet.job import fleet_resources_here

    print(fleet_resources_here())


@fleet_app.command("doctor", help="The doctor on every node: one table of machines x "
                   "frameworks x devices, then each machine's findings.")
@user_errors
@calls(fleet_doctor, cli_only=("json_out",))
def doctor(
    address: str | None = typer.Option(None, "--address", help=ADDRESS_HELP),
    nodes: list[str] = typer.Option(None, "--node", help=NODES_HELP),
    frameworks: list[str] = typer.Option(None, "--framework", help="Only these frameworks."),
    json_out: bool = typer.Option(False, "--json", help="Print the nodes as JSON."),
) -> None:
    from devicebench.report.fleet import render_fleet_doctor

    reports = fleet_doctor(address=address, frameworks=frameworks or None, nodes=nodes or None)
    if json_out:
        print(json.dumps(fleet_doctor_document(reports), indent=2, default=str))
    else:
        render_fleet_doctor(reports)
    raise typer.Exit(1 if any(r.problem or any(f.severity == "error" for f in r.findings)
                              for r in reports) else 0)


@fleet_app.command("advise", help="Advise on every distinct machine of the cluster at once "
                   "(each node's own worker processes), and answer where this model should "
                   "train: per machine its fastest configuration, step and epoch time with "
                   "their CIs, its accelerator verdict and its speed against yours.")
@user_errors
@calls(fleet_advise, cli_only=("json_out",))
def advise(
    workload: str = typer.Argument(..., help="Built-in name, path/file.py:function or a "
                                   ".keras file (shipped to the nodes)."),
    budget: float = typer.Option(default_of(fleet_advise, "budget"), "--budget", min=10.0,
                                 help="Seconds per machine."),
    baseline: str | None = typer.Option(None, "--baseline", help="As advise --baseline."),
    epochs: int | None = typer.Option(None, "--epochs", min=1),
    allow_batch_change: bool = typer.Option(False, "--allow-batch-change"),
    address: str | None = typer.Option(None, "--address", help=ADDRESS_HELP),
    nodes: list[str] = typer.Option(None, "--node", help=NODES_HELP),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print the answer as JSON."),
) -> None:
    from devicebench.report.fleet import render_fleet_advice

    def event(kind, m, value) -> None:
        if json_out or kind == "event":
            return
        what = value.spec.label + f" ({value.status})" if kind == "trial" else kind
        print(f"  {m.report.name}: {what}", file=sys.stderr, flush=True)

    fleet = fleet_advise(workload, budget=budget, baseline=baseline, epochs=epochs,
                         allow_batch_change=allow_batch_change, nodes=nodes or None,
                         address=address, db=db, argv=sys.argv[1:], on_event=event)
    if json_out:
        print(json.dumps(fleet.to_dict(), indent=2, default=str))
    else:
        render_fleet_advice(fleet)
    if fleet.interrupted:
        raise typer.Exit(130)
    raise typer.Exit(1 if fleet.notes or any(m.status != "ok" for m in fleet.machines) else 0)


@fleet_app.command("report", help="A stored fleet job again: the answer in the terminal, "
                   "or --html FILE with the machines as columns.")
@user_errors
@calls("devicebench.fleet.stored:load_fleet_at", cli_only=("html",), renamed={"fleet": "fleet_id"})
def report(
    fleet: str | None = typer.Option(None, "--fleet", help="Fleet job id (default: newest)."),
    html: Path | None = typer.Option(None, "--html", metavar="FILE",
                                     help="Write an HTML page ('-': stdout)."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    from devicebench.fleet.stored import load_fleet_at

    stored = load_fleet_at(db, fleet)
    answers = stored.answer()
    if html is not None:
        from devicebench.cli import write_output
        from devicebench.report.fleet_html import render_fleet_html

        if not write_output(html, render_fleet_html(stored.fleet_id, stored.workload,
                                                    answers), "HTML"):
            print(f"wrote {html} (fleet job {stored.fleet_id}, {len(answers)} machines)")
        return
    from rich.markup import escape
    from rich.table import Table

    from devicebench.report.console import make_console
    from devicebench.report.fleet import COLUMNS, answer_rows, headline

    con = make_console()
    con.print(headline(answers, stored.workload), markup=False, highlight=False)
    table = Table()
    for col in COLUMNS:
        table.add_column(col, overflow="fold")
    for row in answer_rows(answers):
        table.add_row(*map(escape, row))
    con.print(table)
    con.print(f"  runs: {', '.join(f'#{r}' for r in stored.run_ids)}", highlight=False)


@profile_app.command("record", help="`profile record` on every distinct machine at once: "
                     "one profile per machine kind, written into DIR (replay one with "
                     "`devicebench profile replay DIR/NAME.json WORKLOAD`).")
@user_errors
@calls(fleet_profile_record, renamed={"out": "out_dir"})
def profile_record(
    workloads: list[str] = typer.Argument(None, help="Built-in workloads (default: seed-rnn "
                                          "mnist-cnn)."),
    out: Path = typer.Option(..., "-o", "--output", help="Directory for the profiles."),
    max_rounds: int = typer.Option(default_of(fleet_profile_record, "max_rounds"),
                                   "--max-rounds", min=3),
    address: str | None = typer.Option(None, "--address", help=ADDRESS_HELP),
    nodes: list[str] = typer.Option(None, "--node", help=NODES_HELP),
) -> None:
    from devicebench.cli import refuse_stdout
    from devicebench.errors import InputError

    refuse_stdout(out, "-o", why="the profiles are one file per machine kind, in a "
                  "directory", fix="pass a directory, e.g. -o profiles")
    if out.exists() and not out.is_dir():
        raise InputError(f"{out} is a file", fix="pass a directory for the profiles")
    profiles, notes = fleet_profile_record(workloads or None, out,
                                           max_rounds=max_rounds, nodes=nodes or None,
                                           address=address)
    for p in profiles:
        print(f"{p.report.label}: " + (f"wrote {p.path}: {p.note}" if p.path else p.problem))
    for line in notes:
        print(f"  left out: {line}")
    raise typer.Exit(1 if notes or any(p.problem for p in profiles) else 0)
