"""The monitor's wrapper forwards a signal that one of its own other threads received.

Only the wrapper's main thread blocks SIGINT/SIGTERM while it waits in ``sigtimedwait``;
a process-directed signal that arrives between two waits goes to another thread of the
process (numpy's OpenBLAS starts one in every process that imports it), and the
wrapper then raised KeyboardInterrupt and left the script training without the signal
(seen once as a 60 s hang of the monitor's SIGINT test on a loaded machine). Here the
stray delivery is made certain: ``pthread_kill`` sends the signal to a helper thread."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import os, signal, sys, threading, time
from devicebench.launch.forward import run_forwarding_signals

ready, signum = sys.argv[1], int(sys.argv[2])
child = [sys.executable, "-c",
         "import signal, sys, time\\n"
         "for s in (signal.SIGINT, signal.SIGTERM):\\n"
         "    signal.signal(s, lambda n, f: sys.exit(40 + n))\\n"
         "open(sys.argv[1], 'w').close()\\n"
         "time.sleep(20)\\n", ready]

def stray():  # a thread that does not block the signals, as a library's would
    while not os.path.exists(ready):
        time.sleep(0.01)
    signal.pthread_kill(threading.get_ident(), signum)

threading.Thread(target=stray, daemon=True).start()
print("child exit", run_forwarding_signals(child, os.environ))
"""


@pytest.mark.skipif(not hasattr(signal, "sigtimedwait"), reason="Linux's forwarding path")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_delivered_to_another_thread_still_reaches_the_child(
        tmp_path: Path, signum: int) -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "ready"), str(signum)],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
                          start_new_session=True)  # no controlling terminal: a kill's
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == f"child exit {40 + signum}"
