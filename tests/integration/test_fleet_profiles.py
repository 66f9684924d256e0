"""``fleet profile record`` on a two-node cluster on this host (a real node, and one that
stands for the recorded H200 profile): one profile per machine in one directory, each
replayable by ``profile replay``. A sweep of every candidate takes minutes: ``slow``."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli

ray = pytest.importorskip("ray")


@pytest.mark.slow
def test_fleet_profile_record_writes_one_replayable_profile_per_machine(tmp_path):
    from ray.cluster_utils import Cluster

    from devicebench.fleet.job import fleet_profile_record

    cpu = {"devicebench": 1, "devicebench.device.cpu": 1}
    sim = "DEVICEBENCH_FLEET_SIMULATE"
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": cpu,
        "env_vars": {sim: json.dumps({"name": "node-a", "host": {"cpu_model": "box A"},
                                      "without": ["torch"]})}})
    c.add_node(num_cpus=1, resources={**cpu, "devicebench.device.gpu:0": 1},
               env_vars={sim: json.dumps({"name": "h200", "profile": "h200"})})
    c.wait_for_nodes()
    try:
        ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
        profiles, notes = fleet_profile_record(["seed-rnn"], tmp_path, max_rounds=3)
    finally:
        ray.shutdown()
        c.shutdown()
    assert not notes and not any(p.problem for p in profiles)
    assert sorted(p.path.name for p in profiles) == ["h200.json", "node-a.json"]
    for p in profiles:
        res = run_cli("profile", "replay", str(p.path), "seed-rnn", "--budget", "20",
                      "--json")
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["advice"]["recommended"] is not None
    mine = json.loads((tmp_path / "node-a.json").read_text())
    assert mine["snapshot"]["host"]["cpu_model"] == "box A"
