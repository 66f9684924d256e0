"""``devicebench ops``: the op micro-benchmark (seed 003 done right)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from devicebench.cli import DB_HELP, app, user_errors

OPS_HELP = "\n\n".join([
    "Time single ops (multiply, add, matmul, conv2d, reduce_sum, softmax) across sizes, "
    "backends, devices and loop styles, and say where the accelerator starts to win.",
    "Modes: naive (the usual benchmark loop, no sync: what it really measured), eager (the loop "
    "with a device sync), compiled (one tf.function / jax.jit / traced call per op), "
    "in-graph (N ops chained inside one compiled call: the per-op cost without dispatch). "
    "Each backend runs in its own worker process; numpy is the CPU reference; CPU runs "
    "use all cores unless --threads says otherwise.",
    "Per op and path it fits t(n) = overhead + work/rate: the dispatch overhead, the "
    "achieved GFLOP/s or GB/s and the % of the measured matmul peak; the speed-up over "
    "the reference per size with a 95% CI, and the crossover size. Results go to the "
    "SQLite store.",
    "Sizes are n for n×n tensors: --sizes 2,64,1024 (a list), 2..4096 (powers of 2, the "
    "default) or 2..4096:4 (×4 steps). Lists are comma-separated.",
])


def _split(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    return tuple(v.strip() for v in value.split(",") if v.strip())


@app.command("ops", help=OPS_HELP)
@user_errors
def ops(
    op: str | None = typer.Option(None, "--ops", help="Ops (default: all six)."),
    mode: str | None = typer.Option(None, "--modes",
                                    help="naive,eager,compiled,in-graph (default: all)."),
    backend: str | None = typer.Option(None, "--backend", help="tensorflow,jax,torch,numpy "
                                       "(default: every installed one, and numpy)."),
    device: str | None = typer.Option(None, "--device", help="cpu, gpu:N, mps "
                                      "(default: every device this machine has)."),
    sizes: str | None = typer.Option(None, "--sizes", help="2,64,1024 | 2..4096 | 2..4096:4"),
    threads: int | None = typer.Option(None, "--threads",
                                       help="Intra-op threads (default: all cores)."),
    chain: int = typer.Option(16, "--chain", help="Ops chained in in-graph mode."),
    block_ms: float = typer.Option(5.0, "--block-ms",
                                   help="A timed block lasts at least this long."),
    blocks: int = typer.Option(5, "--blocks", help="Timed blocks per point."),
    max_call: float = typer.Option(0.25, "--max-call", help="Skip sizes whose single call "
                                   "would take longer (seconds)."),
    torch_compile: bool = typer.Option(False, "--torch-compile", help="Use torch.compile "
                                       "for torch's compiled modes (default: torch.jit.trace"
                                       "; torch.compile takes 5-30 s per op on a CPU)."),
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds allowed per worker."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print the results as JSON."),
) -> None:
    from devicebench.api import ops as run_ops_sweep
    from devicebench.ops.spec import parse_sizes

    size_list = parse_sizes(sizes) if sizes is not None else None  # bad input: before work
    progress = None if json_out else _Progress()
    try:
        out = run_ops_sweep(
            ops=_split(op), modes=_split(mode), backends=list(_split(backend) or ()),
            devices=list(_split(device) or ()), sizes=size_list, threads=threads,
            chain=chain, block_seconds=block_ms / 1000, blocks=blocks,
            max_call_seconds=max_call, torch_compile=torch_compile, timeout=timeout, db=db,
            on_start=progress.start if progress else None, argv=sys.argv[1:])
    finally:
        if progress:
            progress.stop()
    results = out.results
    if json_out:
        print(json.dumps(out.to_dict(), indent=2, default=str))
    else:
        from devicebench.report.ops import render_ops

        render_ops(out.analysis)
    if all(r.status != "ok" for r in results):
        raise typer.Exit(1)
    points = [pt for r in results for pt in r.points]
    if not any(pt.status == "ok" for pt in points):  # workers ran, nothing was measured
        failed = sum(pt.status == "error" for pt in points)
        print(f"devicebench: no op was measured ({failed} of {len(points)} points failed, "
              "the others skipped); the table above says why", file=sys.stderr)
        raise typer.Exit(1)


class _Progress:
    """A spinner naming the worker being measured (stderr, so --json stays clean)."""

    def __init__(self) -> None:
        from devicebench.report.console import make_console

        self.status = make_console(stderr=True).status("planning")
        self.status.start()

    def start(self, config, index: int, total: int) -> None:
        self.status.update(f"measuring {config.label} ({index + 1} of {total}): import, "
                           "then every op, size and mode")

    def stop(self) -> None:
        self.status.stop()
