"""Render doctor's snapshot and findings for the terminal or as JSON."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.text import Text

from devicebench.env.finding import SEVERITIES, Finding, sort_findings
from devicebench.env.snapshot import EnvSnapshot
from devicebench.fmt import fmt_bytes
from devicebench.report.console import make_console
from devicebench.script_check import ScriptReport

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def script_line(script: ScriptReport) -> str:
    """"Script   train.py (120 lines, read with ast, never run): 3 findings"."""
    n = len(script.findings)
    what = (f"{script.code_cells} code cells, {script.lines} lines" if script.kind == "notebook"
            else f"{script.lines} lines")
    skipped = (f"; cells {', '.join(map(str, script.skipped_cells))} are not Python and were "
               "skipped" if script.skipped_cells else "")
    return (f"  Script   {script.path} ({what}, read with ast, never run): "
            f"{n} finding{'s' if n != 1 else ''}{skipped}")


def _devices(probe) -> str:
    if probe.status != "ok":
        return "-"
    parts = []
    for d in probe.physical_devices:
        label = d.kind
        if d.description and d.kind != "CPU":
            label += f" ({d.description}"
            label += f", cc {d.compute_capability})" if d.compute_capability else ")"
        parts.append(label)
    return ", ".join(parts) or "none"


def _build(probe) -> str:
    b = probe.build
    if probe.name == "jax":
        return f"backend {b.get('default_backend', '?')}"
    if not b:
        return "-"
    if b.get("is_cuda_build"):
        text = f"CUDA {b.get('cuda_version') or '?'}"
        if b.get("cudnn_version"):
            text += f", cuDNN {b['cudnn_version']}"
        return text
    if b.get("is_rocm_build"):
        return "ROCm"
    return "CPU-only build" + (" (MPS built)" if b.get("mps_built") else "")


def render_doctor(
    snapshot: EnvSnapshot,
    findings: list[Finding],
    *,
    console: Console | None = None,
    saved_to: Path | None = None,
    from_file: Path | None = None,
    script: ScriptReport | None = None,
) -> None:
    """Print the machine summary, the frameworks table and the findings by severity."""
    con = console or make_console()
    h = snapshot.host
    source = f"snapshot {from_file}" if from_file else "this machine"
    con.print(Text.assemble(("devicebench doctor", "bold"),
                            f" — {source} ({snapshot.created_at or 'no date'})"))
    # Machine facts are plain text: "[arm64, ...]" or a path with brackets is not markup.
    plain = {"markup": False, "highlight": False}
    arch = h.machine + (f", Python built for {h.python_arch} (Rosetta)" if h.rosetta else "")
    con.print(f"  OS       {h.os_version or h.os} [{arch}]", **plain)
    cores = f"{h.cpu_cores_physical or '?'} cores / {h.cpu_cores_logical or '?'} threads"
    cpu = h.apple_chip or h.cpu_model or "unknown"
    con.print(f"  CPU      {cpu}, {cores}, RAM {fmt_bytes(h.ram_bytes)}", **plain)
    con.print(f"  Python   {h.python_version} ({h.python_implementation}) {h.python_executable}",
              **plain)
    blas = snapshot.blas
    con.print(f"  numpy    {blas.numpy_version or 'not installed'}, BLAS {blas.name or 'unknown'}",
              **plain)
    if snapshot.nvidia_smi is not None:
        smi = snapshot.nvidia_smi
        gpus = ", ".join(g.name for g in smi.gpus) or smi.error or "no GPUs listed"
        driver = f"driver {smi.driver_version or '?'} (CUDA {smi.cuda_version or '?'})"
        con.print(f"  NVIDIA   {driver}: {gpus}", **plain)
    libs = sorted(set(snapshot.system_cuda_libs) | set(snapshot.env_cuda_libs))
    libs = [n for n in libs if n.startswith(("libcudart.so.", "libcudnn.so."))]
    if libs:
        con.print(f"  CUDA libs {', '.join(libs)}", **plain)
    con.print(f"  Keras    backend {snapshot.keras_backend!r} "
              f"(KERAS_BACKEND={snapshot.env_vars.get('KERAS_BACKEND', 'unset')})", **plain)
    if snapshot.env_vars:
        env = ", ".join(f"{k}={v}" for k, v in snapshot.env_vars.items() if k != "LD_LIBRARY_PATH")
        if env:
            con.print(f"  env      {env}", **plain)

    if snapshot.frameworks:
        how = ("imported at the same time, each in its own process: import times include "
               "contention (--sequential for exact ones)" if snapshot.probes_concurrent
               else "each imported in its own process")
        con.print(f"\n[bold]Frameworks[/bold] ({how})")
    else:
        con.print("\n[bold]Frameworks[/bold]: none probed")
    # Column widths from the longest entry, always with a space between columns:
    # "torch      2.11.0+cu130 ok", never "2.11.0+cu130ok".
    name_w = max((len(n) for n in snapshot.frameworks), default=0) + 1
    ver_w = max((len(p.version) for p in snapshot.frameworks.values()), default=0) + 1
    name_w, ver_w = max(name_w, 11), max(ver_w, 12)
    for name, p in snapshot.frameworks.items():
        if p.status != "ok":
            first = p.error.strip().splitlines()[0] if p.error.strip() else ""
            con.print(Text.assemble(f"  {name:<{name_w}}{p.version:<{ver_w}}",
                                    (p.status, "bold red"), f"  {first}"))
            continue
        imp = f"{p.import_seconds:.1f} s" if p.import_seconds is not None else "?"
        con.print(Text.assemble(f"  {name:<{name_w}}{p.version:<{ver_w}}", ("ok", "green"),
                                f"  import {imp}  devices: {_devices(p)}  build: {_build(p)}"))
        for line in p.load_errors[:3]:
            con.print(f"  {'':<{name_w + ver_w}}logged: {line[:160]}", markup=False,
                      highlight=False)
        if p.keras_version:
            jit = "?" if p.keras_jit_auto is None else ("on" if p.keras_jit_auto else "off")
            keras = f"Keras {p.keras_version}, jit_compile=\"auto\" resolves to {jit}"
        else:
            keras = f"Keras: {p.keras_error or 'not importable'}"
        mem = p.memory_stats or "?"
        if p.memory_stats_detail:
            mem += f" ({p.memory_stats_detail})"
        con.print(f"  {'':<{name_w + ver_w}}{keras}; memory stats: {mem}",
                  markup=False, highlight=False)

    ordered = sort_findings(findings)
    counts = {s: sum(f.severity == s for f in ordered) for s in SEVERITIES}
    if script is not None:
        con.print("\n" + script_line(script), markup=False, highlight=False)
    con.print(
        f"\n[bold]Findings[/bold]: {counts['error']} error(s), {counts['warning']} warning(s), "
        f"{counts['info']} info"
    )
    for sev in SEVERITIES:
        group = [f for f in ordered if f.severity == sev]
        if not group:
            continue
        con.print(Text(f"\n{sev.upper()}", style=_STYLE[sev]))
        for f in group:
            where = f" {f.location}" if f.location else ""
            con.print(Text.assemble((f"  [{f.id}]{where} ", _STYLE[sev]), (f.title, "bold")))
            con.print(f"    observed: {f.observed}", markup=False, highlight=False)
            con.print(f"    why:      {f.why}", markup=False, highlight=False)
            if f.fix:
                con.print(f"    fix:      {f.fix}", markup=False, highlight=False)
            if f.source:
                con.print(f"    source:   {f.source}", markup=False, highlight=False)
    if saved_to is not None:
        con.print(f"\nsnapshot saved to {saved_to} (diagnose it anywhere with "
                  f"`devicebench doctor --snapshot {saved_to}`)")
