"""Replay a machine profile to the unchanged advisor.

A :class:`ReplayWorker` answers the trial engine's worker protocol (``prepare``,
``setup``, ``measure``, ``finish``) from a profile's records instead of a process, and
advances a :class:`VirtualClock` by what each step cost on the profiled machine, so the
advisor's budget is spent as it would be there. A candidate the profile lacks ends as
``skipped`` at no cost ("absent from the profile"), never with invented figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from devicebench.launch.worker import WorkerFailure
from devicebench.profiles.profile import MachineProfile, TrialRecord
from devicebench.trials.blocks import TARGET_BLOCK_SECONDS, plan_blocks
from devicebench.trials.protocol import (
    BlockReply,
    FinishReply,
    MeasureRequest,
    SetupReply,
    SetupRequest,
)
from devicebench.trials.spec import TrialSpec


class VirtualClock:
    """Seconds on the profiled machine: advanced by the replay, read by the advisor."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += max(0.0, seconds)

    def advance_to(self, t: float) -> None:
        self.now = max(self.now, t)


class ImportWave:
    """Workers that start together import their frameworks at once; on a machine with
    ``cores`` CPU cores, k CPU-bound imports at once each take about max(1, k / cores)
    times one import alone (records hold the import of one worker alone)."""

    def __init__(self, cores: int | None) -> None:
        self.cores = cores
        self.size = 0
        self.open = False

    def join(self) -> None:
        if not self.open:
            self.size, self.open = 0, True
        self.size += 1

    def close(self) -> None:
        self.open = False

    def seconds(self, alone: float) -> float:
        if not self.cores:
            return alone
        return alone * max(1.0, self.size / self.cores)


class ReplayWorker:
    """One trial's worker, served from its profile record."""

    def __init__(self, spec: TrialSpec, record: TrialRecord, clock: VirtualClock,
                 imports: ImportWave | None = None, replica: int = 0) -> None:
        """``replica``: the how-manieth worker process of ``spec`` this is. A profile holds
        one process's blocks per configuration, so a replica replays the same recorded
        blocks, starting ``replica`` quarters of the way through them."""
        self.spec = spec
        self.record = record
        self.clock = clock
        self.imports = imports or ImportWave(None)
        self._pending: dict[str, Any] | None = None
        self._import_started: float | None = None  # set by prepare until its reply
        self._block = (replica * len(record.step_seconds)) // 4 if record.step_seconds else 0
        self._warmed = False
        self._step_estimate = record.setup_step or TARGET_BLOCK_SECONDS

    # -- the Worker protocol of devicebench.trials.engine -----------------------------
    def send(self, message: dict[str, Any]) -> None:
        cmd = message.get("cmd")
        if cmd == "prepare":  # workers start together: imports overlap
            self.imports.join()
            self._pending = {"ok": True}
            self._import_started = self.clock.now
        elif cmd == "finish":
            r = self.record
            self._pending = FinishReply(r.peak_device_memory_bytes, r.peak_rss_bytes,
                                        r.final_loss).to_message()
        else:
            self._pending = self._answer(message)

    def receive(self, timeout: float) -> dict[str, Any]:
        reply, self._pending = self._pending, None
        if reply is None:
            raise WorkerFailure("crashed", "replay: receive without a command")
        if self._import_started is not None:  # the reply to prepare
            took = self.imports.seconds(self.record.import_seconds)
            reply["import_seconds"] = took
            self.clock.advance_to(self._import_started + took)
            self._import_started = None
        return reply

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        start = self.clock.now
        self.send(message)
        reply = self.receive(timeout)
        if self.clock.now - start > timeout:
            took = self.clock.now - start
            self.clock.now = start + timeout  # stopped there, as a real worker is killed
            raise WorkerFailure("timeout", f"replay: no reply within {timeout:.0f} s "
                                f"(the profiled machine took {took:.1f} s)")
        return reply

    def begin_close(self) -> None:
        pass

    def close(self, timeout: float = 10) -> None:
        pass

    def kill(self) -> None:
        pass

    # -- answers ----------------------------------------------------------------------
    def _answer(self, message: dict[str, Any]) -> dict[str, Any]:
        cmd = message.get("cmd")
        self.imports.close()
        if cmd == "setup":
            return self._setup(message)
        if cmd == "measure":
            return self._measure(MeasureRequest.from_message(message).whole_epochs)
        raise WorkerFailure("error", f"replay: unknown command {cmd!r}")

    def _setup(self, msg: dict[str, Any]) -> dict[str, Any]:
        r = self.record
        if r.status != "ok":
            self.clock.advance(r.setup_seconds)
            raise WorkerFailure(r.status, r.error or f"{r.status} (recorded)")
        req = SetupRequest.from_message(msg, spec=self.spec)
        step = r.setup_step or 0.0
        n = req.equivalence_steps
        cap = req.equivalence_seconds
        if cap is not None and step > 0:
            n = min(n, max(req.min_equivalence_steps, math.ceil(cap / step) + 1))
        screen = req.screen_step_seconds
        if screen is not None and step >= screen:
            n = min(n, req.screen_min_steps + 1)
        first = r.first_step_seconds if r.first_step_seconds is not None else step
        self.clock.advance(r.setup_seconds + first + step * max(n - 1, 0))
        losses = [v for s, v in zip(r.loss_steps, r.equivalence_losses, strict=False)
                  if s <= n] or list(r.equivalence_losses[:1])
        return SetupReply(
            import_seconds=r.import_seconds, setup_seconds=r.setup_seconds,
            first_step_seconds=first, equivalence_losses=losses,
            loss_checkpoints={str(s): v for s, v in zip(r.loss_steps, losses, strict=False)},
            jit_resolved=r.jit_resolved, data_note=r.data_note,
            batch_size=r.batch_size, steps_per_epoch=r.steps_per_epoch,
            flops_per_step=r.flops_per_step, placement=r.placement,
            input_seconds_per_batch=r.input_seconds_per_batch,
            setup_step_seconds=step or None, setup_steps=max(n - 1, 0),
            setup_step_method=f"replayed ({r.origin})",
            epoch_estimate_seconds=step * r.steps_per_epoch,
        ).to_message()

    def _measure(self, whole_epochs: bool) -> dict[str, Any]:
        r = self.record
        k = plan_blocks(self._step_estimate, r.steps_per_epoch, whole_epochs,
                        self.spec.steps_per_execution).steps_per_block
        warmup: dict[str, Any] = {}
        if not self._warmed:
            self._warmed = True
            self.clock.advance(r.warmup_seconds)
            warmup = {"warmup_seconds": r.warmup_seconds, "warmup_blocks": 1}
        sample = r.step_seconds[self._block % len(r.step_seconds)]
        self._block += 1
        self.clock.advance(sample * k)
        return BlockReply(block_seconds=[sample * k], steps_per_block=k, loss=r.final_loss,
                          **warmup).to_message()


