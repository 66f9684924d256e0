"""Run at the start of a Python process launched by ``devicebench monitor``.

Arms the training monitor (``devicebench.monitor.attach.install_from_env``), then runs
the ``sitecustomize`` this one shadows, if there is one. It must never stop the user's
script: every failure is one line on stderr.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _arm() -> None:
    try:
        from devicebench.monitor.attach import install_from_env
    except ImportError:
        extra = os.environ.get("DEVICEBENCH_MONITOR_PATH", "")
        if not extra:
            raise
        sys.path.append(extra)  # devicebench not installed in this interpreter
        from devicebench.monitor.attach import install_from_env
    install_from_env()


def _chain() -> None:
    """Import the next ``sitecustomize`` on the path (the one ours shadows)."""
    import importlib

    me = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    try:
        importlib.import_module("sitecustomize")
    except ImportError:
        pass
    finally:
        sys.path[:] = saved
        if me is not None and "sitecustomize" not in sys.modules:
            sys.modules["sitecustomize"] = me


try:
    _arm()
except Exception as exc:  # noqa: BLE001
    print(f"devicebench monitor: not attached ({type(exc).__name__}: {exc})", file=sys.stderr)
_chain()
