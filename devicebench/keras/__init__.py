"""The training monitor's former import path, kept so that scripts written against it
(``from devicebench.keras import TrainingMonitor``) keep working; the monitor lives in
:mod:`devicebench.monitor`."""

from devicebench.monitor import *  # noqa: F403
from devicebench.monitor import __all__  # noqa: F401
