"""``fleet`` on a real Ray cluster of several nodes on this one host
(``ray.cluster_utils.Cluster``), each node with its own machine identity
(``DEVICEBENCH_FLEET_SIMULATE`` in its raylet's environment, see
:mod:`devicebench.fleet.simulate`):

- node-a (the head: the user's machine) and node-b measure seed-rnn for real, here;
- h200 advertises a GPU resource and replays the recorded H200 profile;
- old reports another devicebench version, nofw has no framework, nodb cannot import
  devicebench at all (a ``sitecustomize`` on its PYTHONPATH hides it): each is one line.

One advise across the fleet (node-b removed mid-run), one cut short by Ctrl-C, the
doctor, and the stored results read back (history, report, the HTML page in Chromium).
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests.chromium import Chromium, chromium_path
from tests.conftest import run_cli

ray = pytest.importorskip("ray")

from devicebench.fleet.job import fleet_advise, fleet_doctor  # noqa: E402

BUDGET = 10.0
CPU = {"devicebench": 1, "devicebench.device.cpu": 1}
GPU = {**CPU, "devicebench.device.gpu:0": 1}
BLOCK = ("import sys\n"
         "class _Hide:\n"
         "    def find_spec(self, name, path=None, target=None):\n"
         "        if name == 'devicebench' or name.startswith('devicebench.'):\n"
         "            raise ModuleNotFoundError(\"No module named 'devicebench'\", name=name)\n"
         "sys.meta_path.insert(0, _Hide())\n")


def _sim(**data) -> dict[str, str]:
    return {"DEVICEBENCH_FLEET_SIMULATE": json.dumps(data)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from ray.cluster_utils import Cluster

    hide = tmp_path_factory.mktemp("nodb")
    (hide / "sitecustomize.py").write_text(BLOCK)
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": CPU,
        "env_vars": _sim(name="node-a", host={"cpu_model": "simulated box A"})})
    nodes = {"node-b": c.add_node(num_cpus=1, resources=CPU, env_vars=_sim(
        name="node-b", host={"cpu_model": "simulated box B"}, without=["torch"]))}
    c.add_node(num_cpus=1, resources=GPU, env_vars=_sim(name="h200", profile="h200"))
    c.add_node(num_cpus=1, resources=CPU, env_vars=_sim(
        name="old", host={"cpu_model": "old box"}, devicebench_version="0.0.1"))
    c.add_node(num_cpus=1, resources=CPU, env_vars=_sim(
        name="nofw", host={"cpu_model": "bare box"}, without=["tensorflow", "jax", "torch"]))
    c.add_node(num_cpus=1, resources=CPU, env_vars={
        "PYTHONPATH": f"{hide}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"})
    c.wait_for_nodes()
    ray.init(address=c.address, include_dashboard=False, log_to_driver=False,
             logging_level="ERROR")
    c.named = nodes
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def first(cluster, tmp_path_factory):
    """The fleet's advise, node-b removed at its first round of interleaved blocks."""
    db = tmp_path_factory.mktemp("fleet") / "fleet.db"
    seen: dict[str, list[str]] = {}

    def event(kind, m, value) -> None:
        seen.setdefault(m.report.name, []).append(kind)
        if m.report.name == "node-b" and kind == "event" and value[0] == "round" \
                and "removed" not in seen:
            seen["removed"] = [str(len(m.trials))]
            cluster.remove_node(cluster.named["node-b"], allow_graceful=False)

    fleet = fleet_advise("seed-rnn", budget=BUDGET, address=cluster.address, db=db,
                         on_event=event)
    return fleet, db, seen


def _by_name(fleet):
    return {m.report.name: m for m in fleet.machines}


def test_advise_spreads_over_the_machines_and_trials_land_where_their_device_is(first):
    fleet, _, _ = first
    machines = _by_name(fleet)
    assert set(machines) == {"node-a", "node-b", "h200"}
    assert machines["node-a"].status == "ok" and machines["h200"].status == "ok"
    assert len({m.report.fingerprint for m in fleet.machines}) == 3
    assert machines["node-a"].report.node.is_driver
    for m in fleet.machines:
        for t in m.trials:  # each trial's device is one its node advertises
            assert t.spec.device in m.report.node.devices, (m.report.name, t.spec.label)
    assert any(t.spec.device == "gpu:0" for t in machines["h200"].trials)
    assert all(t.spec.device == "cpu" for t in machines["node-a"].trials)
    assert not any(t.spec.backend == "torch" for t in machines["node-b"].trials)


def test_the_answer_puts_the_fastest_machine_first_with_a_ratio_against_yours(first):
    fleet, _, _ = first
    answers = [a for a in fleet.answer() if a.epoch_s is not None]
    assert [a.facts.name for a in answers] == sorted(
        [a.facts.name for a in answers], key=lambda n: next(
            x.epoch_s for x in answers if x.facts.name == n))
    mine = next(a for a in answers if a.facts.is_user)
    assert mine.is_reference and mine.vs_user is None
    other = next(a for a in answers if a.facts.name == "h200")
    assert other.best and other.accelerator.startswith("Accelerator")
    assert other.vs_user is not None
    assert other.vs_user.ci_low <= other.vs_user.value <= other.vs_user.ci_high


def test_a_node_removed_mid_run_is_lost_and_nothing_stored_is_lost(first):
    fleet, db, seen = first
    b = _by_name(fleet)["node-b"]
    assert "removed" in seen, seen
    assert b.status == "lost" and "died" in b.reason
    with sqlite3.connect(db) as c:
        stored = dict(c.execute("SELECT run_id, count(*) FROM trials GROUP BY run_id"))
        options = json.loads(c.execute("SELECT options FROM runs WHERE id = ?",
                                        (b.run_id,)).fetchone()[0])
    for m in fleet.machines:  # every trial that came back is stored, lost node's too
        assert stored.get(m.run_id, 0) == len(m.trials), m.report.name
    assert len(b.trials) == int(seen["removed"][0])
    assert options["summary"]["fleet"]["status"] == "lost"


