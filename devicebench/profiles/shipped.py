"""How the shipped profiles are built from recorded inputs (``tests/fixtures/recorded/``).

- ``h200``: devicebench's own output on one NVIDIA H200 (jax + torch, no TensorFlow):
  ``run.json`` (raw blocks of 4 configurations x 3 workloads), ``ops.json`` (device
  figures), ``snapshot.json``; plus the few candidates only its printed ``advise`` output
  measured (origin ``printed``: the printed median, no spread of its own).
- ``m1-published``: Apple Silicon figures published by others
  (``apple-public/figures.json``), labelled derived: only pairs whose model matches a
  built-in workload. Everything the sources do not state is left out, not invented.

Run ``python bench/make_profiles.py`` to rebuild ``devicebench/profiles/data/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from devicebench.profiles.build import profile_from_run
from devicebench.profiles.profile import MachineProfile, TrialRecord
from devicebench.trials.spec import TrialSpec

H200_LABEL = ("one NVIDIA H200 (CUDA 13.0, driver 580.159.04), 16 x86 cores; jax 0.11.2 + "
              "torch 2.11.0+cu130, no TensorFlow")


def _printed(base: TrialRecord, spec: TrialSpec, step_s: float, source: str,
             **fields: Any) -> TrialRecord:
    """A candidate only a printed table measured: its printed median; import, set-up and
    data figures from the measured record of the same backend and device."""
    return TrialRecord(
        spec=spec, origin="printed", source=source + "; import, set-up, batch and data "
        f"figures from the measured {base.spec.label} record", step_seconds=[step_s],
        import_seconds=base.import_seconds, setup_seconds=base.setup_seconds,
        batch_size=base.batch_size, steps_per_epoch=base.steps_per_epoch,
        flops_per_step=base.flops_per_step, data_note=base.data_note,
        input_seconds_per_batch=base.input_seconds_per_batch, **fields)


def build_h200(recorded: Path) -> MachineProfile:
    d = recorded / "h200"
    run = json.loads((d / "run.json").read_text())
    ops = json.loads((d / "ops.json").read_text())
    snapshot = json.loads((d / "snapshot.json").read_text())
    prof = profile_from_run(
        "h200", H200_LABEL, snapshot, run, ops, source="recorded/h200/run.json",
        ops_source="recorded/h200/ops.json",
        notes=["devicebench at 7a244ab on one NVIDIA H200, 2026-11-30 "
               "(tests/fixtures/recorded/h200/README.md)",
               "jax's float32 matmul on this GPU runs in TF32 by default (403 TFLOP/s), "
               "torch's in full float32 (50 TFLOP/s)"])
    prof.figures["gpu:0"]["peak_precision"] = (
        "TF32 tensor cores (jax's default float32 matmul precision on this GPU)")
    rnn, cnn = prof.workloads["seed-rnn"], prof.workloads["mnist-cnn"]

    def base(records: list[TrialRecord], label: str) -> TrialRecord:
        return next(r for r in records if r.spec.label == label)

    advise_cnn = "recorded/h200/advise-mnist-cnn-baseline-torch-gpu.txt"
    torch_gpu = base(cnn, "torch/gpu:0")
    cnn += [
        _printed(torch_gpu, torch_gpu.spec.with_(jit="on"), 2.95e-3,
                 advise_cnn + ": training-speed table (median 2.95 ms, 1st step 25.66 s, "
                 "loss same)", first_step_seconds=25.66, loss_verdict="same",
                 loss_steps=torch_gpu.loss_steps,
                 equivalence_losses=torch_gpu.equivalence_losses,
                 peak_device_memory_bytes=int(202.2 * 2**20)),
        _printed(torch_gpu, torch_gpu.spec.with_(precision="mixed_bfloat16"), 6.03e-3,
                 advise_cnn + ": training-speed table (median 6.03 ms, 1st step 574 ms, "
                 "loss same)", first_step_seconds=0.574, loss_verdict="same",
                 loss_steps=torch_gpu.loss_steps,
                 equivalence_losses=torch_gpu.equivalence_losses),
        _printed(torch_gpu, torch_gpu.spec.with_(precision="mixed_float16"), 8.20e-3,
                 advise_cnn + ": candidates table (rung 0, 8.20 ms; loss not printed)"),
    ]
    jax_gpu_cnn = base(cnn, "jax/gpu:0")
    cnn.append(_printed(
        jax_gpu_cnn, jax_gpu_cnn.spec.with_(precision="mixed_bfloat16"), 1.26e-3,
        "recorded/h200/main-job.txt: mixed_bfloat16 reason (1.26 ms vs 1.36 ms, loss same)",
        loss_verdict="same", loss_steps=jax_gpu_cnn.loss_steps,
        equivalence_losses=jax_gpu_cnn.equivalence_losses))
    jax_gpu_rnn = base(rnn, "jax/gpu:0")
    rnn.append(_printed(
        jax_gpu_rnn, jax_gpu_rnn.spec.with_(jit="on"), 1.48e-3,
        "recorded/h200/advise-seed-rnn-budget100.txt: candidates table (set-up steps "
        "1.48 ms)", loss_verdict="same", loss_steps=jax_gpu_rnn.loss_steps,
        equivalence_losses=jax_gpu_rnn.equivalence_losses))
    return prof


def m1_snapshot() -> dict[str, Any]:
    """What the probe records on seed 000's machine, as far as its report states it:
    macOS 13.5.2 on an M1 Ultra (devices cpu, gpu:0 and mps), Python 3.11, TensorFlow
    2.13.0 with tensorflow-metal (version not stated) whose GPU is visible."""
    from devicebench.env.snapshot import DeviceInfo, EnvSnapshot, FrameworkProbe, HostInfo

    return EnvSnapshot(
        created_at="2023-11-14T00:00:00Z",
        host=HostInfo(os="Darwin", os_version="macOS 13.5.2", macos_version="13.5.2",
                      machine="arm64",
                      python_arch="arm64", rosetta=False, python_version="3.11",
                      python_implementation="CPython", cpu_model="Apple M1 Ultra",
                      apple_chip="Apple M1 Ultra"),
        distributions={"tensorflow": "2.13.0", "tensorflow-metal": "1.0.0"},
        frameworks={"tensorflow": FrameworkProbe(
            name="tensorflow", version="2.13.0", physical_devices=[
                DeviceInfo("/physical_device:CPU:0", "CPU", "cpu"),
                DeviceInfo("/physical_device:GPU:0", "GPU", "METAL")])},
    ).to_dict()


def _published(fig: dict[str, Any], spec: TrialSpec, step_s: float, batch: int,
               steps_per_epoch: int, how: str) -> TrialRecord:
    return TrialRecord(
        spec=spec, origin="published",
        source=(f"{fig['source']} ({fig['id']}, {fig['chip']}, {fig['framework']}): "
                f"{fig['value']} {fig['metric']} — {how}"),
        step_seconds=[step_s], batch_size=batch, steps_per_epoch=steps_per_epoch,
        data_note=f"published figure: {fig['model'][:120]}")


def build_m1(recorded: Path) -> MachineProfile:
    figs = {f["id"]: f for f in json.loads(
        (recorded / "apple-public" / "figures.json").read_text())["figures"]}
    rnn = TrialSpec("seed-rnn", backend="tensorflow")
    cnn = TrialSpec("mnist-cnn", backend="tensorflow")
    g, c = figs["tf62397-rnn-m1ultra-gpu"], figs["tf62397-rnn-m1ultra-cpu"]
    # Seed 000's own report: 7,000 training series, batch 32 (fit's default).
    records = {"seed-rnn": [
        _published(g, rnn.with_(device="gpu:0"), g["value"] / 1e3, 32, 219, "as published"),
        _published(c, rnn.with_(device="cpu"), c["value"] / 1e3, 32, 219, "as published"),
    ]}
    g, c = figs["mre-mnistcnn-m1max-gpu"], figs["mre-mnistcnn-m1max-cpu"]
    # 10 epochs of 60,000 images at batch 64 (938 steps each) plus one evaluate pass:
    # the total divided by 10 x 938 steps (the evaluate pass is counted in).
    steps = 10 * 938
    records["mnist-cnn"] = [
        _published(g, cnn.with_(device="gpu:0"), g["value"] / steps, 64, 938,
                   f"divided by {steps} steps (10 epochs x 938, evaluate included)"),
        _published(c, cnn.with_(device="cpu"), c["value"] / steps, 64, 938,
                   f"divided by {steps} steps (10 epochs x 938, evaluate included)"),
    ]
    return MachineProfile(
        name="m1-published",
        label="Apple Silicon (M1 Ultra / M1 Max), TensorFlow + tensorflow-metal — derived "
              "from published figures, not measured by devicebench",
        derived=True, snapshot=m1_snapshot(), workloads=records,
        notes=["derived from tests/fixtures/recorded/apple-public/figures.json: pairs P01 "
               "(tensorflow#62397, the SimpleRNN forum report itself) and P06 (an MNIST CNN of 93k "
               "parameters, close to mnist-cnn but not the same model)",
               "the tensorflow-metal version was not stated: the snapshot assumes 1.0.0, the "
               "release Apple lists for TF 2.13",
               "import, set-up, first-step and loss figures were not published: a replay "
               "charges no time for them and has no loss trajectory to compare"])


def build_all(recorded: Path) -> dict[str, MachineProfile]:
    return {"h200": build_h200(recorded), "m1-published": build_m1(recorded)}
