"""Are the dispatch overheads `devicebench ops` reports right?

For TensorFlow and JAX, one process each (started with the environment `ops` gives its
workers) alternates an independent `timeit` of the 2×2 calls — TF eager
`tf.multiply(x, y)`, a `tf.function` call, a `jax.jit` call with `block_until_ready` —
with the sweep the `ops` worker runs (`run_config`: multiply, eager and compiled, sizes
2..256) followed by the `ops` analysis: timeit, sweep, timeit, sweep, ..., timeit.
Same process, so the comparison is not blurred by process-to-process variation (which
is 10-30% for a dispatch on this VM); interleaved, so load from other processes hits
both. Prints the overhead `ops` fits (t = overhead + work/rate), its 2×2 median and the
timeit figure (medians over the rounds) and their ratio. Target: within 20%.

Usage: python bench/ops_overhead.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import timeit

from devicebench.ops.runner import ops_env
from devicebench.ops.spec import OpsConfig, parse_sizes

CALLS = {"tensorflow eager": "TF eager tf.multiply", "tensorflow compiled": "tf.function call",
         "jax compiled": "jax.jit call"}


def _per_call(stmt: str, env: dict) -> float:
    t = timeit.Timer(stmt, globals=env)
    n, _ = t.autorange()
    return statistics.median(s / n for s in t.repeat(repeat=7, number=n))


def _timeit(backend: str) -> dict[str, float]:
    import numpy as np

    rng = np.random.default_rng(2)
    a, b = (rng.uniform(0.5, 1.5, (2, 2)).astype(np.float32) for _ in range(2))
    if backend == "tensorflow":
        import tensorflow as tf

        x, y = tf.constant(a), tf.constant(b)
        f = tf.function(lambda p, q: p * q)
        f(x, y).numpy()
        env = {"tf": tf, "x": x, "y": y, "f": f}
        return {"tensorflow eager": _per_call("tf.multiply(x, y)", env),
                "tensorflow compiled": _per_call("f(x, y)", env)}
    import jax
    import jax.numpy as jnp

    x, y = jnp.asarray(a), jnp.asarray(b)
    g = jax.jit(lambda p, q: p * q)
    g(x, y).block_until_ready()
    return {"jax compiled": _per_call("g(x, y).block_until_ready()", {"g": g, "x": x, "y": y})}


def child(backend: str, rounds: int) -> None:
    """Runs inside the backend's process: timeit and sweeps, alternating."""
    from devicebench.ops.analysis import analyse
    from devicebench.ops.worker import run_config

    config = OpsConfig(backend, ops=("multiply",), modes=("eager", "compiled"),
                       sizes=parse_sizes("2..256"))
    timeits, sweeps = [_timeit(backend)], []
    for _ in range(rounds):
        (op,) = analyse([run_config(config)]).ops
        sweeps.append({f"{p.backend} {p.mode}": (p.fit.overhead, p.points[0].median)
                       for p in op.paths if p.fit is not None})
        timeits.append(_timeit(backend))
    print(json.dumps({"timeit": timeits, "ops": sweeps}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="sweeps, each between two timeits")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.rounds)
        return
    timeits: list[dict[str, float]] = []
    sweeps: list[dict[str, list[float]]] = []
    for backend in ("tensorflow", "jax"):
        proc = subprocess.run([sys.executable, __file__, "--child", backend,
                               "--rounds", str(args.rounds)], capture_output=True, text=True,
                              env=ops_env(OpsConfig(backend)), timeout=900, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"{backend} failed: {proc.stderr[-2000:]}")
        doc = json.loads(proc.stdout.strip().splitlines()[-1])
        timeits += doc["timeit"]
        sweeps += doc["ops"]
    print(f"{args.rounds} `ops` sweeps interleaved with {args.rounds + 1} timeit runs per "
          "backend, same process; medians over rounds (per-round values in brackets), µs "
          "per call")
    print(f"{'call':22s} {'ops overhead':>13s} {'ops 2x2':>9s} {'timeit':>8s} {'ratio':>6s}"
          "  target ±20%")
    worst = 0.0
    for key, name in CALLS.items():
        fitted = [s[key][0] for s in sweeps if key in s]
        small = [s[key][1] for s in sweeps if key in s]
        ref = [t[key] for t in timeits if key in t]
        ratio = statistics.median(fitted) / statistics.median(ref)
        worst = max(worst, abs(ratio - 1))
        print(f"{name:22s} {statistics.median(fitted) * 1e6:13.2f} "
              f"{statistics.median(small) * 1e6:9.2f} {statistics.median(ref) * 1e6:8.2f} "
              f"{ratio:6.2f}  {'within' if abs(ratio - 1) <= 0.2 else 'OUTSIDE'}")
        print(f"{'':22s} ops [{', '.join(f'{v * 1e6:.1f}' for v in fitted)}] "
              f"timeit [{', '.join(f'{v * 1e6:.1f}' for v in ref)}]")
    print(f"largest deviation {worst:.0%}: {'within' if worst <= 0.2 else 'OUTSIDE'} the "
          "±20% target")


if __name__ == "__main__":
    main()
