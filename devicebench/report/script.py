"""Render advice on a user's script: which fit() was measured, the script's figures, the
advice, and the patch to the script."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from devicebench.jobs.advise_script import ScriptAdvice
from devicebench.report.advise import render_advice
from devicebench.report.console import make_console


def render_capture(capture, console: Console) -> None:
    """One line naming the measured fit() and the script's own figures."""
    where = "cached capture" if capture.cached else "captured"
    console.print(f"script {capture.script}: measuring its fit() at {capture.fit_site} "
                  f"({where}; the script never trains to its end) — {capture.figures()}",
                  markup=False, highlight=False)
    for note in capture.notes:  # a second fit(), a materialised dataset, a re-run model
        console.print(f"  note: {note}", markup=False, highlight=False)


def render_pipeline(pipeline: dict | None, console: Console) -> None:
    """The script's own input pipeline against the step (and the finding, when it is the
    slower)."""
    if not pipeline:
        return
    console.print("\n" + pipeline["line"], markup=False, highlight=False)
    if pipeline.get("finding"):
        console.print(Text.assemble(("finding", "bold yellow"), f": {pipeline['finding']}"),
                      highlight=False)


def render_script_advice(result: ScriptAdvice, *, console: Console | None = None,
                         brief: bool = False) -> None:
    """The capture line, the advice, then the patch (``patch -p0 < FILE`` applies it)."""
    con = console or make_console()
    render_capture(result.capture, con)
    render_advice(result.advice, console=con, brief=brief)
    render_pipeline(result.pipeline, con)
    patch = result.patch
    if patch is None:
        con.print("\n[bold]The change to make[/bold]: none — keep your script as it is.")
        return
    for blocker in patch.blockers:  # the patched script would fail without this edit
        con.print(Text.assemble(("\nfirst", "bold yellow"), f": {blocker}"), highlight=False)
    if patch.diff:
        con.print(f"\n[bold]The change to make[/bold] ({'; '.join(patch.changes)}) — "
                  f"save it as devicebench.patch and run `{patch.command}`:",
                  highlight=False)
        con.print(patch.diff.rstrip("\n"), markup=False, highlight=False)
    if patch.not_patched:
        con.print("Also (not expressible as a patch here): " + "; ".join(patch.not_patched),
                  markup=False, highlight=False)
        for line in result.snippet.splitlines():
            con.print(f"    {line}", markup=False, highlight=False)
