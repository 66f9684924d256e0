"""A fleet job as one self-contained HTML page, the machines as columns: the answer
first (where should this model train), then each machine's figures side by side, then
every configuration's step time on every machine. No script, no external resource;
every stored string passes through :func:`html.escape`."""

from __future__ import annotations

from html import escape
from typing import Any

from devicebench.fleet.answer import INDEPENDENT_NOTE, MachineAnswer, reference_name
from devicebench.fmt import fmt_duration
from devicebench.report.fleet import _ci, _vs, headline

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1200px;
margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
.answer{border-left:6px solid #2ca02c;padding:.5em 1em;background:#f7f7f7}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #ddd;padding:.25em .55em;text-align:left;vertical-align:top}
th{background:#f2f2f2}td.best{background:#e8f5e9;font-weight:bold}
.note{color:#555;font-size:.9em}.lost{color:#b00020}
"""


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _per_config(answers: list[MachineAnswer]) -> tuple[list[str], list[dict[str, str]]]:
    """Configuration labels, and per machine label -> its step time (the final
    comparison's median with CI where it was a finalist, else the search's median)."""
    labels: list[str] = []
    cells: list[dict[str, str]] = []
    for a in answers:
        adv: dict[str, Any] = a.facts.advice or {}
        got: dict[str, str] = {}
        for c in adv.get("candidates", []):
            if c.get("median_step_s") is not None:
                got[c["label"]] = fmt_duration(c["median_step_s"]) + " (search)"
            elif c.get("rejected") or c.get("untried"):
                got[c["label"]] = "rejected" if c.get("rejected") else "not tried"
        for r in adv.get("final", []):
            st = r.get("step_time_s") or {}
            if st.get("median") is not None:
                got[r["label"]] = _ci(st["median"], tuple(st["ci95"]) if st.get("ci95")
                                      else None)
        labels += [k for k in got if k not in labels]
        cells.append(got)
    return labels, cells


def render_fleet_html(fleet_id: str, workload: str, answers: list[MachineAnswer]) -> str:
    """The page for one fleet job (``devicebench fleet report --html``)."""
    heads = "".join(f'<th class="machine" data-fingerprint="{_e(a.facts.fingerprint)}">'
                    f'{_e(a.facts.label)}{" (yours)" if a.facts.is_user else ""}</th>'
                    for a in answers)

    def row(name: str, values: list[str], best: int | None = None) -> str:
        tds = "".join(f'<td{" class=best" if i == best else ""}>{_e(v)}</td>'
                      for i, v in enumerate(values))
        return f"<tr><th>{_e(name)}</th>{tds}</tr>"

    first = 0 if answers and answers[0].epoch_s is not None else None
    rows = [
        row("status", [a.facts.status + (f": {a.facts.reason}" if a.facts.reason else "")
                       for a in answers]),
        row("fastest configuration", [a.best or "-" for a in answers], first),
        row("step [95% CI]", [_ci(a.step_s, a.step_ci) for a in answers], first),
        row("epoch [95% CI]", [_ci(a.epoch_s, a.epoch_ci) for a in answers], first),
        row("vs your machine [95% CI]", [_vs(a) for a in answers], first),
        row("accelerator", [a.accelerator or "-" for a in answers]),
        row("verdict", [a.verdict or "-" for a in answers]),
        row("trials stored", [str(len(a.facts.trials)) for a in answers]),
    ]
    labels, cells = _per_config(answers)
    config_rows = [row(label, [c.get(label, "-") for c in cells]) for label in labels]
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        f"<title>devicebench fleet: {_e(workload)}</title><style>{CSS}</style></head><body>"
        f"<h1>Where should {_e(workload)} train?</h1>"
        f'<p class="note">fleet job {_e(fleet_id)}, {len(answers)} machines</p>'
        f'<p class="answer" id="answer">{_e(headline(answers, workload))}</p>'
        f'<table id="machines"><thead><tr><th></th>{heads}</tr></thead><tbody>'
        + "".join(rows) + "</tbody></table>"
        f'<p class="note">vs: against {_e(reference_name(answers) or "-")}; '
        f"{_e(INDEPENDENT_NOTE)}</p>"
        f'<h2>Every configuration, step time per machine</h2><table id="configs"><thead>'
        f"<tr><th>configuration</th>{heads}</tr></thead><tbody>" + "".join(config_rows)
        + "</tbody></table></body></html>")
