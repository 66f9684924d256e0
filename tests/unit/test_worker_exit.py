"""A worker ends with :func:`devicebench.launch.child.exit_now` once its last reply is
sent: no interpreter teardown (seconds with TensorFlow or JAX loaded), and nothing it
wrote is lost."""

from __future__ import annotations

import subprocess
import sys

CHILD = """
import atexit, sys
from devicebench.launch.child import exit_now
atexit.register(lambda: print("teardown ran", file=sys.stderr))
print("reply-less output", end="")      # buffered: no newline, no flush
print("an error line", file=sys.stderr, end="")
exit_now(3)
"""


def test_exit_now_keeps_the_code_and_the_buffered_output_and_skips_the_teardown():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 3
    assert out.stdout == "reply-less output"  # flushed although stdout is a pipe
    assert out.stderr == "an error line"  # and no atexit handler ran: no teardown


def test_every_worker_module_ends_through_exit_now():
    import inspect

    from devicebench.backends import probe_worker
    from devicebench.ops import worker as ops_worker
    from devicebench.trials import worker as trial_worker
    from devicebench.workloads import check_worker

    for module in (trial_worker, ops_worker, probe_worker, check_worker):
        tail = inspect.getsource(module).rsplit('if __name__ == "__main__":', 1)[1]
        assert "exit_now(main(" in tail and "sys.exit" not in tail, module.__name__
