"""Build machine profiles from what devicebench (or a published source) recorded.

- :func:`records_from_run` turns a ``devicebench run --json`` document into records,
  raw block samples included (origin ``measured``).
- :func:`figures_from_ops` turns a ``devicebench ops --json`` document into per-device
  figures, as :func:`devicebench.advisor.figures.device_figures` computes them live.
- :func:`profile_from_run` writes a profile of this machine from a fresh run (what
  ``devicebench profile record`` stores).

``bench/make_profiles.py`` rebuilds the shipped profiles from the recorded inputs in
``tests/fixtures/recorded/``; a test checks that the shipped files are what it builds.
"""

from __future__ import annotations

from typing import Any

from devicebench.advisor.figures import cheapest_dispatch
from devicebench.profiles.profile import MachineProfile, TrialRecord
from devicebench.trials.spec import TrialSpec


def _record_from_row(row: dict[str, Any], source: str) -> TrialRecord:
    """One row of a ``run --json`` document (``ComparisonRow.to_dict``) -> record."""
    spec = TrialSpec.from_dict(row["spec"])
    raw = row.get("raw") or {}
    k = max(int(raw.get("steps_per_block") or 1), 1)
    steps = [b / k for b in raw.get("block_seconds", [])]
    median = (row.get("step_time_s") or {}).get("median")
    epoch = row.get("train_epoch_s") or row.get("epoch_s")  # epoch_s: older documents
    spe = int(row.get("steps_per_epoch") or 0) or (round(epoch / median)
                                                   if median and epoch else 1)
    batch = round(row["samples_per_s"] * median) if median and row.get("samples_per_s") \
        else 0
    ckpt = {int(s): float(v) for s, v in (row.get("loss_checkpoints") or {}).items()}
    return TrialRecord(
        spec=spec, origin="measured", source=source, status=row["status"],
        error=row.get("error", ""), import_seconds=row.get("import_s") or 0.0,
        setup_seconds=row.get("setup_s") or 0.0, first_step_seconds=row.get("first_step_s"),
        warmup_seconds=row.get("warmup_s") or 0.0, step_seconds=steps, batch_size=batch,
        steps_per_epoch=max(spe, 1), flops_per_step=row.get("flops_per_step"),
        loss_steps=sorted(ckpt), equivalence_losses=[ckpt[s] for s in sorted(ckpt)],
        loss_verdict=row.get("loss_verdict", ""), final_loss=row.get("final_loss"),
        input_seconds_per_batch=row.get("input_s_per_batch"),
        peak_device_memory_bytes=row.get("peak_device_memory_bytes"),
        peak_rss_bytes=row.get("peak_rss_bytes"), jit_resolved=row.get("jit_resolved"),
        placement=row.get("placement") or {}, data_note=row.get("data_note", ""))


def records_from_run(run: dict[str, Any], source: str) -> dict[str, list[TrialRecord]]:
    """Records per workload from a ``devicebench run --json`` document."""
    out: dict[str, list[TrialRecord]] = {}
    for row in run["results"]:
        rec = _record_from_row(row, source)
        if rec.status == "ok" and not rec.step_seconds:
            continue  # nothing timed: absent rather than invented
        out.setdefault(rec.spec.workload, []).append(rec)
    return out


def figures_from_ops(ops: dict[str, Any], device: str, source: str
                     ) -> dict[str, Any] | None:
    """``DeviceFigures`` fields for ``device`` from a ``devicebench ops --json`` document:
    its measured matmul peak, the cheapest op inside a compiled graph (per backend) and
    the cheapest compiled call (per backend), each at a size up to 16×16."""
    peak = (ops.get("matmul_peak") or {}).get(device)
    per_op, per_call = cheapest_dispatch(
        (path["backend"], path["mode"], op["op"], p["size"], p["median_s"],
         bool(p.get("resolved")) and p["median_s"] > 0)
        for op in ops.get("ops", []) for path in op.get("paths", [])
        if path["device"] == device for p in path["points"])
    if not peak and not per_op and not per_call:
        return None
    return {
        "source": source, "device": device,
        "peak_gflops": peak["flops_per_s"] / 1e9 if peak else None,
        "peak_label": f"{peak['path']} at {peak['size']}" if peak else "",
        "per_op_seconds": {b: v[0] for b, v in per_op.items()},
        "per_op_labels": {b: v[1] for b, v in per_op.items()},
        "call_seconds": {b: v[0] for b, v in per_call.items()},
        "call_labels": {b: v[1] for b, v in per_call.items()},
    }


def profile_from_run(name: str, label: str, snapshot: dict[str, Any], run: dict[str, Any],
                     ops: dict[str, Any] | None = None, source: str = "",
                     notes: list[str] | None = None, ops_source: str = "") -> MachineProfile:
    """A measured profile: every trial of ``run`` with its raw samples, and the device
    figures of ``ops`` (when given) for every device the machine has."""
    figures: dict[str, dict[str, Any]] = {}
    if ops is not None:
        devices = {w["device"] for w in ops.get("workers", [])}
        for device in sorted(devices):
            f = figures_from_ops(ops, device, ops_source or f"{name}: devicebench ops")
            if f:
                figures[device] = f
    return MachineProfile(name=name, label=label, snapshot=snapshot,
                          workloads=records_from_run(run, source or name), figures=figures,
                          notes=list(notes or []))
