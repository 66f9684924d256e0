"""The Ray seam on the user's machine: import Ray, connect, list the nodes, start a task
pinned to one node. The only module of the package that touches Ray's API."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from devicebench.errors import InputError
from devicebench.fleet.resources import MARKER, advertised_devices, device_resource

INSTALL = "pip install 'devicebench[ray]'"


def import_ray():
    """Ray, or an InputError (exit 2) saying how to install it."""
    try:
        import ray
    except ImportError:
        raise InputError("`devicebench fleet` runs on a Ray cluster, and Ray is not installed",
                         fix=INSTALL) from None
    return ray


@dataclass(frozen=True)
class FleetNode:
    """A live node of the cluster, as Ray lists it."""

    node_id: str
    ip: str
    resources: dict[str, float] = field(default_factory=dict)
    is_driver: bool = False  # the node the user's command runs on

    @property
    def short_id(self) -> str:
        return self.node_id[:8]

    @property
    def devices(self) -> list[str]:
        """The devices it advertises (``fleet resources``); ["cpu"] when it advertises none."""
        return advertised_devices(self.resources) or ["cpu"]

    @property
    def advertises(self) -> bool:
        return MARKER in self.resources


def _unreachable(where: str, timeout: float = 5.0) -> str:
    """Why nothing answers at ``host:port`` within ``timeout`` ("" when something does):
    Ray itself retries an absent cluster for minutes, printing as it goes."""
    import socket

    host, sep, port = where.rpartition(":")
    if where == "auto" or where.startswith("ray://") or not sep or not port.isdigit():
        return ""
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout).close()
    except OSError as exc:
        return exc.strerror or str(exc) or type(exc).__name__
    return ""


def connect(address: str | None) -> Any:
    """Connect to the cluster at ``address`` (None: ``$RAY_ADDRESS``, else the local one).

    Raises:
        InputError: Ray is missing, or no cluster answers there (one line, exit 2).
    """
    ray = import_ray()
    if ray.is_initialized():
        return ray
    where = address or os.environ.get("RAY_ADDRESS") or "auto"
    fix = ("start one (`ray start --head --resources \"$(devicebench fleet resources)\"`) "
           "or pass --address HOST:6379")
    why = _unreachable(where)
    if why:
        raise InputError(f"cannot reach a Ray cluster at {where}: {why}",
                         why="fleet runs each node's share on a Ray cluster", fix=fix)
    try:
        ray.init(address=where, include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR", configure_logging=True)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"cannot reach a Ray cluster at {where}: {first}",
                         why="fleet runs each node's share on a Ray cluster",
                         fix=fix) from None
    return ray


def live_nodes(ray) -> list[FleetNode]:
    """The cluster's live nodes, the user's own first."""
    me = ray.get_runtime_context().get_node_id()
    nodes = [FleetNode(n["NodeID"], n.get("NodeManagerAddress", ""),
                       {k: float(v) for k, v in n.get("Resources", {}).items()},
                       n["NodeID"] == me)
             for n in ray.nodes() if n.get("Alive")]
    return sorted(nodes, key=lambda n: (not n.is_driver, n.node_id))


def on_node(ray, fn, node: FleetNode, *, hold_devices: bool = False, **options: Any):
    """``fn`` as a Ray task pinned to ``node`` (never retried elsewhere: a result must be
    that node's). ``hold_devices``: the task holds each device resource the node
    advertises, so no other fleet job measures on them meanwhile, and all its Ray GPUs
    (older Ray set ``CUDA_VISIBLE_DEVICES=""`` for a task asking for none; Ray 2.60 reads
    ``RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO``, off by default, in
    ``ray/_private/utils.py:set_visible_accelerator_ids``)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    resources: dict[str, float] = {}
    gpus = 0.0
    if hold_devices:
        resources = {device_resource(d): 1.0 for d in advertised_devices(node.resources)}
        gpus = node.resources.get("GPU", 0.0)
    return ray.remote(fn).options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
        num_cpus=0, num_gpus=gpus, resources=resources, max_retries=0,
        retry_exceptions=False, **options)


def failure_line(exc: BaseException) -> str:
    """One line for a Ray failure on a node: what Ray said, or the node's own error."""
    ray = import_ray()
    if isinstance(exc, ray.exceptions.NodeDiedError | ray.exceptions.WorkerCrashedError):
        return "the node died or left the cluster mid-run"
    if isinstance(exc, ray.exceptions.TaskCancelledError):
        return "cancelled"
    text = str(exc)
    if "No module named 'devicebench'" in text:
        return ("devicebench is not installed there (its Ray workers cannot import it): "
                f"{INSTALL} on that node")
    cause = getattr(exc, "cause", None)
    if cause is not None and not isinstance(cause, ray.exceptions.RayError):
        return f"{type(cause).__name__}: {cause}".splitlines()[0]
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(exc).__name__
