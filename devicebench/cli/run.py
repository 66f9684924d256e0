"""``devicebench run`` and ``devicebench workloads``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from devicebench.cli import DB_HELP, app, user_errors
from devicebench.cli.calls import calls
from devicebench.errors import SpecError
from devicebench.jobs import default_of
from devicebench.jobs.run import run as run_job
from devicebench.schema import envelope
from devicebench.validate import LIMITS

RUN_HELP = """Measure training speed per backend, device and configuration.

Every trial runs in its own worker process (backend, device visibility and thread pools
are process-global); trials of a workload are measured in interleaved rounds and
compared with the reference (TensorFlow on the CPU in float32 when it is among them),
from the same initial weights, so the loss verdict says whether the faster run trains
the same model. Results go to a SQLite file as each trial finishes.

Lists are comma-separated: --backend tensorflow,jax.
"""


def _split(value: str | None, name: str = "") -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:  # `--backend ""` is not "every backend"
        raise SpecError(f"--{name or 'option'} is empty", fix=f"leave --{name} out for the "
                        "default, or name at least one value")
    return items


def _ints(value: str | None, name: str) -> list[int | None] | None:
    items = _split(value, name)
    if items is None:
        return None
    out: list[int | None] = []
    for item in items:
        if item == "default":
            out.append(None)
            continue
        try:
            n = int(item)
        except ValueError:
            raise SpecError(f"{name} must be a positive integer, got {item!r}",
                            fix=f"e.g. --{name} 32 or --{name} 32,64") from None
        limit = LIMITS[name.replace("-", "_")]
        if not limit.lo <= n <= (limit.hi or n):
            raise SpecError(f"{name} must be from {limit.lo:,} to {limit.hi:,}, got {n}",
                            fix=f"e.g. --{name} 32")
        out.append(n)
    return out


@app.command(help=RUN_HELP)
@user_errors
@calls(run_job, cli_only=("json_out",),
       renamed={"backend": "backends", "device": "devices", "precision": "precisions",
                "jit": "jits", "batch_size": "batch_sizes", "pipeline": "pipelines",
                "memory_limit": "memory_limit_mib"})
def run(
    workloads: list[str] = typer.Argument(
        None, help="Built-in workload names (default: seed-rnn), path/file.py:function "
        "or train.py."),
    backend: str | None = typer.Option(None, "--backend", help="tensorflow,jax,torch "
                                       "(default: every installed one)."),
    device: str | None = typer.Option(None, "--device", help="cpu, gpu:N, mps "
                                      "(default: every device this machine has but mps)."),
    precision: str | None = typer.Option(None, "--precision",
                                         help="float32, mixed_float16, mixed_bfloat16, "
                                         "tf32 (NVIDIA, Ampere and newer)."),
    jit: str | None = typer.Option(None, "--jit", help="auto, on, off."),
    batch_size: str | None = typer.Option(None, "--batch-size",
                                          help="Batch sizes (default: the workload's)."),
    pipeline: str | None = typer.Option(None, "--pipeline", help="arrays, tf.data."),
    threads: str | None = typer.Option(None, "--threads",
                                       help="Intra-op threads (default: all cores)."),
    steps_per_execution: int = typer.Option(default_of(run_job, "steps_per_execution"),
                                            "--steps-per-execution",
                                            min=LIMITS["steps_per_execution"].lo,
                                            max=LIMITS["steps_per_execution"].hi),
    seed: int | None = typer.Option(None, "--seed", help="Data and weight seed.",
                                    min=LIMITS["seed"].lo, max=LIMITS["seed"].hi),
    rounds: int | None = typer.Option(None, "--rounds", min=LIMITS["rounds"].lo,
                                      max=LIMITS["rounds"].hi,
                                      help="Exactly N interleaved rounds (default: 5 to 30, "
                                           "until the CI is within ±3% or the budget ends)."),
    budget: float = typer.Option(default_of(run_job, "budget"), "--budget", min=LIMITS["budget"].lo,
                                 help="Seconds of measuring per workload, after warm-up."),
    equivalence_steps: int = typer.Option(default_of(run_job, "equivalence_steps"),
                                          "--equivalence-steps",
                                          min=LIMITS["equivalence_steps"].lo,
                                          max=LIMITS["equivalence_steps"].hi,
                                          help="Steps whose losses are compared."),
    timeout: float = typer.Option(default_of(run_job, "timeout"), "--timeout",
                                  min=LIMITS["timeout"].lo,
                                  help="Seconds allowed for a trial's setup or one block."),
    memory_limit: int | None = typer.Option(
        None, "--memory-limit", min=LIMITS["memory_limit_mib"].lo, metavar="MiB",
        help="Resident-memory limit per worker, its framework included (TensorFlow alone "
             "takes ~0.5 GB): the worker is killed there and the trial recorded as oom "
             "with the peak seen."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
    resume: bool = typer.Option(False, "--resume", help="Skip trials already measured "
                                "(same spec, same machine) and show their stored results."),
    json_out: bool = typer.Option(False, "--json", help="Print results as JSON."),
) -> None:
    from devicebench.cli.progress import progress

    with progress(not json_out) as on_progress:
        outcome = run_job(
            workloads or None, backends=_split(backend, "backend"),
            devices=_split(device, "device"), precisions=_split(precision, "precision"),
            jits=_split(jit, "jit"), batch_sizes=_ints(batch_size, "batch-size"),
            pipelines=_split(pipeline, "pipeline"), threads=_ints(threads, "threads"),
            steps_per_execution=steps_per_execution, seed=seed, rounds=rounds,
            budget=budget, equivalence_steps=equivalence_steps, timeout=timeout,
            memory_limit_mib=memory_limit, resume=resume, db=db, argv=sys.argv[1:],
            on_progress=on_progress)
    if json_out:
        print(json.dumps(outcome.to_dict(), indent=2, default=str))
    else:
        from devicebench.report.run import render_comparison

        render_comparison(outcome.rows, notes=outcome.notes)
    # Exit status: 0 every trial ok, 1 any trial not ok (said on stderr with the count;
    # the others' results stand) or a result the store would not take (kept aside), 2 bad
    # input before any trial, 130 interrupted.
    for line in outcome.store_problems:  # measured, shown above, not (yet) in the store
        print(f"devicebench: {line}", file=sys.stderr)
    failed = [r.status for r in outcome.failed]
    if outcome.store_problems and not failed:
        raise typer.Exit(1)
    if failed:
        counts = ", ".join(f"{s} {failed.count(s)}" for s in dict.fromkeys(failed))
        print(f"devicebench: {len(failed)} of {len(outcome.rows)} trials did not end ok "
              f"({counts});"
              " the table above says why, and every result is stored", file=sys.stderr)
        raise typer.Exit(1)


@app.command("workloads", help="List the built-in workloads with their parameters.")
@user_errors
def list_workloads(json_out: bool = typer.Option(False, "--json")) -> None:
    from devicebench.workloads import BUILTIN_WORKLOADS

    rows = []
    for w in BUILTIN_WORKLOADS.values():
        rows.append({"name": w.name, "description": w.description, "batch_size": w.batch_size,
                     "flops_per_step": w.flops_per_step(), "params": w.params})
    if json_out:
        print(json.dumps(envelope("workloads", {"workloads": rows}), indent=2, default=str))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Built-in workloads", title_justify="left")
    for col in ("name", "description", "batch", "FLOPs/step (training)", "parameters"):
        table.add_column(col, overflow="fold")
    for r in rows:
        flops = f"{r['flops_per_step']:.3g}" if r["flops_per_step"] else "unknown"
        params = ", ".join(f"{k}={v}" for k, v in r["params"].items())
        table.add_row(r["name"], r["description"], str(r["batch_size"]), flops, params)
    Console().print(table)
