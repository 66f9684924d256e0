"""``devicebench ops``: the op micro-benchmark (seed 003 done right)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from devicebench.cli import DB_HELP, app, user_errors
from devicebench.cli.calls import calls
from devicebench.jobs import default_of
from devicebench.jobs.ops import ops as ops_job

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
@calls(ops_job, cli_only=("json_out",),
       renamed={"op": "ops", "mode": "modes", "backend": "backends", "device": "devices",
                "max_call": "max_call_seconds"},
       convert={"block_ms": ("block_seconds", lambda ms: ms / 1000)})
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
    chain: int = typer.Option(default_of(ops_job, "chain"), "--chain",
                              help="Ops chained in in-graph mode."),
    block_ms: float = typer.Option(default_of(ops_job, "block_seconds") * 1000, "--block-ms",
                                   help="A timed block lasts at least this long."),
    blocks: int = typer.Option(default_of(ops_job, "blocks"), "--blocks",
                               help="Timed blocks per point."),
    max_call: float = typer.Option(default_of(ops_job, "max_call_seconds"), "--max-call",
                                   help="Skip sizes whose single call would take longer "
                                   "(seconds)."),
    torch_compile: bool = typer.Option(False, "--torch-compile", help="Use torch.compile "
                                       "for torch's compiled modes (default: torch.jit.trace"
                                       "; torch.compile takes 5-30 s per op on a CPU)."),
    timeout: float = typer.Option(default_of(ops_job, "timeout"), "--timeout",
                                  help="Seconds allowed per worker."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print the results as JSON."),
) -> None:
    from devicebench.cli.progress import progress

    with progress(not json_out) as on_progress:
        out = ops_job(
            ops=_split(op), modes=_split(mode), backends=list(_split(backend) or ()),
            devices=list(_split(device) or ()), sizes=sizes, threads=threads,
            chain=chain, block_seconds=block_ms / 1000, blocks=blocks,
            max_call_seconds=max_call, torch_compile=torch_compile, timeout=timeout, db=db,
            on_progress=on_progress, argv=sys.argv[1:])
    if json_out:
        print(json.dumps(out.to_dict(), indent=2, default=str))
    else:
        from devicebench.report.ops import render_ops

        render_ops(out.analysis)
    if out.problem is not None:
        if any(r.status == "ok" for r in out.results):  # workers ran, nothing measured
            print(f"devicebench: {out.problem}", file=sys.stderr)
        raise typer.Exit(1)
