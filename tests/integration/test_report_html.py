"""The HTML report in a real headless Chromium (Debian's ``chromium``; .ci/run installs
it): no console errors, charts in the DOM with the expected number of series, a
screenshot written as an artifact, a hostile workload name shown as text. Plus the
report / history / compare / export / import commands end to end on real SQLite files.

Screenshots go to $DEVICEBENCH_ARTIFACTS (default: tests/artifacts/, git-ignored).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path

import pytest

from devicebench.report.html import render_html
from devicebench.results.run_report import build_report
from devicebench.store import ResultStore
from devicebench.store.bundle import import_bundle, read_bundle
from tests.chromium import Chromium, chromium_path
from tests.conftest import assert_one_line_error, has_module, run_cli
from tests.unit.test_report_data import H200, add_run, snapshot, trial

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("DEVICEBENCH_ARTIFACTS", ROOT / "tests" / "artifacts"))
XSS = "<script>alert(1)</script>"

if chromium_path() is None and os.environ.get("DEVICEBENCH_REQUIRE_CHROMIUM"):
    raise RuntimeError("DEVICEBENCH_REQUIRE_CHROMIUM is set but chromium is not installed")
needs_browser = pytest.mark.skipif(chromium_path() is None or not has_module("matplotlib"),
                                   reason="needs chromium (apt-get install -y chromium) and "
                                          "matplotlib (pip install 'devicebench[report]')")

SERIES = """(() => [...document.querySelectorAll('figure.chart')].map(f => ({
  id: f.id, declared: +f.dataset.series,
  found: f.querySelectorAll('[id^="' + f.id + '-series-"]').length,
  svg: f.querySelectorAll('svg').length})))()"""


def _h200_report(tmp_path: Path) -> tuple[Path, object]:
    with ResultStore.open(tmp_path / "r.db") as store:
        import_bundle(store, read_bundle(H200), "h200.json")
        report = build_report(store, None)
    page = tmp_path / "h200.html"
    page.write_text(render_html(report), encoding="utf-8")
    return page, report


# Elements that scroll sideways or reach past the viewport, and charts whose legend
# overlaps the plotting area.
LAYOUT = """(() => { const d = document.documentElement, out = [];
  for (const e of document.querySelectorAll('body *')) {
    if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible')
      out.push('scrolls: ' + e.tagName + '.' + e.className);
    if (e.getBoundingClientRect().right > d.clientWidth + 1) out.push('beyond: ' + e.tagName);
  }
  const overlaps = [...document.querySelectorAll('[id$="-legend"]')].filter(l => {
    const a = document.getElementById(l.id.replace(/-legend$/, '-axes'));
    if (!a) return true;
    const r = l.getBoundingClientRect(), s = a.getBoundingClientRect();
    return !(r.top >= s.bottom || r.bottom <= s.top || r.left >= s.right || r.right <= s.left);
  }).map(l => l.id);
  return {doc: [d.scrollWidth, d.clientWidth], out: out.slice(0, 10), overlaps,
          legends: document.querySelectorAll('[id$="-legend"]').length}; })()"""


@needs_browser
@pytest.mark.parametrize("width", [1280, 800])
def test_report_fits_the_window_without_horizontal_scrolling(tmp_path, width):
    """Issue 26: at 1280 px the 10-column table scrolled sideways and hid its columns,
    and the op-sweep legends sat over the data. No element scrolls sideways or reaches
    past the window, every legend is clear of its plot, and the peaks speak one unit
    style (TFLOP/s, as the terminal prints them)."""
    page, _ = _h200_report(tmp_path)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with Chromium() as browser:
        p = browser.open(page.as_uri(), width=width)
        layout = p.evaluate(LAYOUT)
        text = p.evaluate("document.body.innerText")
        p.screenshot(ARTIFACTS / f"report-h200-{width}px.png")
    assert layout["doc"][0] <= layout["doc"][1], layout
    assert layout["out"] == [], layout
    assert layout["legends"] >= 4 and layout["overlaps"] == [], layout
    assert "gpu:0 400 TFLOP/s (jax/gpu:0 eager" in text and "GFLOP/s (" not in text


@needs_browser
def test_detector_sees_console_errors(tmp_path):
    """A positive control: a page that logs an error and throws is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>console.error('boom'); undefinedFn();</script>"
                   "</body></html>")
    with Chromium() as browser:
        errors = browser.open(bad.as_uri()).console_errors
    assert any("boom" in e for e in errors) and any("undefinedFn" in e for e in errors)


@needs_browser
def test_h200_report_in_chromium(tmp_path):
    page, report = _h200_report(tmp_path)
    html = page.read_text()
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing to fetch
    assert "<script" not in html  # static: no script at all
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with Chromium() as browser:
        p = browser.open(page.as_uri())
        charts = {c["id"]: c for c in p.evaluate(SERIES)}
        text = p.evaluate("document.body.innerText")
        shot = p.screenshot(ARTIFACTS / "report-h200.png")
        errors = p.console_errors
        resources = p.evaluate("performance.getEntriesByType('resource').length")
    assert errors == []
    assert resources == 0  # no network, no CDN
    workloads = [w.workload for w in report.workloads]
    assert workloads == ["seed-rnn", "mnist-cnn", "lstm-forecast"]
    for i, _ in enumerate(workloads):
        assert charts[f"w{i}-step"]["found"] == 4 == charts[f"w{i}-step"]["declared"]
        assert charts[f"w{i}-mem"]["found"] >= 1
    # run.json holds loss checkpoints (steps 1, 10, 25, 50): one line per configuration.
    assert charts["w0-loss"]["found"] == 4
    n_curves = [len(o.curves) for o in report.ops.ops]
    for i, n in enumerate(n_curves):
        assert charts[f"op{i}"]["found"] == n == charts[f"op{i}"]["declared"]
    assert all(c["svg"] == 1 for c in charts.values())
    # The answer comes first, with the ratio.
    assert text.index("The answer") < text.index("Environment") < text.index("Op sweep")
    assert "seed-rnn: Accelerator: no — gpu:0 is 4.6x SLOWER than the CPU" in text
    assert shot.stat().st_size > 10_000


