"""``devicebench history``, ``compare``, ``export`` and ``import``: the runs in the store,
and moving them between machines."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from devicebench.cli import DB_HELP, app, user_errors
from devicebench.cli.calls import calls
from devicebench.jobs import default_of
from devicebench.jobs import history as store_jobs
from devicebench.validate import LIMITS


@app.command("history", help="List the runs in the results store, newest first.")
@user_errors
@calls(store_jobs.history, cli_only=("json_out",))
def history(
    limit: int = typer.Option(default_of(store_jobs.history, "limit"), "--limit",
                              min=LIMITS["history_limit"].lo, max=LIMITS["history_limit"].hi,
                              help="Show at most N runs."),
    json_out: bool = typer.Option(False, "--json", help="Print the runs as JSON."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    outcome = store_jobs.history(limit=limit, db=db)
    if not outcome.exists:  # a first look, before any run
        print(f"no runs in {outcome.where} yet: devicebench run seed-rnn, devicebench "
              "ops, or devicebench import bundle.json")
        return
    rows, where = outcome.rows, outcome.where
    if json_out:
        print(json.dumps(outcome.to_dict(), indent=2))
        return
    from rich.table import Table

    from devicebench.report.console import make_console

    con = make_console()
    if not rows:
        con.print(f"no runs in {where} yet: devicebench run seed-rnn, devicebench ops, or "
                  "devicebench import bundle.json", markup=False, highlight=False)
        return
    table = Table(title=f"Runs in {where}", title_justify="left")
    for col in ("run", "started (UTC)", "command", "machine", "results", "workloads", "from"):
        table.add_column(col, overflow="fold")
    for r in rows:
        results = f"{r.ok}/{r.trials} trials ok" if r.trials else ""
        if r.ops_workers:
            results += (", " if results else "") + f"{r.ops_workers} op workers"
        state = "" if r.finished_at else " (interrupted)"
        workloads = ", ".join(r.workload_labels())
        if r.monitor is not None:
            results, workloads = _monitor_cells(r.monitor)
            if r.finished_at and r.monitor["ended"] not in ("completed", "unknown"):
                state = f" ({r.monitor['ended']})"
        machine = r.cpu + (f", {r.gpu}" if r.gpu else "")
        table.add_row(str(r.id), r.started_at[:19].replace("T", " "), r.command + state,
                      machine, results or "-", workloads or "-",
                      r.imported_from or "here")
    con.print(table)


def _monitor_cells(m: dict) -> tuple[str, str]:
    """(results, workloads) cells of a monitored fit: fit, steps, steady step time; the
    script."""
    from devicebench.fmt import fmt_duration

    steady = m.get("steady_step_seconds")
    fit = f"fit {m['fit']}: " if m.get("fit") else ""
    figure = f"steady {fmt_duration(steady)}/step" if steady else "no steady figure"
    return f"{fit}{m['steps']} steps, {figure}", str(m.get("script") or "-")


COMPARE_HELP = """Compare the same workload and configuration in two stored runs (A and B:
run ids from devicebench history), on one machine or two (import the other machine's
bundle first).

Trials are matched by identical configuration; --config-a/--config-b pick two by label
(e.g. jax/gpu:0 and jax/cpu) and flag every setting that differs. Machines that differ are
listed. The speed-up of B over A is a ratio of medians; its 95% CI resamples each run's
blocks separately: two runs are never interleaved, so nothing is paired round by round.
"""


@app.command("compare", help=COMPARE_HELP)
@user_errors
@calls(store_jobs.compare, cli_only=("json_out",))
def compare_cmd(
    run_a: int = typer.Argument(..., help="Run id A."),
    run_b: int = typer.Argument(..., help="Run id B."),
    workload: str | None = typer.Option(None, "--workload", help="Only this workload."),
    config_a: str | None = typer.Option(None, "--config-a", help="A's configuration label."),
    config_b: str | None = typer.Option(None, "--config-b", help="B's configuration label."),
    json_out: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    result = store_jobs.compare(run_a, run_b, workload=workload, config_a=config_a,
                          config_b=config_b, db=db)
    if json_out:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        from devicebench.report.markdown import render_comparison_markdown

        print(render_comparison_markdown(result))


@app.command("export", help="Write runs (raw results, machine snapshot) to a bundle file "
             "that devicebench import reads on another machine.")
@user_errors
@calls(store_jobs.export)
def export(
    runs: list[int] = typer.Argument(..., help="Run ids (devicebench history)."),
    out: Path = typer.Option(..., "-o", "--output", metavar="FILE",
                             help="Bundle file to write (JSON; '-': stdout)."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    from devicebench.cli import is_stdout, say, write_output

    to_stdout = is_stdout(out)
    done = store_jobs.export(list(runs), out=None if to_stdout else out, db=db)
    if to_stdout:
        write_output(out, done.text or "", "bundle")
    say(f"wrote {'the bundle to stdout' if to_stdout else out}: {len(done.run_ids)} run(s); "
        f"on the other machine: devicebench import {'FILE' if to_stdout else out.name}",
        to_stderr=to_stdout)


@app.command("import", help="Add the runs of a bundle (devicebench export) to the store; "
             "runs already there are skipped, so importing twice adds nothing.")
@user_errors
@calls(store_jobs.import_runs)
def import_cmd(
    bundle: Path = typer.Argument(..., metavar="BUNDLE", help="Bundle file ('-': stdin)."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    from devicebench.cli import is_stdout

    if is_stdout(bundle):  # `-`: the bundle comes on stdin (`export 9 -o - | ... import -`)
        bundle = Path("stdin")
        result = store_jobs.import_runs(bundle, db=db, text=sys.stdin.read())
    else:
        result = store_jobs.import_runs(bundle, db=db)
    added = ", ".join(map(str, result.added)) or "none"
    skipped = ", ".join(map(str, result.skipped))
    print(f"imported {len(result.added)} run(s) from {bundle} (run ids: {added})"
          + (f"; {len(result.skipped)} already here (run ids: {skipped})" if skipped else "")
          + "; see devicebench history, devicebench compare A B")
