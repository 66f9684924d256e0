"""The fleet's pure parts, without Ray: what a node advertises, a simulated node's
identity, shipping a workload's files, the answer's order and ratios; and without Ray
installed, ``fleet`` says how to install it while the parent CLI never imports Ray."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from devicebench.env.snapshot import EnvSnapshot, HostInfo, NvidiaGpu, NvidiaSmi
from devicebench.fleet.answer import MachineFacts, where_to_train
from devicebench.fleet.resources import advertised_devices, node_resources, resources_json
from devicebench.fleet.ship import pack_workload, unpack_workload
from devicebench.fleet.simulate import read_simulation, simulated_snapshot
from devicebench.store.fingerprint import machine_fingerprint
from devicebench.trials.result import TrialResult
from devicebench.trials.spec import TrialSpec
from tests.conftest import assert_one_line_error, run_cli


def _snap(**host) -> EnvSnapshot:
    return EnvSnapshot(host=HostInfo(os="Linux", machine="x86_64", **host),
                       distributions={"jax": "0.10", "jaxlib": "0.10", "torch": "2.1"})


def test_resources_name_each_device_the_probe_found():
    snap = _snap()
    snap.nvidia_smi = NvidiaSmi(gpus=[NvidiaGpu(index=0, name="A"), NvidiaGpu(index=1,
                                                                            name="B")])
    res = node_resources(snap)
    assert advertised_devices(res) == ["cpu", "gpu:0", "gpu:1"]
    assert json.loads(resources_json(snap)) == res and res["devicebench"] == 1
    mac = EnvSnapshot(host=HostInfo(os="Darwin", machine="arm64"))
    assert advertised_devices(node_resources(mac)) == ["cpu", "gpu:0", "mps"]


def test_fleet_resources_prints_json_without_a_cluster():
    out = run_cli("fleet", "resources")
    assert out.returncode == 0, out.stderr
    assert "cpu" in advertised_devices(json.loads(out.stdout))


def test_a_simulated_node_has_its_own_fingerprint_and_frameworks():
    base = _snap(cpu_model="real cpu")
    sim = read_simulation({"DEVICEBENCH_FLEET_SIMULATE": json.dumps(
        {"name": "b", "host": {"cpu_model": "box B"}, "without": ["jax"]})})
    other = simulated_snapshot(base, sim)
    assert other.host.cpu_model == "box B" and base.host.cpu_model == "real cpu"
    assert "jax" not in other.distributions and "jaxlib" not in other.distributions
    assert machine_fingerprint(other)[0] != machine_fingerprint(base)[0]
    assert read_simulation({}) is None
    with pytest.raises(ValueError):
        read_simulation({"DEVICEBENCH_FLEET_SIMULATE": "[1]"})


def test_a_user_workload_travels_as_bytes(tmp_path):
    src = tmp_path / "mine.py"
    src.write_text("def build():\n    pass\n")
    template, files = pack_workload(f"{src}:build")
    assert str(tmp_path) not in template and list(files.values()) == [src.read_bytes()]
    there = tmp_path / "node"
    there.mkdir()
    ref = unpack_workload(template, files, there)
    path, _, func = ref.rpartition(":")
    assert func == "build" and open(path).read() == src.read_text()
    assert pack_workload("seed-rnn") == ("seed-rnn", {})


def _trial(step_s: float, spread: float) -> TrialResult:
    spec = TrialSpec("mlp", backend="jax", device="cpu")
    blocks = [step_s * 10 * (1 + spread * k) for k in (-1, 0, 1, 0.5, -0.5)]
    return TrialResult(spec, steps_per_block=10, steps_per_epoch=50, batch_size=32,
                       block_seconds=blocks, block_rounds=list(range(5)))


def _advice(t: TrialResult, epoch_s: float) -> dict:
    st = t.step_time
    return {"recommended": t.spec.to_dict(), "verdict": "use jax/cpu",
            "headline": {"accelerator": "", "text": "No accelerator"},
            "final": [{"spec": t.spec.to_dict(), "label": t.spec.label,
                       "step_time_s": {"median": st.median,
                                       "ci95": [st.ci_low, st.ci_high]},
                       "fit": {"epoch_s": epoch_s, "epoch_ci95": [epoch_s, epoch_s]}}]}


def test_the_answer_orders_by_epoch_and_compares_with_the_users_machine():
    slow, fast = _trial(0.004, 0.02), _trial(0.001, 0.02)
    facts = [MachineFacts("mine", "mine (cpu)", "f1", "ok", "", True,
                          _advice(slow, 0.2), [slow]),
             MachineFacts("big", "big (cpu)", "f2", "ok", "", False,
                          _advice(fast, 0.05), [fast]),
             MachineFacts("gone", "gone (cpu)", "f3", "lost", "died", False, None, [])]
    rows = where_to_train(facts)
    assert [r.facts.name for r in rows] == ["big", "mine", "gone"]
    big, mine, gone = rows
    assert mine.is_reference and mine.vs_user is None and not big.is_reference
    assert big.vs_user.value == pytest.approx(4.0, rel=0.05)
    assert big.vs_user.ci_low < big.vs_user.value < big.vs_user.ci_high
    assert gone.vs_user is None and gone.best == ""
    assert big.to_dict()["vs_user"]["samples"] == "independent"


def test_without_ray_fleet_says_how_to_install_it(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n"
        "class _NoRay:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'ray' or name.startswith('ray.'):\n"
        "            raise ModuleNotFoundError(\"No module named 'ray'\", name=name)\n"
        "sys.meta_path.insert(0, _NoRay())\n")
    import os

    env = {"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    res = run_cli("fleet", "advise", "mlp", env=env)
    assert_one_line_error(res, "Ray is not installed", "pip install 'devicebench[ray]'")
    assert run_cli("fleet", "resources", env=env).returncode == 0


def test_an_unreachable_cluster_is_one_line():
    res = run_cli("fleet", "doctor", "--address", "127.0.0.1:9", timeout=60)
    assert_one_line_error(res, "cannot reach a Ray cluster at 127.0.0.1:9")


def test_the_parent_cli_does_not_import_ray():
    code = ("import sys, devicebench.cli, devicebench.fleet.job, devicebench.fleet.stored, "
            "devicebench.report.fleet_html\nprint('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_one_node_per_distinct_machine_and_named_nodes():
    from devicebench.errors import InputError
    from devicebench.fleet.cluster import FleetNode
    from devicebench.fleet.job import NodeReport, choose_nodes, lacks, same_machines

    def rep(nid: str, name: str, cpu: str, problem: str = "") -> NodeReport:
        return NodeReport(FleetNode(nid * 8, "10.0.0." + nid, {}), name, _snap(cpu_model=cpu),
                          problem=problem)

    a, a2, b = rep("1", "a", "cpu A"), rep("2", "a2", "cpu A"), rep("3", "b", "cpu B")
    bad = rep("4", "old", "cpu C", problem="node old [4444]: runs devicebench 0.0.1")
    chosen, notes = choose_nodes([a, a2, b, bad], None)
    assert [r.name for r in chosen] == ["a", "b"] and notes == [bad.problem]
    assert same_machines([a, a2, b, bad], chosen) == [
        a2.line(f"the same machine as a (fingerprint {a.fingerprint}): advised there once")]
    assert [r.name for r in choose_nodes([a, a2, b], ["a2", "10.0.0.3"])[0]] == ["a2", "b"]
    with pytest.raises(InputError, match="no node 'zz'"):
        choose_nodes([a, b], ["zz"])
    assert lacks(a, None) == "" and lacks(a, "backend=torch") == ""
    assert "has no tensorflow" in lacks(a, "backend=tensorflow,device=cpu")
    bare = NodeReport(a.node, "bare", EnvSnapshot(host=HostInfo(os="Linux")))
    assert "no deep-learning framework" in lacks(bare, None)
