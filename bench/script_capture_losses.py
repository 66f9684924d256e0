"""The captured model's first steps against a plain run of the script's first steps.

    python bench/script_capture_losses.py train.py [--steps 20] [-- ARGS]

Captures the script's first fit() (as `advise train.py` does), then trains N steps of
batch-size slices (train_on_batch, in order) twice, each in a fresh process on the
script's own backend: (a) the captured workload as every advise worker loads it, (b) the
script itself run plainly up to its fit(), its model set to the captured initial weights
and trained on the arrays the script passes to fit(). Prints both loss lists, the largest
relative difference (same weights, same batches: float32 rounding), and whether the plain
run's own initial weights were the captured ones (true for a script seeded with
keras.utils.set_random_seed; np.random.seed + tf.random.set_seed leave Keras 3's
initializers unseeded — they draw from Python's random — so two plain runs of such a
script start from different weights: why devicebench captures the weights as arrays).
Inputs and targets may be arrays or dicts/lists of arrays (named or several inputs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

WORKER = """
import json, sys, keras
from devicebench.workloads.arrays import take
from devicebench.workloads.loader import load_workload
w = load_workload({ref!r}); m = w.build_model(keras)
m.compile(loss=w.loss, optimizer=w.optimizer(keras)); d = w.make_data(0); b = w.batch_size
first = lambda out: out[0] if isinstance(out, (list, tuple)) else out
print("LOSSES", json.dumps([float(first(m.train_on_batch(take(d.x, i*b, (i+1)*b),
                                                         take(d.y, i*b, (i+1)*b))))
                            for i in range({n})]))
"""
PLAIN = """
import json, runpy, sys, numpy as np, keras
from devicebench.workloads.arrays import take
npz = np.load({weights!r}); b = {batch}
def fit(self, x, y=None, **kw):
    own = self.get_weights() if self.built else []
    print("OWN", json.dumps(len(own) == len(npz.files) and all(
        np.array_equal(w, npz[f"arr_{{i}}"]) for i, w in enumerate(own))))
    self.set_weights([npz[f"arr_{{i}}"] for i in range(len(npz.files))])
    first = lambda out: out[0] if isinstance(out, (list, tuple)) else out
    print("LOSSES", json.dumps([float(first(self.train_on_batch(take(x, i*b, (i+1)*b),
                                                                take(y, i*b, (i+1)*b))))
                                for i in range({n})]))
    sys.exit(0)
keras.Model.fit = fit
sys.argv = [{script!r}, *{args!r}]
runpy.run_path({script!r}, run_name="__main__")
"""


def _losses(code: str, env: dict[str, str]) -> tuple[list[float], str]:
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=600, check=True)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("LOSSES ")][-1]
    own = [ln[4:] for ln in out.stdout.splitlines() if ln.startswith("OWN ")]
    return json.loads(line[7:]), (own[-1] if own else "")


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser()
    p.add_argument("script")
    p.add_argument("--steps", type=int, default=20)
    a = p.parse_args(argv)
    from devicebench.workloads.script import capture_script

    cap = capture_script(a.script, extra)
    env = dict(os.environ, KERAS_BACKEND=cap.info["keras_backend"])
    got, _ = _losses(WORKER.format(ref=cap.ref, n=a.steps), env)
    want, own = _losses(PLAIN.format(weights=str(cap.directory / "weights.npz"),
                                batch=cap.info["batch_size"], n=a.steps,
                                script=os.path.abspath(a.script), args=extra), env)
    rel = max(abs(g - w) / max(abs(w), 1e-12) for g, w in zip(got, want, strict=True))
    print(f"{a.script}: measured fit() {cap.fit_site}; {cap.figures()}")
    print(f"captured: {[f'{v:.6g}' for v in got[:5]]} ... {got[-1]:.6g}")
    print(f"plain:    {[f'{v:.6g}' for v in want[:5]]} ... {want[-1]:.6g}")
    print(f"max relative difference over {a.steps} steps: {rel:.2e}")
    print(f"the plain run's own initial weights equal the captured ones: {own}")


if __name__ == "__main__":
    main()