def test_nodes_that_cannot_take_part_are_one_line_each(first):
    fleet, _, _ = first
    notes = "\n".join(fleet.notes)
    assert len(fleet.notes) == 3, notes
    assert "node old" in notes and "runs devicebench 0.0.1" in notes
    assert "node nofw" in notes and "no deep-learning framework" in notes
    assert "devicebench is not installed there" in notes
    assert all("\n" not in n for n in fleet.notes)


def test_the_store_holds_three_machines_and_reads_back(first, tmp_path):
    fleet, db, _ = first
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT count(*) FROM machines").fetchone()[0] == 3
    hist = run_cli("history", "--json", "--db", str(db))
    assert hist.returncode == 0, hist.stderr
    assert len(json.loads(hist.stdout)["runs"]) == 3
    h200 = _by_name(fleet)["h200"].run_id
    rep = run_cli("report", "--run", str(h200), "--json", "--db", str(db))
    assert rep.returncode == 0, rep.stderr
    assert "H200" in json.dumps(json.loads(rep.stdout)["machine"])
    mine = _by_name(fleet)["node-a"].run_id
    cmp = run_cli("compare", str(mine), str(h200), "--db", str(db))
    assert cmp.returncode == 0, cmp.stderr
    assert "Machines differ" in cmp.stdout and "simulated box A" in cmp.stdout
    page = tmp_path / "fleet.html"
    out = run_cli("fleet", "report", "--html", str(page), "--db", str(db))
    assert out.returncode == 0, out.stderr
    if chromium_path() is None:
        pytest.skip("chromium not installed: the page was written, not opened")
    with Chromium() as browser:
        p = browser.open(page.as_uri())
        cols = p.evaluate("[...document.querySelectorAll('#machines th.machine')]"
                          ".map(t => [t.innerText, t.dataset.fingerprint])")
        answer = p.evaluate("document.getElementById('answer').innerText")
        assert not p.console_errors
    assert len(cols) == 3 and len({f for _, f in cols}) == 3
    assert {c.split(" ")[0] for c, _ in cols} == {"node-a", "node-b", "h200"}
    assert answer.startswith("Train seed-rnn on")


@pytest.mark.slow  # 18 s; Ctrl-C keeping what finished is held for run by test_run.py
def test_ctrl_c_cancels_the_fleet_and_keeps_what_finished(first, cluster, tmp_path):
    """A user's workload file travels to the nodes in the task's arguments: node-a loads
    it from its own copy and starts measuring; the H200 node, a replayed profile, has no
    such workload (one line); Ctrl-C as node-a sets its first trial up (the file loaded
    there already) cancels it."""
    db = tmp_path / "cut.db"
    mine = tmp_path / "user" / "my_workloads.py"
    mine.parent.mkdir()
    mine.write_text(Path(__file__).parents[1].joinpath("fixtures", "workloads.py").read_text())
    ref = f"{mine}:tiny"
    shipped: list[str] = []

    def event(kind, m, value) -> None:
        if m.report.name == "node-a" and kind == "event" and value[0] == "setup":
            shipped.append(m.shipped_as)
            raise KeyboardInterrupt

    fleet = fleet_advise(ref, budget=BUDGET, address=cluster.address, db=db, on_event=event)
    assert fleet.interrupted
    a, h200 = _by_name(fleet)["node-a"], _by_name(fleet)["h200"]
    assert a.status == "cancelled"
    assert shipped and shipped[0] != ref and shipped[0].endswith("my_workloads.py:tiny")
    assert h200.status == "failed" and "replays the h200 profile" in h200.reason
    with sqlite3.connect(db) as c:
        stored = dict(c.execute("SELECT run_id, count(*) FROM trials GROUP BY run_id"))
        workloads = {json.loads(o).get("workload") for (o,) in
                     c.execute("SELECT options FROM runs")}
    for m in fleet.machines:
        assert stored.get(m.run_id, 0) == len(m.trials)
    assert workloads == {ref}


def test_fleet_doctor_one_row_per_node_and_one_line_per_problem(first, cluster):
    reports = fleet_doctor(address=cluster.address, frameworks=["jax"])
    by = {r.name: r for r in reports if not r.problem}
    assert {"node-a", "h200", "old", "nofw"} <= set(by) | {
        r.name for r in reports if r.problem}
    assert by["node-a"].snapshot.frameworks["jax"].status == "ok"
    problems = [r.problem for r in reports if r.problem]
    assert any("devicebench is not installed there" in p for p in problems)


def test_fleet_advise_cli_on_a_named_node_as_json(first, cluster, tmp_path):
    db = tmp_path / "cli.db"
    res = run_cli("fleet", "advise", "seed-rnn", "--node", "h200", "--budget", "20",
                  "--json", "--address", cluster.address, "--db", str(db), timeout=180)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    assert out["schema"] == "devicebench.fleet-advise"
    assert [m["node"] for m in out["machines"]] == ["h200"] and not out["left_out"]
    (h200,) = out["machines"]
    assert h200["status"] == "ok" and h200["best"] and h200["vs_user"] is None
    old = run_cli("fleet", "advise", "seed-rnn", "--node", "old", "--address",
                  cluster.address, "--db", str(db), timeout=180)
    assert old.returncode == 2 and "runs devicebench 0.0.1" in old.stderr
    assert "Traceback" not in old.stderr
