"""A simulated three-node fleet on this one host (``ray.cluster_utils.Cluster``), then
``fleet advise`` on it, and the same advise on each machine in turn, for the wall times.

Nodes: node-a and node-b measure for real on this host, each reporting its own machine
identity (``DEVICEBENCH_FLEET_SIMULATE``: another CPU name; node-b without torch); h200
advertises a GPU resource and replays the recorded H200 profile (devicebench/profiles).

    python bench/fleet_demo.py [WORKLOAD] [BUDGET] [--sequential]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NODES = {
    "node-a": ({"devicebench": 1, "devicebench.device.cpu": 1},
               {"name": "node-a", "host": {"cpu_model": "simulated CPU box A (this host)"}}),
    "node-b": ({"devicebench": 1, "devicebench.device.cpu": 1},
               {"name": "node-b", "host": {"cpu_model": "simulated CPU box B (this host)"},
                "without": ["torch"]}),
    "h200": ({"devicebench": 1, "devicebench.device.cpu": 1, "devicebench.device.gpu:0": 1},
             {"name": "h200", "profile": "h200"}),
}


def start_cluster():
    """Three nodes, one per machine above (the first is the head, the user's machine)."""
    from ray.cluster_utils import Cluster

    (res, sim), *rest = NODES.values()
    env = {"DEVICEBENCH_FLEET_SIMULATE": json.dumps(sim)}
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": res, "env_vars": env})
    for res, sim in rest:
        cluster.add_node(num_cpus=1, resources=res,
                         env_vars={"DEVICEBENCH_FLEET_SIMULATE": json.dumps(sim)})
    cluster.wait_for_nodes()
    return cluster


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    workload = args[0] if args else "seed-rnn"
    budget = args[1] if len(args) > 1 else "20"
    db = Path(tempfile.mkdtemp(prefix="fleet-demo-")) / "fleet.db"
    cluster = start_cluster()
    try:
        cmd = ["devicebench", "fleet", "advise", workload, "--budget", budget,
               "--address", cluster.address, "--db", str(db)]
        t0 = time.monotonic()
        subprocess.run(cmd, check=False)
        print(f"fleet advise: {time.monotonic() - t0:.1f} s wall (db {db})")
        if "--sequential" in sys.argv:
            t0 = time.monotonic()
            for name in NODES:
                subprocess.run(cmd + ["--node", name], check=False,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            print(f"the same advise on each machine in turn: {time.monotonic() - t0:.1f} s")
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
