"""What a node advertises to Ray: ``ray start --resources`` from the doctor's probe.

A trial needing a device runs only where that device is: each device is a custom
resource of quantity 1 (``devicebench.device.gpu:0``), which a fleet task holds while its
trials run on that node, so two fleet jobs never measure on one device at once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from devicebench.env.snapshot import EnvSnapshot
from devicebench.trials.plan import machine_devices

MARKER = "devicebench"  # a node started with `fleet resources` has it
DEVICE_PREFIX = "devicebench.device."


def device_resource(device: str) -> str:
    """The Ray resource that names ``device`` (``cpu``, ``gpu:0``, ``mps``)."""
    return DEVICE_PREFIX + device


def node_resources(snapshot: EnvSnapshot) -> dict[str, float]:
    """The custom resources for ``ray start --resources`` on the machine ``snapshot``
    describes: the marker and one resource per device.

    Example:
        >>> from devicebench.env.snapshot import HostInfo
        >>> node_resources(EnvSnapshot(host=HostInfo(os="Linux")))
        {'devicebench': 1.0, 'devicebench.device.cpu': 1.0}
    """
    res = {MARKER: 1.0}
    res.update({device_resource(d): 1.0 for d in machine_devices(snapshot)})
    return res


def resources_json(snapshot: EnvSnapshot) -> str:
    """:func:`node_resources` as the JSON ``ray start --resources`` takes."""
    return json.dumps(node_resources(snapshot), separators=(",", ":"))


def advertised_devices(resources: Mapping[str, float]) -> list[str]:
    """The devices a node advertises (in its Ray resources), in their own order."""
    return [k[len(DEVICE_PREFIX):] for k in resources if k.startswith(DEVICE_PREFIX)]
