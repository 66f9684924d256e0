"""A simulated node's own machine identity (tests and demos on one host).

On a real cluster every node probes its own machine, so its fingerprint is its own.
Several Ray nodes on one host (``ray.cluster_utils.Cluster``) would all probe the same
machine; a node started with ``DEVICEBENCH_FLEET_SIMULATE`` in its environment (the
raylet's ``env_vars``, inherited by its workers) reports another identity instead — a
seam on the environment snapshot, as ``doctor --snapshot`` is:

- ``{"name": "node-b", "host": {"cpu_model": "..."}, "without": ["jax"]}``: this host's
  snapshot with host fields replaced and distributions removed (the advisor then plans
  only what is left); the trials are real, measured on this host;
- ``{"name": "h200", "profile": "h200"}``: the node *is* a recorded machine profile
  (``devicebench/profiles``): its snapshot is the profile's, ``advise`` there is a replay
  of the profile on its virtual clock (``profile replay``), never invented figures;
- ``"devicebench_version"``: the version the node reports (a node with another release).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from devicebench.backends import FRAMEWORK_DISTRIBUTIONS
from devicebench.env.snapshot import EnvSnapshot

SIMULATE_ENV = "DEVICEBENCH_FLEET_SIMULATE"
# Installed with a framework and gone with it (the fingerprint hashes them too).
COMPANIONS = {"jax": ("jaxlib", "jax-metal"), "tensorflow": ("tensorflow-metal",)}


@dataclass(frozen=True)
class NodeSimulation:
    """What a simulated node says it is."""

    name: str = ""
    profile: str = ""
    host: dict[str, Any] = field(default_factory=dict)
    without: tuple[str, ...] = ()
    devicebench_version: str = ""


def read_simulation(environ: Mapping[str, str] = os.environ) -> NodeSimulation | None:
    """The node's simulation from its environment, or None (a real node).

    Raises:
        ValueError: the variable is not the JSON object this module describes.
    """
    text = environ.get(SIMULATE_ENV, "").strip()
    if not text:
        return None
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"{SIMULATE_ENV} must be a JSON object, got {text[:60]!r}")
    return NodeSimulation(name=str(data.get("name", "")), profile=str(data.get("profile", "")),
                          host=dict(data.get("host", {})),
                          without=tuple(data.get("without", ())),
                          devicebench_version=str(data.get("devicebench_version", "")))


def simulated_snapshot(snapshot: EnvSnapshot, sim: NodeSimulation) -> EnvSnapshot:
    """``snapshot`` as the simulated node reports it (a profile node: see
    :func:`devicebench.fleet.node.node_identity`)."""
    host = replace(snapshot.host, **sim.host) if sim.host else snapshot.host
    gone = {d for fw in sim.without
            for d in (*FRAMEWORK_DISTRIBUTIONS.get(fw, (fw,)), *COMPANIONS.get(fw, ()))}
    dists = {k: v for k, v in snapshot.distributions.items() if k not in gone}
    frameworks = {k: v for k, v in snapshot.frameworks.items() if k not in sim.without}
    return replace(snapshot, host=host, distributions=dists, frameworks=frameworks,
                   devicebench_version=sim.devicebench_version or snapshot.devicebench_version)
