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

import functools
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import keras

from devicebench.monitor.args import check_monitor_args
from devicebench.monitor.core import (
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
from devicebench.monitor.memory import MemoryReader, memory_reader
from devicebench.monitor.nvml import DEFAULT_INTERVAL, NvmlRead, NvmlSampler, nvml_reader
from devicebench.monitor.probe import fit_batch_size, make_probe
from devicebench.monitor.recorder import FLUSH_SECONDS, StoreRecorder, one_line
from devicebench.monitor.sinks import CsvSink, TensorBoardSink

MAX_PRINTED_STALLS = 5
_FITS = {"n": 0}  # monitored fit() calls in this process, for the store
EPOCH_FLUSH_SECONDS = 1.0  # at an epoch's end, store new blocks if this long since the last


def _default_printer(line: str) -> None:
    print(f"devicebench monitor: {line}", file=sys.stderr, flush=True)


def _guarded(hook: Callable[..., None]) -> Callable[..., None]:
    """A Keras hook (or the per-block work of the per-step one, which stays a bare
    integer comparison) that never raises into the user's fit: the monitor's own failure is
    one warning line, then it stops measuring (what it measured so far is kept).
    KeyboardInterrupt and SystemExit pass through: they are the user's."""

    @functools.wraps(hook)
    def run(self: TrainingMonitor, *args: Any, **kwargs: Any) -> None:
        if self._off:
            return
        try:
            hook(self, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the training must go on
            self._off = True
            self._boundary = sys.maxsize  # the per-step comparison never fires again
            self._warn(f"stopped measuring this fit ({one_line(exc)}); the training "
                       "continues unaffected")

    return run


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
        check_monitor_args(locals())
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
        self.fit_number = 0  # which monitored fit() of this process the last one was
        self._recorder: StoreRecorder | None = None
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
        self._off = False

    def _warn(self, line: str) -> None:
        try:
            self.printer(line)
        except Exception:  # noqa: BLE001 - a broken printer must not break the fit
            pass

    # -- Keras hooks ---------------------------------------------------------------------
    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        if self._recorder is not None and not self._recorder.ended:
            # The last fit with this monitor never reached on_train_end.
            self._recorder.end("error", "fit() ended by an exception the script caught")
        self._recorder = None
        self._reset_fit_state()
        _FITS["n"] += 1
        self.fit_number = _FITS["n"]
        self._begin()

    @_guarded
    def _begin(self) -> None:
        t = self.clock()
        self._in_fit = True
        batch_size = self.batch_size or fit_batch_size()
        self.log = MonitorLog(batch_size=batch_size, stall_factor=self.stall_factor)
        self._planner = BlockPlanner(self.block_steps, self.target_block_seconds)
        self._spe = int(getattr(self.model, "steps_per_execution", 1) or 1)
        self._backend = keras.backend.backend()
        self._memory = memory_reader(self._backend)
        self.log.memory_label = self._memory.label
        self._probe = make_probe(self.model, self._backend)
        if self.csv_path is not None:
            try:
                self._csv = CsvSink(self.csv_path, batch_size)
            except Exception as exc:  # noqa: BLE001
                self._warn(f"no CSV for this fit ({one_line(exc)}); the training continues")
        if self.tensorboard_dir is not None:
            try:
                self._tb = TensorBoardSink(self.tensorboard_dir, batch_size)
            except Exception as exc:  # noqa: BLE001
                self._warn(f"no TensorBoard files for this fit ({one_line(exc)}); the "
                           "training continues")
        if self.db is not None and self.db is not False:
            self._open_store()
        self._start_nvml()
        self.log.setup_seconds += self.clock() - t

    @_guarded
    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch = epoch
        self._boundary = 0
        self._open_step = None
        self._epoch_start = self.clock()

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._last_begin = batch
        if batch >= self._boundary:
            self._at_boundary(batch)

    @_guarded
    def on_test_begin(self, logs: dict[str, Any] | None = None) -> None:
        if self._in_fit and self._open_step is not None:  # validation: end the epoch's tail
            self._close_tail()

    @_guarded
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
        if self._tb is not None:
            self._tb.epoch(rec, logs or {})
        if logs is not None:
            logs.update(_epoch_logs(rec))
        if self._csv is not None:
            self._csv.epoch(rec)
        # The first epoch's blocks at once (a fit killed in epoch 2 keeps them), later
        # ones when a second has passed: a commit per tiny epoch would be overhead.
        first = self._recorder is not None and self._recorder.stored == 0
        self._flush_store(0.0 if first else EPOCH_FLUSH_SECONDS)
        self.log.overhead_seconds += self.clock() - t

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        t = self.clock()
        self._in_fit = False
        for part in (self._sampler, self._csv, self._tb):
            if part is None:
                continue
            try:
                part.stop() if part is self._sampler else part.close()
            except Exception as exc:  # noqa: BLE001
                self._warn(f"while closing its outputs: {one_line(exc)}")
        self.log.setup_seconds += self.clock() - t
        if self._recorder is not None:
            self._recorder.end("completed")
            self.store_run_id = self._recorder.run_id
        if self.verbose:
            try:
                self._warn(self.log.final_line())
            except Exception as exc:  # noqa: BLE001
                self._warn(f"no summary line ({one_line(exc)})")

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
    @_guarded
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
        self._flush_store(FLUSH_SECONDS)

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

    def _open_store(self) -> None:
        """Start this fit's run in the store; a bad store is one line, not an error."""
        from devicebench.monitor.recorder import store_problem

        problem = store_problem(self.db)
        if problem is not None:
            self._warn(f"not recording this fit in the store: {problem}; the training "
                       "continues")
            return
        options = {
            "argv": sys.argv, "backend": self._backend,
            "model": getattr(self.model, "name", ""),
            "params": _count_params(self.model),
            "steps_per_execution": self._spe, "batch_size": self.log.batch_size,
            "memory_label": self.log.memory_label, "fit": self.fit_number,
        }
        self._recorder = StoreRecorder(
            self.db, options,  # type: ignore[arg-type]
            blocks=lambda start: [b.to_dict() for b in self.log.blocks[start:]],
            summary=self.summary, warn=self._warn)
        self.store_run_id = self._recorder.run_id

    def _flush_store(self, after_seconds: float) -> None:
        if self._recorder is None:
            return
        try:
            self._recorder.flush(after_seconds)
        except Exception as exc:  # noqa: BLE001
            self._warn(f"stopped recording this fit in the store ({one_line(exc)}); the "
                       "training continues")
            self._recorder.abandon()
            self._recorder = None


def _count_params(model: Any) -> int | None:
    try:
        return int(model.count_params()) if model is not None else None
    except Exception:  # noqa: BLE001 - an unbuilt model
        return None


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
