"""One trial's work inside its worker process: :class:`TrialSession` prepares the
device and threads, imports the framework, builds and compiles the workload, runs the
equivalence steps, then the warm-up and timed blocks (each ended by a device sync), and
reports memory and the final loss. :mod:`devicebench.trials.worker` is the process
around it (commands in, replies out); the same session runs inline in tests.
"""

from __future__ import annotations

import functools
import importlib
import math
import resource
import sys
import time
from typing import Any

import numpy as np

from devicebench.backends._keras import suspend_random_layers
from devicebench.launch.child import Channel
from devicebench.measure.stats import settled
from devicebench.trials.blocks import TARGET_BLOCK_SECONDS, BlockPlan, plan_blocks
from devicebench.trials.protocol import (
    BlockReply,
    FinishReply,
    MeasureRequest,
    PrepareReply,
    SetupReply,
    SetupRequest,
)
from devicebench.trials.spec import TrialSpec
from devicebench.workloads.arrays import n_samples, take

MAX_WARMUP_BLOCKS = 8
CHECKPOINT_STEPS = (1, 10, 25, 50, 100, 200)
# Below this per-step time, on a backend whose train_on_batch calls carry their own
# overhead (``TRAIN_ON_BATCH_OVERHEAD`` in its module: JAX), the step estimate is
# measured again with short fits. Not on TensorFlow: its set-up steps are within ~15% of
# its fit steps, and its short fits vary too much (3-6.5 ms for a 4.9 ms step).
REFINE_BELOW_SECONDS = 0.05
REFINE_SECONDS = 0.05  # each of the refining fits runs about this long
# The validation pass is the same fixed work every epoch: its median settles in a few
# timings, so only a trial's first VALIDATION_TIMINGS measured blocks time one (each
# costs a whole pass; timing it every round made a slow candidate's rounds much longer).
VALIDATION_TIMINGS = 5


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


class NonFiniteLoss(Exception):
    """Training produced NaN or Inf."""


def _peak_rss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


