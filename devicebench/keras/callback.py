"""`TrainingMonitor`: a Keras 3 callback that times training without slowing it down.

Keras dispatches ``on_train_batch_end`` asynchronously only while no callback overrides
it (``CallbackList._configure_async_dispatch``), and converts every step's logs to Python
floats for whoever does: a monitor built on it changes the speed it measures. This one
overrides only ``on_train_batch_begin`` (always called synchronously, with no logs to
convert), where it does an integer comparison per step; once per *block* of steps it
forces a device sync by reading the epoch's running loss (which also catches NaN/Inf),
reads memory and closes the block. Blocks grow until one lasts ``target_block_seconds``
(0.5 s), so the sync costs a bounded fraction of the time; the time spent in the
monitor's own code is measured and reported.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import keras
import numpy as np

from devicebench.errors import ArgumentError
from devicebench.keras.core import (
    BLOCK,
    FIRST,
    TAIL,
    Alert,
    Block,
    BlockPlanner,
    EpochRecord,
    MonitorLog,
    nan_alert,
)
from devicebench.keras.memory import MemoryReader, memory_reader
from devicebench.keras.nvml import DEFAULT_INTERVAL, NvmlRead, NvmlSampler, nvml_reader
from devicebench.keras.sinks import CsvSink, TensorBoardSink

MAX_PRINTED_STALLS = 5


def _default_printer(line: str) -> None:
    print(f"devicebench monitor: {line}", file=sys.stderr, flush=True)


class TrainingMonitor(keras.callbacks.Callback):
    """Step time, samples/s, memory, GPU utilisation, NaN and stall alerts for ``fit``.

    Args:
        batch_size: samples per step for samples/s; None = read from the fit's data
            when Keras knows it (arrays, tf.data), else samples/s is not reported.
        block_steps: steps per timed block; None = grow blocks to ``target_block_seconds``.
        target_block_seconds: how long an automatic block aims to last.
        csv_path: write one row per block and per epoch to this CSV file.
        tensorboard_dir: write ``monitor/*`` scalars there (needs ``tensorboardX``).
        db: record the fit in the devicebench store (a run tagged ``"monitor"``): a path,
            or True for the default results file; None = do not record.
        stop_on_nan: set ``model.stop_training`` when the loss becomes NaN/Inf.
        stall_factor: alert when a block's step time exceeds this multiple of the median.
        nvml: ``"auto"`` (sample NVML when available), True (warn when it is not), False.
        nvml_interval: seconds between NVML samples.
        nvml_read: the NVML reader (a seam for tests); None = ``pynvml``.
        verbose: 1 = print alerts and the end-of-training line; 0 = silent.
        printer: where lines go (default: stderr, prefixed ``devicebench monitor:``).

    Example:
        >>> monitor = TrainingMonitor(csv_path="monitor.csv")    # doctest: +SKIP
        >>> model.fit(x, y, epochs=3, callbacks=[monitor])       # doctest: +SKIP
        >>> monitor.summary()["steady_step_seconds"]             # doctest: +SKIP
    """

    def __init__(self, *, batch_size: int | None = None, block_steps: int | None = None,
                 target_block_seconds: float = 0.5, csv_path: str | Path | None = None,
                 tensorboard_dir: str | Path | None = None, db: str | Path | bool | None = None,
                 stop_on_nan: bool = False, stall_factor: float = 3.0,
                 nvml: bool | str = "auto", nvml_interval: float = DEFAULT_INTERVAL,
                 nvml_read: Callable[[], NvmlRead] | None = None, verbose: int = 1,
                 printer: Callable[[str], None] | None = None) -> None:
        super().__init__()
        _check_monitor_args(locals())
        self.batch_size = batch_size
        self.block_steps = block_steps
        self.target_block_seconds = target_block_seconds
        self.csv_path = csv_path
        self.tensorboard_dir = tensorboard_dir
        self.db = db
        self.stop_on_nan = stop_on_nan
        self.stall_factor = stall_factor
        self.nvml = nvml
        self.nvml_interval = nvml_interval
        self.nvml_read = nvml_read
        self.verbose = verbose
        self.printer = printer or _default_printer
        self.clock: Callable[[], float] = time.perf_counter
        BlockPlanner(block_steps, target_block_seconds)  # validate now, not at fit time
        self.log = MonitorLog()
        self.nvml_status = "off"
        self.store_run_id: int | None = None
        self._reset_fit_state()

    def _reset_fit_state(self) -> None:
        self._boundary = 0
        self._open_step: int | None = None
        self._open_time = 0.0
        self._open_kind = BLOCK
        self._first_done = False
        self._in_fit = False
        self._epoch = 0
        self._epoch_start = 0.0
        self._last_begin = 0
        self._global_steps = 0
        self._stalls_printed = 0
        self._sampler: NvmlSampler | None = None
        self._memory: MemoryReader | None = None
        self._csv: CsvSink | None = None
        self._tb: TensorBoardSink | None = None
        self._probe: Callable[[], float | None] = lambda: None

    # -- Keras hooks ---------------------------------------------------------------------
    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        t = self.clock()
        self._reset_fit_state()
        self._in_fit = True
        batch_size = self.batch_size or _fit_batch_size()
        self.log = MonitorLog(batch_size=batch_size, stall_factor=self.stall_factor)
        self._planner = BlockPlanner(self.block_steps, self.target_block_seconds)
        self._spe = int(getattr(self.model, "steps_per_execution", 1) or 1)
        self._backend = keras.backend.backend()
        self._memory = memory_reader(self._backend)
        self.log.memory_label = self._memory.label
        self._probe = _make_probe(self.model, self._backend)
        if self.csv_path is not None:
            self._csv = CsvSink(self.csv_path, batch_size)
        if self.tensorboard_dir is not None:
            self._tb = TensorBoardSink(self.tensorboard_dir, batch_size)
        self._start_nvml()
        self.log.setup_seconds += self.clock() - t

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch = epoch
        self._boundary = 0
        self._open_step = None
        self._epoch_start = self.clock()

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._last_begin = batch
        if batch >= self._boundary:
            self._at_boundary(batch)

    def on_test_begin(self, logs: dict[str, Any] | None = None) -> None:
        if self._in_fit and self._open_step is not None:  # validation: end the epoch's tail
            self._close_tail()

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if self._open_step is not None:
            # Keras has fetched the epoch's logs to the host (CallbackList converts them to
            # floats before calling us): the device is synced and the running loss is in
            # the logs, so the tail needs no probe of its own.
            loss = logs.get("loss") if logs is not None else None
            self._close_tail(loss if isinstance(loss, float) else None,
                             synced=isinstance(loss, float))
        t = self.clock()
        rec = self.log.end_epoch(epoch, t - self._epoch_start)
        if logs is not None:
            loss = logs.get("loss")
            if isinstance(loss, float) and not math.isfinite(loss):
                alert = nan_alert(epoch, rec.steps - 1, loss)
                if self.log.add_alert(alert):
                    self._raise_nan(alert)
            logs.update(_epoch_logs(rec))
        if self._csv is not None:
            self._csv.epoch(rec)
        if self._tb is not None:
            self._tb.epoch(rec)
        self.log.overhead_seconds += self.clock() - t

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        t = self.clock()
        self._in_fit = False
        if self._sampler is not None:
            self._sampler.stop()
        for sink in (self._csv, self._tb):
            if sink is not None:
                sink.close()
        self.log.setup_seconds += self.clock() - t
        if self.db is not None and self.db is not False:
            self._save()
        if self.verbose:
            self.printer(self.log.final_line())

    # -- results -------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """Every figure of the last fit (see :meth:`MonitorLog.summary`)."""
        out = self.log.summary()
        out["nvml"] = self.nvml_status
        return out

    def final_line(self) -> str:
        """The end-of-training line, e.g. ``steady 1.42 ms/step ±2% (n=40 blocks); ...``."""
        return self.log.final_line()

    # -- internals -----------------------------------------------------------------------
    def _at_boundary(self, step: int) -> None:
        now = self.clock()
        if self._open_step is not None:
            loss = self._probe()  # the device sync: its wait is the steps' time, not overhead
            now = self.clock()
            self._close(step, now, loss, self._open_kind)
        # else: an epoch's first step; Keras synced at the end of the last epoch (its logs
        # are fetched to the host) and nothing has been dispatched since.
        kind = BLOCK
        if not self._first_done:
            kind, self._first_done = FIRST, True
            size = 1  # the first execution alone: it holds the compilation
        else:
            size = self._planner.size
        self._open_step, self._open_kind = step, kind
        self._boundary = step + size
        end = self.clock()
        self.log.overhead_seconds += end - now
        self._open_time = end

    def _close_tail(self, loss: float | None = None, synced: bool = False) -> None:
        if not synced:
            loss = self._probe()
        now = self.clock()
        steps_known = (self.params or {}).get("steps")
        end_step = self._last_begin + self._spe
        if steps_known:
            end_step = min(end_step, int(steps_known))
        kind = self._open_kind if self._open_kind == FIRST else TAIL
        self._close(end_step, now, loss, kind)
        self._open_step = None
        self.log.overhead_seconds += self.clock() - now

    def _close(self, end_step: int, now: float, loss: float | None, kind: str) -> None:
        if self._open_step is None:
            return
        current, peak = self._memory.read() if self._memory else (None, None)
        busy = (self._sampler.busy_between(self._open_time, now)
                if self._sampler is not None else None)
        block = Block(epoch=self._epoch, first_step=self._open_step,
                      steps=end_step - self._open_step, seconds=now - self._open_time,
                      kind=kind, memory_current=current, memory_peak=peak, gpu_busy=busy,
                      loss=loss)
        if block.steps <= 0:
            return
        for alert in self.log.add_block(block):
            if alert.kind == "nan":
                self._raise_nan(alert)
            elif self.verbose and self._stalls_printed < MAX_PRINTED_STALLS:
                self._stalls_printed += 1
                self.printer(alert.message)
        self._planner.after(block)
        self._global_steps += block.steps
        if self._csv is not None:
            self._csv.block(block)
        if self._tb is not None:
            self._tb.block(block, self._global_steps)

    def _raise_nan(self, alert: Alert) -> None:
        """Print a NaN alert the log has just recorded (once per epoch) and stop if asked."""
        if self.verbose:
            self.printer(alert.message + ("; stopping training (stop_on_nan=True)"
                                          if self.stop_on_nan else ""))
        if self.stop_on_nan and self.model is not None:
            self.model.stop_training = True

    def _start_nvml(self) -> None:
        if self.nvml is False:
            self.nvml_status = "off"
            return
        read, reason = (self.nvml_read, "") if self.nvml_read else nvml_reader()
        if read is None:
            self.nvml_status = reason
            if self.nvml is True and self.verbose:
                self.printer(f"GPU utilisation will not be reported: {reason}")
            return
        self._sampler = NvmlSampler(read, self.nvml_interval, clock=self.clock)
        self._sampler.start()
        self.nvml_status = "on"

    def _save(self) -> None:
        from devicebench.env.probe import probe_host_layer
        from devicebench.store import ResultStore
        from devicebench.store.monitor import save_monitor_run

        options = {
            "argv": sys.argv, "backend": self._backend,
            "model": getattr(self.model, "name", ""),
            "params": int(self.model.count_params()) if self.model is not None else None,
            "steps_per_execution": self._spe, "batch_size": self.log.batch_size,
            "memory_label": self.log.memory_label, "nvml": self.nvml_status,
        }
        with ResultStore.open(None if self.db is True else self.db) as store:
            self.store_run_id = save_monitor_run(
                store, probe_host_layer(), options,
                [b.to_dict() for b in self.log.blocks], self.summary())


def _epoch_logs(rec: EpochRecord) -> dict[str, float]:
    out: dict[str, float] = {}
    if rec.step_seconds is not None:
        out["step_ms"] = rec.step_seconds * 1e3
    if rec.samples_per_s is not None:
        out["samples_per_s"] = rec.samples_per_s
    if rec.memory_peak is not None:
        out["mem_peak_mb"] = rec.memory_peak / 1e6
    if rec.gpu_busy is not None:
        out["gpu_busy_pct"] = rec.gpu_busy * 100
    return out


def _fit_batch_size(max_depth: int = 8) -> int | None:
    """The batch size of the running fit's data, when Keras knows it (best effort: the
    fit's ``epoch_iterator`` local, found on the call stack)."""
    frame = sys._getframe(1)
    for _ in range(max_depth):
        frame = frame.f_back  # type: ignore[assignment]
        if frame is None:
            return None
        it = frame.f_locals.get("epoch_iterator")
        adapter = getattr(it, "data_adapter", None)
        if adapter is not None:
            try:
                size = adapter.batch_size
            except Exception:
                return None
            return int(size) if size else None
    return None


def _to_float(x: Any) -> float:
    """A scalar Keras variable's value on the host (waits for the device to produce it).

    ``float`` of the backend tensor (a jax Array, tf tensor or torch tensor, on any device)
    costs a few microseconds; ``keras.ops.convert_to_numpy`` several times that.
    """
    value = getattr(x, "value", x)
    try:
        return float(value)
    except (TypeError, ValueError):
        return float(np.asarray(keras.ops.convert_to_numpy(x)).reshape(-1)[0])


def _make_probe(model: Any, backend: str) -> Callable[[], float | None]:
    """A function that waits for the device to finish the dispatched steps and returns
    the epoch's running mean loss (None when the model has no loss tracker)."""
    tracker = getattr(model, "_loss_tracker", None)
    total = getattr(tracker, "total", None)
    count = getattr(tracker, "count", None)

    def live() -> float | None:
        if total is not None and count is not None:
            n = _to_float(count)
            return _to_float(total) / n if n else None
        optimizer = getattr(model, "optimizer", None)
        if optimizer is not None:
            _to_float(optimizer.iterations)  # sync only
        return None

    if backend != "jax":
        return live

    variables = list(getattr(model, "metrics_variables", []))
    i_total = next((i for i, v in enumerate(variables) if v is total), None)
    i_count = next((i for i, v in enumerate(variables) if v is count), None)

    def jax_probe() -> float | None:
        # Inside a JAX epoch the live state is model._jax_state (Keras documents it as
        # the callbacks' way in); the model's variables are stale until the epoch ends.
        state = getattr(model, "_jax_state", None)
        if state and not getattr(model, "_jax_state_synced", True):
            mv = state.get("metrics_variables")
            if mv is not None and i_total is not None and i_count is not None:
                n = float(mv[i_count])
                return float(mv[i_total]) / n if n else None
            import jax

            jax.block_until_ready(state)
            return None
        return live()

    return jax_probe


def _check_monitor_args(a: dict) -> None:
    """TrainingMonitor's arguments: ArgumentError (a ValueError) naming the first that is
    of the wrong type or out of range, at construction, not at fit time."""
    def number(name: str, low: float, *, integer: bool = False, optional: bool = False,
               above: bool = True) -> None:
        v = a[name]
        if v is None and optional:
            return
        ok_type = isinstance(v, int) if integer else isinstance(v, int | float)
        if isinstance(v, bool) or not ok_type:
            kind = "an integer" if integer else "a number"
            raise ArgumentError(f"{name} must be {kind}, got {v!r:.60}")
        if not math.isfinite(v) or (v <= low if above else v < low):
            raise ArgumentError(f"{name} must be {'>' if above else '>='} {low:g}, got {v}")

    number("batch_size", 1, integer=True, optional=True, above=False)
    number("block_steps", 1, integer=True, optional=True, above=False)
    number("target_block_seconds", 0)
    number("stall_factor", 1)
    number("nvml_interval", 0)
    for name in ("csv_path", "tensorboard_dir"):
        if a[name] is not None and not isinstance(a[name], str | Path):
            raise ArgumentError(f"{name} must be a path, got {a[name]!r:.60}")
    if a["db"] is not None and not isinstance(a["db"], bool | str | Path):
        raise ArgumentError(f"db must be a path, True (the default database) or None, "
                            f"got {a['db']!r:.60}")
    if not isinstance(a["stop_on_nan"], bool):
        raise ArgumentError(f"stop_on_nan must be True or False, got {a['stop_on_nan']!r:.60}")
    if a["nvml"] not in (True, False, "auto") or not isinstance(a["nvml"], bool | str):
        raise ArgumentError(f"nvml must be True, False or 'auto', got {a['nvml']!r}")
    if a["verbose"] not in (0, 1, 2) or not isinstance(a["verbose"], int):
        raise ArgumentError(f"verbose must be 0, 1 or 2 (as Keras' fit), got "
                            f"{a['verbose']!r:.60}")
    for name in ("nvml_read", "printer"):
        if a[name] is not None and not callable(a[name]):
            raise ArgumentError(f"{name} must be a function, got {a[name]!r:.60}")