def replay_launcher(profile: MachineProfile, clock: VirtualClock
                    ) -> Callable[[TrialSpec], ReplayWorker]:
    """A ``start_worker`` for :class:`devicebench.trials.engine.TrialGroup` that serves
    ``profile``; a spec the profile lacks fails at once as ``skipped``."""

    imports = ImportWave(profile.snapshot.get("host", {}).get("cpu_cores_logical"))
    started: dict[TrialSpec, int] = {}

    def start(spec: TrialSpec) -> ReplayWorker:
        record = profile.record(spec)
        if record is None:
            raise WorkerFailure("skipped", f"{spec.label} is absent from the "
                                f"{profile.name} profile (not measured there)")
        replica = started.get(spec, 0)
        started[spec] = replica + 1
        return ReplayWorker(spec, record, clock, imports, replica=replica)

    return start


def replay_advise(profile: MachineProfile, workload: str, *, budget_s: float,
                  baseline: TrialSpec | None = None, epochs: int | None = None,
                  equivalence_steps: int = 20, on_result=None, replicate: bool = True):
    """Run the unchanged advisor on ``profile``'s recorded ``workload``: its snapshot,
    device figures and trials, on a virtual clock that advances by what each step cost
    there. The baseline defaults to what the main job would pick on that machine;
    ``on_result(result)`` sees each replayed trial as advise's own callback does;
    ``replicate=False`` measures the final in one process per configuration.

    Returns:
        (the :class:`devicebench.advisor.advice.AdviceResult`, seconds the advisor
        spent on the profiled machine's clock).

    Example:
        >>> from devicebench.profiles import load_profile
        >>> advice, spent = replay_advise(load_profile("h200"), "seed-rnn", budget_s=40)
        >>> advice.recommended.label
        'jax/cpu'
    """
    from devicebench.advisor.advice import advise_workload, default_baseline
    from devicebench.advisor.facts import workload_facts
    from devicebench.advisor.search import engine_group

    snapshot = profile.env_snapshot()
    why = "given"
    if baseline is None:
        baseline, why = default_baseline(snapshot, workload)
    elif profile.record(baseline) is None:  # refused up front, not "the baseline failed"
        from devicebench.errors import InputError

        recs = profile.workloads.get(workload, [])
        have = ", ".join(sorted({r.spec.label for r in recs})) or "none"
        example = (f" (e.g. --baseline backend={recs[0].spec.backend},"
                   f"device={recs[0].spec.device})" if recs else "")
        raise InputError(f"profile {profile.name} has no {workload} trial for the baseline "
                         f"{baseline.label}", why="a replay can only serve what was recorded",
                         fix=f"pass a recorded configuration: {have}{example}")
    clock = VirtualClock()
    figures = {d: f for d in profile.figures if (f := profile.device_figures(d))}
    advice = advise_workload(
        workload, snapshot, baseline=baseline, budget_s=budget_s, epochs=epochs,
        equivalence_steps=equivalence_steps,
        facts=workload_facts(workload),
        device_figures=figures, baseline_reason=why,
        start_group=engine_group(start_worker=replay_launcher(profile, clock), clock=clock,
                                 on_result=on_result),
        clock=clock, cpu_rate=None, replicate=replicate)
    if any(r.result.processes > 1 for r in advice.rows):
        advice = replace(advice, notes=[
            *advice.notes,
            f"replay: the {profile.name} profile holds one process's blocks per "
            "configuration; each extra process replayed those same recorded blocks (from "
            "another block on), so the spread across processes here is that one "
            "process's, not a second process's"])
    return advice, clock.now
