"""``-`` means stdout wherever devicebench writes a file (issue 26): ``export 9 -o -``
writes the bundle to stdout (it used to create a file named ``-``), ``import -`` reads
one from stdin, and ``report --md/--html``, ``doctor --save``, ``profile record -o`` and
``fleet report --html`` do the same; options that cannot write to stdout (a directory, a
CSV written while the script owns stdout, a SQLite file) refuse ``-`` in one line. Every
case runs the real CLI on real SQLite files; no file named ``-`` is ever created."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H200_BUNDLE = FIXTURES / "bundles" / "h200.json"
H200_SNAPSHOT = FIXTURES / "snapshots" / "h200_jax_torch_cuda13.json"


def _cli_in(cwd: Path, *args: str, stdin: str | None = None):
    """The CLI run in ``cwd`` (so a stray file named ``-`` would land there)."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "devicebench", *args], cwd=cwd,
                          input=stdin, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2])))
    return proc


@pytest.fixture()
def h200_db(tmp_path):
    db = tmp_path / "r.db"
    res = run_cli("import", str(H200_BUNDLE), "--db", str(db))
    assert res.returncode == 0, res.stderr
    return db


def test_export_dash_writes_the_bundle_to_stdout_and_import_dash_reads_it(h200_db, tmp_path):
    res = _cli_in(tmp_path, "export", "1", "2", "-o", "-", "--db", str(h200_db))
    assert res.returncode == 0, res.stderr
    bundle = json.loads(res.stdout)  # stdout is the bundle and nothing else
    assert bundle["format"] == "devicebench-bundle" and len(bundle["runs"]) == 2
    assert "wrote the bundle to stdout: 2 run(s)" in res.stderr
    assert not (tmp_path / "-").exists()
    # the same bytes as -o FILE writes, but for the export time
    res_file = run_cli("export", "1", "2", "-o", str(tmp_path / "b.json"), "--db", str(h200_db))
    on_disk = json.loads((tmp_path / "b.json").read_text())
    assert res_file.returncode == 0
    assert {**on_disk, "exported_at": None} == {**bundle, "exported_at": None}
    # `export ... -o - | devicebench import -` on the other machine
    other = tmp_path / "other.db"
    imp = _cli_in(tmp_path, "import", "-", "--db", str(other), stdin=res.stdout)
    assert imp.returncode == 0, imp.stderr
    assert "imported 2 run(s) from stdin" in imp.stdout
    hist = json.loads(run_cli("history", "--json", "--db", str(other)).stdout)
    assert len(hist["runs"]) == 2 and {r["command"] for r in hist["runs"]} == {"ops", "run"}
    bad = _cli_in(tmp_path, "import", "-", "--db", str(other), stdin="not json")
    assert_one_line_error(bad, "stdin is not JSON")


def test_report_md_and_html_dash_go_to_stdout(h200_db, tmp_path):
    md = _cli_in(tmp_path, "report", "2", "--md", "-", "--db", str(h200_db))
    assert md.returncode == 0, md.stderr
    assert md.stdout.startswith("## devicebench report — run 2")
    assert not (tmp_path / "-").exists()
    both = run_cli("report", "2", "--json", "--md", "-", "--db", str(h200_db))
    assert_one_line_error(both, "--json and --md - would both write to stdout")
    both = run_cli("report", "2", "--html", "-", "--md", "-", "--db", str(h200_db))
    assert_one_line_error(both, "--html - and --md - would both write to stdout")
    # --md FILE beside --json: stdout is the JSON, the "wrote" line goes to stderr
    side = run_cli("report", "2", "--json", "--md", str(tmp_path / "r.md"), "--db",
                   str(h200_db))
    assert side.returncode == 0, side.stderr
    assert json.loads(side.stdout)["schema"] == "devicebench.report"
    assert "wrote" in side.stderr and (tmp_path / "r.md").read_text().startswith("## ")
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("the HTML report needs matplotlib (pip install 'devicebench[report]')")
    page = _cli_in(tmp_path, "report", "2", "--html", "-", "--db", str(h200_db))
    assert page.returncode == 0, page.stderr
    assert page.stdout.startswith("<!DOCTYPE html>") and page.stdout.rstrip().endswith("</html>")
    assert "wrote" not in page.stdout and not (tmp_path / "-").exists()