@needs_browser
def test_hostile_workload_name_renders_as_text(tmp_path):
    with ResultStore.open(tmp_path / "r.db") as store:
        add_run(store, snapshot(), [trial(XSS, "jax", [1.0, 1.1, 0.9], verdict="reference"),
                                    trial(XSS, "torch", [3.0, 3.2, 2.9])])
        report = build_report(store, None)
    page = tmp_path / "xss.html"
    page.write_text(render_html(report), encoding="utf-8")
    assert XSS not in page.read_text()
    with Chromium() as browser:
        p = browser.open(page.as_uri())
        scripts = p.evaluate("document.querySelectorAll('script').length")
        text = p.evaluate("document.body.innerText")
        svg_text = p.evaluate("[...document.querySelectorAll('svg text')]"
                              ".map(t => t.textContent).join(' ')")
        p.screenshot(ARTIFACTS / "report-xss.png")
        errors = p.console_errors
    assert scripts == 0 and errors == []
    assert f"Workload {XSS}" in text
    assert XSS in svg_text  # the chart titles draw it as text too


def _runs(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT count(*) FROM runs").fetchone()[0]
    finally:
        con.close()


@pytest.mark.skipif(not has_module("matplotlib"), reason="needs matplotlib")
def test_commands_end_to_end(tmp_path):
    db, fresh = tmp_path / "a.db", tmp_path / "b.db"
    with ResultStore.open(db) as store:
        here = add_run(store, snapshot(), [trial("seed-rnn", "jax", [0.5, 0.55, 0.48, 0.5])])
    res = run_cli("import", str(H200), "--db", str(db))
    assert res.returncode == 0 and "imported 2 run(s)" in res.stdout, res.stderr
    assert run_cli("import", str(H200), "--db", str(db)).returncode == 0
    assert _runs(db) == 3  # the second import added nothing
    hist = json.loads(run_cli("history", "--json", "--db", str(db)).stdout)["runs"]
    assert [h["imported_from"] for h in hist] == ["h200.json", "h200.json", ""]
    h200_run = hist[0]["id"]
    # "This model on that machine": the same spec on the H200 and here.
    res = run_cli("compare", str(h200_run), str(here), "--json", "--db", str(db))
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    (row,) = doc["rows"]
    assert row["workload"] == "seed-rnn" and row["a"]["label"] == "jax/cpu"
    assert doc["interleaved"] is False and any("NVIDIA H200" in d
                                               for d in doc["machine_differences"])
    # export -> import on a fresh database: the same comparison.
    bundle = tmp_path / "bundle.json"
    assert run_cli("export", str(h200_run), str(here), "-o", str(bundle), "--db",
                   str(db)).returncode == 0
    assert run_cli("import", str(bundle), "--db", str(fresh)).returncode == 0
    ids = [h["id"] for h in json.loads(run_cli("history", "--json", "--db",
                                               str(fresh)).stdout)["runs"]]
    again = json.loads(run_cli("compare", str(ids[1]), str(ids[0]), "--json", "--db",
                               str(fresh)).stdout)
    assert again["rows"][0]["speedup_b_over_a"] == row["speedup_b_over_a"]
    # report: HTML file, Markdown to stdout, JSON.
    out = tmp_path / "r.html"
    res = run_cli("report", "--run", str(h200_run), "--html", str(out), "--db", str(db))
    assert res.returncode == 0 and out.stat().st_size > 20_000, res.stderr
    md = run_cli("report", "--last", "--db", str(db)).stdout
    assert "### The answer" in md
    rep = json.loads(run_cli("report", "--run", str(h200_run), "--json", "--db", str(db)).stdout)
    assert rep["run_id"] == h200_run and rep["workloads"][0]["headline"]["answer"] == "no"


def test_bad_input_is_one_line(tmp_path):
    from devicebench.store import ResultStore

    db = tmp_path / "empty.db"
    ResultStore.open(db).close()  # an empty store: reading never creates one
    assert_one_line_error(run_cli("report", "--db", str(db)), "no run with results")
    assert_one_line_error(run_cli("report", "--run", "3", "--last", "--db", str(db)), "--run")
    assert_one_line_error(run_cli("compare", "1", "1", "--db", str(db)), "same run")
    assert_one_line_error(run_cli("compare", "1", "2", "--db", str(db)), "no run 1")
    assert_one_line_error(run_cli("import", str(tmp_path / "nope.json"), "--db", str(db)),
                          "not found")
    assert_one_line_error(run_cli("export", "9", "-o", str(tmp_path / "x.json"), "--db",
                                  str(db)), "no run 9")
    assert_one_line_error(run_cli("report", "--html", str(tmp_path), "--db", str(db)),
                          "no run")
