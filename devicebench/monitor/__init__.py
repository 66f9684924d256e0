"""The training monitor: a Keras 3 callback for the TensorFlow, JAX and torch backends.

``TrainingMonitor`` needs Keras; it is imported on first use, so
``import devicebench.monitor`` (and the pure bookkeeping in :mod:`devicebench.monitor.core`)
works without any framework.

Example:
    >>> from devicebench.monitor import TrainingMonitor          # doctest: +SKIP
    >>> model.fit(x, y, epochs=3, callbacks=[TrainingMonitor()])  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

__all__ = ["TrainingMonitor", "install_from_env", "ENV_VAR"]

ENV_VAR = "DEVICEBENCH_MONITOR"
# A file `devicebench monitor` creates: each monitored fit, in any process of the script,
# adds a line, so the parent can say when nothing was monitored.
FITS_ENV_VAR = "DEVICEBENCH_MONITOR_FITS"


def __getattr__(name: str) -> Any:
    if name == "TrainingMonitor":
        from devicebench.monitor.callback import TrainingMonitor

        return TrainingMonitor
    if name == "install_from_env":
        from devicebench.monitor.attach import install_from_env

        return install_from_env
    raise AttributeError(f"module 'devicebench.monitor' has no attribute {name!r}")