def test_doctor_save_dash_puts_the_snapshot_on_stdout_and_the_report_on_stderr(tmp_path):
    res = _cli_in(tmp_path, "doctor", "--snapshot", str(H200_SNAPSHOT), "--save", "-")
    assert res.returncode in (0, 1), res.stderr  # 1: the snapshot has error findings
    snap = json.loads(res.stdout)
    given = json.loads(H200_SNAPSHOT.read_text())["host"]
    assert {k: snap["host"][k] for k in given} == given  # (newer fields added, defaulted)
    assert "H200" in json.dumps(snap["nvidia_smi"])
    assert "devicebench doctor — snapshot" in res.stderr and "Findings" in res.stderr
    assert not (tmp_path / "-").exists()
    # round trip: the saved snapshot diagnoses the same
    (tmp_path / "env.json").write_text(res.stdout)
    again = run_cli("doctor", "--snapshot", str(tmp_path / "env.json"), "--json")
    first = run_cli("doctor", "--snapshot", str(H200_SNAPSHOT), "--json")
    ids = [[f["id"] for f in json.loads(r.stdout)["findings"]] for r in (again, first)]
    assert ids[0] == ids[1] and ids[0]
    both = run_cli("doctor", "--snapshot", str(H200_SNAPSHOT), "--save", "-", "--json")
    assert_one_line_error(both, "--save - and --json would both write to stdout")


def test_profile_record_dash_writes_the_profile_to_stdout(tmp_path, monkeypatch, capsys):
    """The sweep itself takes minutes (the recorder is the seam faked here: it returns
    the shipped H200 profile); what is checked is where the CLI writes it."""
    from devicebench.cli import profile as cli_profile
    from devicebench.profiles import load_profile
    from devicebench.profiles import record as record_mod

    shipped = load_profile("h200")
    monkeypatch.setattr(record_mod, "record_profile", lambda *a, **k: shipped)
    monkeypatch.chdir(tmp_path)
    cli_profile.record(["seed-rnn"], Path("-"), name="x", label="a machine", max_rounds=3)
    out = capsys.readouterr()
    assert json.loads(out.out) == json.loads(shipped.to_json())
    assert "wrote the profile to stdout" in out.err and not (tmp_path / "-").exists()
    cli_profile.record(["seed-rnn"], tmp_path / "p.json", name="x", label="a machine",
                       max_rounds=3)
    assert (tmp_path / "p.json").read_text() == shipped.to_json()
    assert f"wrote {tmp_path / 'p.json'}" in capsys.readouterr().out


def test_fleet_report_html_dash_goes_to_stdout(tmp_path):
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("needs matplotlib")
    from devicebench.env.snapshot import load_snapshot
    from devicebench.store import ResultStore

    db = tmp_path / "f.db"
    fleet = {"id": "f00d", "node": "node-a", "status": "failed", "reason": "lost"}
    with ResultStore.open(db) as store:  # a fleet job as `fleet advise` stores it
        rid = store.start_run(store.add_machine(load_snapshot(H200_SNAPSHOT)), "advise",
                              {"workload": "seed-rnn", "fleet": fleet})
        store.finish_run(rid, summary={"fleet": fleet})
    page = _cli_in(tmp_path, "fleet", "report", "--html", "-", "--db", str(db))
    assert page.returncode == 0, page.stderr
    assert page.stdout.lstrip().startswith("<!DOCTYPE html>") and "node-a" in page.stdout
    assert not (tmp_path / "-").exists()
    to_file = run_cli("fleet", "report", "--html", str(tmp_path / "f.html"), "--db", str(db))
    assert to_file.returncode == 0, to_file.stderr
    assert (tmp_path / "f.html").read_text().strip() == page.stdout.strip()


@pytest.mark.parametrize("args, needle", [
    (("monitor", "--csv", "-", "--no-store", "--", "python", "-c", "1"), "--csv - (stdout)"),
    (("monitor", "--tensorboard", "-", "--no-store", "--", "python", "-c", "1"),
     "--tensorboard - (stdout)"),
    (("fleet", "profile", "record", "-o", "-"), "-o - (stdout)"),
    (("history", "--db", "-"), "results database '-'"),
    (("monitor", "--db", "-", "--", "python", "-c", "1"), "results database '-'"),
])
def test_options_that_cannot_write_to_stdout_refuse_dash(args, needle, tmp_path):
    res = _cli_in(tmp_path, *args)
    assert_one_line_error(res, needle)
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("args, where", [
    (("report", "--md"), "devicebench report --help"),
    (("export", "1", "-o"), "devicebench export --help"),
    (("profile", "record", "-o"), "devicebench profile record --help"),
])
def test_a_file_option_without_its_value_names_the_command_and_dash(args, where):
    res = run_cli(*args)
    assert_one_line_error(res, "requires an argument: a file name, or - for stdout", where)


def test_options_whose_value_is_not_a_file_get_no_dash_hint():
    res = run_cli("fleet", "profile", "record", "-o")  # a directory
    assert_one_line_error(res, "requires an argument", "devicebench fleet profile record --help")
    assert "stdout" not in res.stderr
    res = run_cli("run", "--budget")
    assert_one_line_error(res, "requires an argument", "devicebench run --help")
    assert "stdout" not in res.stderr
    res = run_cli("report", "--bogus")  # named as a user types it, not `python -m ...`
    assert_one_line_error(res, "No such option: --bogus", "see `devicebench report --help`")
