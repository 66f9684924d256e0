"""``devicebench report``: one run's results as an offline HTML page, Markdown or JSON."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from devicebench.cli import DB_HELP, app, is_stdout, say, user_errors, write_output
from devicebench.cli.calls import calls
from devicebench.jobs.report import report as report_job

REPORT_HELP = """Report a stored run: the answer first (does this machine's accelerator speed
training up, per workload, with the ratio), the environment and doctor's findings, step time
per configuration with its CI, the recommendation and its reasons, loss curves, memory, and
the op sweep's speed-up-vs-size curves with the crossover.

The report of a training run (run, advise) also shows the fullest of the same machine's
recent op sweeps (or --ops-run ID), and an op sweep's report the newest training run.
--html writes one self-contained file (inline SVG charts drawn by matplotlib, no script, no
network: pip install 'devicebench[report]'); --md writes Markdown to paste into an issue
(stdout by default); --json prints the figures. '-' as FILE is stdout.
"""


@app.command("report", help=REPORT_HELP)
@user_errors
@calls(report_job, cli_only=("run_arg", "last", "html", "md", "json_out"))
def report(
    run_arg: int | None = typer.Argument(None, min=1, metavar="RUN",
                                         help="Run id (devicebench history), as --run."),
    run: int | None = typer.Option(None, "--run", min=1, metavar="ID",
                                   help="Run id (devicebench history)."),
    last: bool = typer.Option(False, "--last", help="The newest run with results (default)."),
    html: Path | None = typer.Option(None, "--html", metavar="FILE",
                                     help="Write a self-contained HTML report ('-': stdout)."),
    md: Path | None = typer.Option(None, "--md", metavar="FILE",
                                   help="Write Markdown ('-': stdout)."),
    ops_run: int | None = typer.Option(
        None, "--ops-run", min=1, metavar="ID",
        help="The op sweep to show beside training (default: the fullest of this "
             "machine's recent sweeps)."),
    json_out: bool = typer.Option(False, "--json", help="Print the report's figures as JSON."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    from devicebench.errors import InputError

    if run_arg is not None and run is not None and run_arg != run:
        raise InputError(f"two run ids given: {run_arg} and --run {run}",
                         fix=f"pass one of them, e.g. devicebench report {run_arg}")
    run = run if run is not None else run_arg
    if run is not None and last:
        raise InputError("a run id (RUN or --run) and --last both given", fix="pass one of them")
    on_stdout = [name for name, on in (("--json", json_out), ("--html -", is_stdout(html)),
                                       ("--md -", is_stdout(md))) if on]
    if len(on_stdout) > 1:
        raise InputError(f"{' and '.join(on_stdout)} would both write to stdout",
                         fix="send all but one to a file, e.g. --html report.html")
    if html is not None:
        from devicebench.report.charts import require_matplotlib

        require_matplotlib()
    rep = report_job(run, ops_run=ops_run, db=db)
    if json_out:
        print(json.dumps(rep.to_dict(), indent=2, default=str))
    if html is not None:
        from devicebench.report.html import render_html

        if not write_output(html, render_html(rep), "HTML"):
            say(f"wrote {html} (run {rep.run_id}; open it in a browser, works offline)",
                to_stderr=bool(on_stdout))
    if md is not None or (html is None and not json_out):
        from devicebench.report.markdown import render_markdown

        if not write_output(md if md is not None else Path("-"), render_markdown(rep),
                            "Markdown"):
            say(f"wrote {md}", to_stderr=bool(on_stdout))
