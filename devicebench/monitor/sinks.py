"""Where the monitor's figures go besides the Keras logs: a CSV file and TensorBoard.

TensorBoard event files are written with ``tensorboardX`` (an optional extra,
``pip install devicebench[tensorboard]``), which needs no TensorFlow: JAX and torch
users get them too. :func:`read_scalars` reads them back with nothing but
``tensorboardX``'s protobuf classes (TFRecord framing parsed here).
"""

from __future__ import annotations

import csv
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from devicebench.errors import InputError
from devicebench.monitor.core import FIRST, Block, EpochRecord

CSV_FIELDS = ("row", "epoch", "first_step", "steps", "seconds", "ms_per_step",
              "samples_per_s", "memory_current_mb", "memory_peak_mb", "gpu_busy_pct",
              "loss", "kind")


def _mb(b: int | None) -> str:
    return "" if b is None else f"{b / 1e6:.1f}"


class CsvSink:
    """One row per block (``row=block``) and per epoch (``row=epoch``); flushed per epoch."""

    def __init__(self, path: str | Path, batch_size: int | None) -> None:
        self.path = Path(path)
        self.batch_size = batch_size
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file: IO[str] = self.path.open("w", newline="")
        except OSError as exc:
            raise InputError(f"cannot write the monitor CSV {self.path} ({exc.strerror})",
                             fix="pass csv_path= a file in a writable directory") from None
        self._writer = csv.DictWriter(self._file, CSV_FIELDS)
        self._writer.writeheader()

    def block(self, b: Block) -> None:
        per = b.step_seconds
        self._writer.writerow({
            "row": "block", "epoch": b.epoch, "first_step": b.first_step, "steps": b.steps,
            "seconds": f"{b.seconds:.6f}", "ms_per_step": f"{per * 1e3:.4f}",
            "samples_per_s": f"{self.batch_size / per:.1f}" if self.batch_size and per else "",
            "memory_current_mb": _mb(b.memory_current), "memory_peak_mb": _mb(b.memory_peak),
            "gpu_busy_pct": "" if b.gpu_busy is None else f"{b.gpu_busy * 100:.1f}",
            "loss": "" if b.loss is None else repr(b.loss), "kind": b.kind})

    def epoch(self, e: EpochRecord) -> None:
        self._writer.writerow({
            "row": "epoch", "epoch": e.epoch, "first_step": 0, "steps": e.steps,
            "seconds": f"{e.train_seconds:.6f}",
            "ms_per_step": "" if e.step_seconds is None else f"{e.step_seconds * 1e3:.4f}",
            "samples_per_s": "" if e.samples_per_s is None else f"{e.samples_per_s:.1f}",
            "memory_current_mb": "", "memory_peak_mb": _mb(e.memory_peak),
            "gpu_busy_pct": "" if e.gpu_busy is None else f"{e.gpu_busy * 100:.1f}",
            "loss": "", "kind": "warmup" if e.warmup else "steady"})
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class TensorBoardSink:
    """Event files where Keras' own ``TensorBoard`` callback puts them: ``DIR/train``
    (and ``DIR/validation`` once the fit validates), one event file per fit.

    In ``train``, at the global step after each block: ``monitor/ms_per_step``,
    ``monitor/samples_per_s``, ``monitor/memory_peak_mb``, ``monitor/gpu_busy_pct`` and
    ``batch_loss`` (the epoch's running loss, as Keras logs it); the first execution
    (compilation inside) only as ``monitor/first_step_seconds``, so it does not squash
    the step-time axis. Per epoch (step = epoch, as Keras writes them): ``epoch_loss``
    and every metric (``epoch_<name>``; ``validation``: the ``val_`` ones), and
    ``monitor/epoch_train_seconds``, ``monitor/epoch_excess_seconds``.
    """

    def __init__(self, logdir: str | Path, batch_size: int | None) -> None:
        try:
            from tensorboardX import SummaryWriter
        except ImportError:
            raise InputError(
                "TensorBoard output asked for but tensorboardX is not installed",
                why="it writes event files without TensorFlow, on every backend",
                fix="pip install 'devicebench[tensorboard]' (or tensorboardX)") from None
        self._writer_cls = SummaryWriter
        self.logdir = Path(logdir)
        self.batch_size = batch_size
        self._writer = SummaryWriter(logdir=str(self.logdir / "train"))
        self._validation = None

    def block(self, b: Block, global_step: int) -> None:
        w = self._writer
        if b.kind == FIRST:
            w.add_scalar("monitor/first_step_seconds", b.seconds, global_step)
            return
        w.add_scalar("monitor/ms_per_step", b.step_seconds * 1e3, global_step)
        if self.batch_size and b.step_seconds > 0:
            w.add_scalar("monitor/samples_per_s", self.batch_size / b.step_seconds, global_step)
        if b.memory_peak is not None:
            w.add_scalar("monitor/memory_peak_mb", b.memory_peak / 1e6, global_step)
        if b.gpu_busy is not None:
            w.add_scalar("monitor/gpu_busy_pct", b.gpu_busy * 100, global_step)
        if b.loss is not None:
            w.add_scalar("batch_loss", b.loss, global_step)

    def epoch(self, e: EpochRecord, logs: Mapping[str, Any]) -> None:
        train = {k: v for k, v in logs.items() if not k.startswith("val_")}
        val = {k[4:]: v for k, v in logs.items() if k.startswith("val_")}
        for name, value in train.items():
            if isinstance(value, int | float):
                self._writer.add_scalar(f"epoch_{name}", float(value), e.epoch)
        self._writer.add_scalar("monitor/epoch_train_seconds", e.train_seconds, e.epoch)
        self._writer.add_scalar("monitor/epoch_excess_seconds", e.excess_seconds, e.epoch)
        self._writer.flush()
        numeric = {k: float(v) for k, v in val.items() if isinstance(v, int | float)}
        if numeric:
            if self._validation is None:
                self._validation = self._writer_cls(logdir=str(self.logdir / "validation"))
            for name, value in numeric.items():
                self._validation.add_scalar(f"epoch_{name}", value, e.epoch)
            self._validation.flush()

    def close(self) -> None:
        self._writer.close()
        if self._validation is not None:
            self._validation.close()


def read_scalars(logdir: str | Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in the event files under ``logdir``: tag -> [(step, value), ...].

    Raises:
        InputError: tensorboardX is not installed.
    """
    try:
        from tensorboardX.proto.event_pb2 import Event
    except ImportError:
        raise InputError("reading TensorBoard files needs tensorboardX",
                         fix="pip install 'devicebench[tensorboard]'") from None
    out: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(Path(logdir).rglob("events.out.tfevents.*")):
        for record in _tfrecords(path):
            event = Event.FromString(record)
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    out.setdefault(value.tag, []).append((event.step, value.simple_value))
    return out


def _tfrecords(path: Path) -> list[bytes]:
    """TFRecord framing: u64 length, u32 crc, data, u32 crc (CRCs not checked here)."""
    data = path.read_bytes()
    records: list[bytes] = []
    pos = 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        start = pos + 12
        if start + length + 4 > len(data):
            break  # a record still being written
        records.append(data[start:start + length])
        pos = start + length + 4
    return records