class TrialSession:
    """Build and measure one trial inside this process."""

    def __init__(self, spec: TrialSpec) -> None:
        self.spec = spec
        self.backend = importlib.import_module(f"devicebench.backends.{spec.backend}")
        self.steps_per_block = 0
        self.last_loss: float | None = None
        self.import_seconds: float | None = None
        self.warmed = False  # a fit of this session has settled once

    # -- setup ------------------------------------------------------------------------
    def prepare(self) -> PrepareReply:
        """Set the device and threads, then import the framework (timed)."""
        if self.import_seconds is None:
            t0 = time.perf_counter()
            self.backend.configure(self.spec.device, self.spec.threads)
            import keras  # noqa: F401

            self.import_seconds = time.perf_counter() - t0
        return PrepareReply(self.import_seconds)

    def setup(self, req: SetupRequest) -> SetupReply:
        """Build, compile, run the equivalence steps, and estimate the step time.

        ``req.equivalence_seconds`` caps those steps by time (at least
        ``req.min_equivalence_steps`` run): a candidate that is 50x slower is not worth 50
        full steps of checking; the comparison then covers the steps both trials ran, and
        says how many. A trial whose steps already take ``req.screen_step_seconds`` (the
        parent's screening threshold) stops after ``req.screen_min_steps``: it will not be
        timed. The thresholds are the parent's; the worker holds no policy of its own.
        """
        spec = self.spec
        import_seconds = self.prepare().import_seconds
        import keras

        from devicebench.workloads.loader import load_workload

        t1 = time.perf_counter()
        workload = load_workload(spec.workload)
        seed = workload.default_seed if spec.seed is None else spec.seed
        keras.utils.set_random_seed(seed)
        keras.config.set_dtype_policy("float32" if spec.precision == "tf32"
                                      else spec.precision)
        if spec.precision == "tf32":
            self.backend.allow_tf32()
        data = workload.make_data(seed)
        self.x, self.y, self.rows = data.x, data.y, n_samples(data.x)  # or dicts of arrays
        self.validation = data.validation  # timed at the first measured blocks
        self.validation_timings = 0  # steady passes timed so far (the first apart)
        self.batch = min(spec.batch_size or workload.batch_size, self.rows)  # what runs
        self.steps_per_epoch = max(1, math.ceil(self.rows / self.batch))
        model = workload.built_model(keras)
        jit = {"auto": "auto", "on": True, "off": False}[spec.jit]
        model.compile(loss=workload.loss, optimizer=workload.optimizer(keras),
                      loss_weights=workload.loss_weights,
                      metrics=list(workload.metrics) or None, jit_compile=jit,
                      steps_per_execution=spec.steps_per_execution)
        if req.weights_out:
            np.savez(req.weights_out, *[np.asarray(w) for w in model.get_weights()])
        if req.weights_in:
            with np.load(req.weights_in) as npz:
                weights = [npz[f"arr_{i}"] for i in range(len(npz.files))]
            model.set_weights(weights)
        self.model = model
        if spec.pipeline == "tf.data":
            import tensorflow as tf

            # As seed 001 builds it: shuffle, batch, prefetch.
            ds = tf.data.Dataset.from_tensor_slices((self.x, self.y))
            ds = ds.shuffle(self.rows, seed=seed).batch(self.batch)
            self.dataset = ds.repeat().prefetch(tf.data.AUTOTUNE)
        setup_seconds = time.perf_counter() - t1

        # Loss trajectory from the (shared) initial weights, on fixed batches, with the
        # layers' training randomness off (dropout masks differ across backends).
        restore = suspend_random_layers(model)
        losses: list[float] = []
        losses_times: list[float] = []
        placement: dict[str, Any] = {}
        t_eq = time.perf_counter()
        for i in range(req.equivalence_steps):
            if (req.equivalence_seconds is not None and i >= req.min_equivalence_steps
                    and time.perf_counter() - t_eq > req.equivalence_seconds):
                break
            if (req.screen_step_seconds is not None and i >= req.screen_min_steps
                    and (typical := _median(losses_times[1:])) >= req.screen_step_seconds
                    and not self._refines(typical)):  # else fits measure it below
                break
            lo = (i % self.steps_per_epoch) * self.batch
            xb, yb = take(self.x, lo, lo + self.batch), take(self.y, lo, lo + self.batch)
            if restore is None and i < 2:  # the audits see the model as it trains
                out, seconds = self._audited_step(i, xb, yb, placement)
            else:
                ts = time.perf_counter()
                out = model.train_on_batch(xb, yb)
                seconds = time.perf_counter() - ts
            if seconds is not None:
                losses_times.append(seconds)
            loss = float(out[0] if isinstance(out, list | tuple) else out)
            losses.append(loss)
            if not math.isfinite(loss):
                break
        if restore is not None:
            restore()  # the timed steps train the model as written, randomness on
            if losses and math.isfinite(losses[-1]):  # audited as it trains (untimed)
                for i in range(2):
                    self._audited_step(i, xb, yb, placement)
        if isinstance(self.x, np.ndarray):
            # A loop body runs once per timestep: (batch, timesteps, features).
            placement["input_shape"] = [int(d) for d in self.x.shape[1:]]
        checkpoints = {str(s): losses[s - 1] for s in CHECKPOINT_STEPS if s <= len(losses)}
        if losses and not math.isfinite(losses[-1]):
            raise NonFiniteLoss(f"loss became {losses[-1]} at step {len(losses)}")
        input_seconds_per_batch = self._time_input_pipeline()
        self._max_warmup_seconds = req.max_warmup_seconds
        # Synced train_on_batch steps overestimate a fit step (blocks then err long);
        # a fast one is measured again as fit runs it.
        self._step_estimate = _median(losses_times[1:] or losses_times
                                      or [TARGET_BLOCK_SECONDS])
        setup_step: dict[str, Any] = {}
        if losses_times[1:]:  # the set-up's own step time (median, first step excluded)
            setup_step["setup_steps"] = len(losses_times) - 1
            setup_step["setup_step_method"] = "train_on_batch"
            if self._refines(self._step_estimate):
                self._step_estimate = self._fit_step_seconds(self._step_estimate)
                setup_step["setup_step_method"] = "fit"
            setup_step["setup_step_seconds"] = self._step_estimate
        return SetupReply(
            import_seconds=import_seconds,
            setup_seconds=setup_seconds,
            first_step_seconds=losses_times[0] if losses_times else None,
            equivalence_losses=losses,
            loss_checkpoints=checkpoints,
            jit_resolved=bool(getattr(model, "jit_compile", False)),
            data_note=data.note,
            batch_size=self.batch,
            steps_per_epoch=self.steps_per_epoch,
            flops_per_step=workload.flops_per_step(self.batch),
            placement=placement,
            validation_samples=data.validation_samples,
            workload_epochs=workload.epochs,
            input_seconds_per_batch=input_seconds_per_batch,
            epoch_estimate_seconds=self._step_estimate * self.steps_per_epoch,
            **setup_step,
        )

    def _audited_step(self, i: int, xb: Any, yb: Any,
                      placement: dict[str, Any]) -> tuple[Any, float | None]:
        """Step ``i`` of a model's first two (the first traces and compiles), with the
        backend's audit of what it runs added to ``placement``: TensorFlow's op placement
        at the first, JAX's compiled kernels after the first, torch's launched kernels at
        the second. Returns the step's result and its seconds (``None`` when profiled)."""
        model, backend = self.model, self.spec.backend
        if backend == "tensorflow" and i == 0:
            self.backend.start_placement_audit()
        if backend == "torch" and i == 1:  # kernels launched by one (untimed) step
            out, found = self.backend.profile_step(
                functools.partial(model.train_on_batch, xb, yb), self.spec.device)
            placement.update(found)
            return out, None
        ts = time.perf_counter()
        out = model.train_on_batch(xb, yb)
        seconds = time.perf_counter() - ts
        if backend == "tensorflow" and i == 0:
            placement.update(self.backend.finish_placement_audit())
        elif backend == "jax" and i == 0:
            placement.update(self.backend.kernel_audit(model, xb, yb))
        return out, seconds

    def _refines(self, step_seconds: float) -> bool:
        """Whether a set-up step this long is measured again with fits: on a backend
        whose train_on_batch calls carry their own overhead, for a short step."""
        return (getattr(self.backend, "TRAIN_ON_BATCH_OVERHEAD", False)
                and step_seconds < REFINE_BELOW_SECONDS)

    def _fit_step_seconds(self, estimate: float) -> float:
        """Seconds per step inside ``fit``: short fits of n and 2n full batches (after
        one of n that pays any start-up of fit's own path), the difference divided by
        n, so fit's per-call overhead cancels out."""
        n = math.ceil(REFINE_SECONDS / estimate)
        if self.spec.pipeline != "tf.data":  # arrays: 2n full batches must fit in them
            full = self.rows // self.batch
            if full < 2:
                return estimate
            n = min(n, full // 2)

        def fit(steps: int) -> float:
            t0 = time.perf_counter()
            if self.spec.pipeline == "tf.data":
                self.model.fit(self.dataset, epochs=1, steps_per_epoch=steps, verbose=0)
            else:
                rows = steps * self.batch
                self.model.fit(take(self.x, 0, rows), take(self.y, 0, rows),
                               batch_size=self.batch, epochs=1, verbose=0, shuffle=False)
            return time.perf_counter() - t0

        fit(n)
        t1, t2 = fit(n), fit(2 * n)
        slope = (t2 - t1) / n
        return slope if slope > 0 else t2 / (2 * n)

    def _time_input_pipeline(self, budget_s: float = 0.15) -> float | None:
        """Seconds per batch of the input pipeline alone, built as ``fit`` builds it
        (Keras' data adapter for arrays, with shuffling; the trial's tf.data dataset),
        timed over up to an epoch of batches or ``budget_s``; the first batch (start-up)
        is not counted. None when Keras' adapter is not available to time."""
        backend = self.spec.backend
        try:
            if self.spec.pipeline == "tf.data":
                it = iter(self.dataset)
            else:
                from keras.src.trainers.data_adapters import get_data_adapter

                adapter = get_data_adapter(self.x, self.y, batch_size=self.batch, shuffle=True)
                if backend == "tensorflow":
                    it = iter(adapter.get_tf_dataset())
                elif backend == "jax":
                    it = iter(adapter.get_jax_iterator())
                else:
                    it = iter(adapter.get_torch_dataloader())
            next(it)
            n, t0 = 0, time.perf_counter()
            for _ in range(max(1, self.steps_per_epoch - 1)):
                next(it)
                n += 1
                if time.perf_counter() - t0 > budget_s:
                    break
            return (time.perf_counter() - t0) / n
        except (ImportError, AttributeError, StopIteration, TypeError, ValueError):
            return None

    def _time_validation(self) -> dict[str, Any]:
        """Time one validation pass as ``fit`` runs it at an epoch end (``evaluate`` over
        the validation data at the training batch size; its loss is a host float: the
        device sync), at the session's first VALIDATION_TIMINGS measured blocks. The
        first pass of the session is reported apart: it traces and compiles the test
        function, as the first epoch of a fit does."""
        if self.validation is None or self.validation_timings >= VALIDATION_TIMINGS:
            return {}
        x_val, y_val = self.validation

        def one_pass() -> float:
            t0 = time.perf_counter()
            out = self.model.evaluate(x_val, y_val, batch_size=self.batch, verbose=0)
            float(out[0] if isinstance(out, list | tuple) else out)
            return time.perf_counter() - t0

        reply: dict[str, Any] = {}
        if not self.validation_timings:
            reply["validation_first_seconds"] = one_pass()
        reply["validation_seconds"] = [one_pass()]
        self.validation_timings += 1
        return reply

    def _plan_blocks(self, whole_epochs: bool, steps_per_block: int | None = None) -> None:
        """Cut timed blocks: whole epochs over the real data (exactly what ``fit`` does
        for the user: shuffling, the last partial batch and per-epoch overhead included),
        or K full batches of about TARGET_BLOCK_SECONDS (for long epochs). The parent
        picks one way for every trial it compares, so their blocks measure alike; a
        trial's later process is given its first process's ``steps_per_block``."""
        if steps_per_block and whole_epochs:
            plan = BlockPlan(steps_per_block,
                             max(1, steps_per_block // max(self.steps_per_epoch, 1)), None)
        elif steps_per_block:
            plan = BlockPlan(steps_per_block, 1, steps_per_block)
        else:
            plan = plan_blocks(self._step_estimate, self.steps_per_epoch, whole_epochs,
                               self.spec.steps_per_execution)
        self.epochs_per_block, self.fit_steps = plan.epochs_per_block, plan.fit_steps
        self.steps_per_block = plan.steps_per_block

    # -- timed blocks -----------------------------------------------------------------
    def run_blocks(self, channel: Channel, whole_epochs: bool = True,
                   steps_per_block: int | None = None) -> None:
        """Answer ``measure`` commands from inside ONE long ``fit``, as real training runs.

        A block ends at ``on_epoch_end``, whose loss is a host float, so every block ends
        with a device sync. The first blocks, until the time settles, are warm-up
        (reported apart). Between blocks the callback waits for the parent's next
        command, so the parent interleaves trials (A B C, A B C) without re-importing.
        """
        import keras

        self._plan_blocks(whole_epochs, steps_per_block)
        session = self

        class BlockTimer(keras.callbacks.Callback):
            def __init__(self) -> None:
                super().__init__()
                self.warmup: list[float] = []
                self.warmup_start = time.perf_counter()
                self.warming = True
                self.warmup_info: dict[str, float | int] = {}
                self.epochs_in_block = 0
                self.t0 = 0.0

            def on_epoch_begin(self, epoch, logs=None):
                if self.epochs_in_block == 0:
                    self.t0 = time.perf_counter()

            def on_epoch_end(self, epoch, logs=None):
                loss = float((logs or {})["loss"])  # host float: the device sync
                session.last_loss = loss
                if not math.isfinite(loss):
                    raise NonFiniteLoss(f"loss became {loss} after {epoch + 1} epochs")
                self.epochs_in_block += 1
                if self.epochs_in_block < session.epochs_per_block:
                    return
                self.epochs_in_block = 0
                elapsed = time.perf_counter() - self.t0
                if self.warming:
                    # Warm-up blocks are not samples; the pending request gets the first
                    # block after the time settled, with the warm-up reported beside it.
                    # A fit started after an earlier one settled (blocks now cut the other
                    # way) is compiled already: only its first block, which pays this
                    # fit's own start (a new iterator, a retrace for the last partial
                    # batch), is dropped.
                    self.warmup.append(elapsed)
                    warm_for = time.perf_counter() - self.warmup_start
                    if (settled(self.warmup) or len(self.warmup) >= MAX_WARMUP_BLOCKS
                            or warm_for > session._max_warmup_seconds or session.warmed):
                        session.warmed = True
                        self.warming = False
                        self.warmup_info = {"warmup_seconds": warm_for,
                                            "warmup_blocks": len(self.warmup)}
                    return
                reply = BlockReply(block_seconds=[elapsed], loss=loss,
                                   steps_per_block=session.steps_per_block,
                                   **self.warmup_info, **session._time_validation())
                self.warmup_info = {}
                channel.send(reply.to_message())
                msg = channel.recv()
                nxt = (MeasureRequest.from_message(msg)
                       if msg is not None and msg.get("cmd") == "measure" else None)
                if (nxt is None or nxt.whole_epochs != whole_epochs
                        or nxt.steps_per_block not in (None, session.steps_per_block)):
                    # Another command, or blocks to be cut another way: end this fit
                    # (the main loop answers the command, or starts a new fit).
                    channel.pending = msg
                    self.model.stop_training = True

        if self.spec.pipeline == "tf.data":
            # The dataset repeats forever: a block is one pass or K batches of it.
            x, y, batch = self.dataset, None, None
            steps = self.fit_steps or self.steps_per_epoch
        elif self.fit_steps is None:
            x, y, batch, steps = self.x, self.y, self.batch, None
        else:
            # Keras ends a steps_per_epoch epoch early when the arrays run out: give it
            # whole blocks of full batches.
            k = self.fit_steps
            full = (self.rows // self.batch) * self.batch
            usable = min((self.steps_per_epoch // k) * k * self.batch, full)
            usable = full if usable < k * self.batch else usable
            x, y, batch, steps = take(self.x, 0, usable), take(self.y, 0, usable), self.batch, k
        self.model.fit(x, y, batch_size=batch, epochs=10**9, steps_per_epoch=steps,
                       verbose=0, shuffle=True, callbacks=[BlockTimer()])

    def finish(self) -> FinishReply:
        return FinishReply(
            peak_device_memory_bytes=self.backend.peak_memory_bytes(self.spec.device),
            peak_rss_bytes=_peak_rss_bytes(),
            final_loss=self.last_loss,
        )
