"""Run a comparison: one worker process per trial, measured in interleaved rounds.

Each trial gets its own process (so every process-global setting is isolated). All the
workers of one workload stay alive and are driven round by round (A B C, A B C, ...),
so drift on a busy machine hits every configuration alike, and the import cost is paid
once per trial — and, as the workers start together, their imports overlap.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from devicebench.launch import Worker, WorkerFailure
from devicebench.trials.blocks import MIN_EQUIVALENCE_STEPS, SCREEN_MIN_STEPS
from devicebench.trials.options import (  # re-exported: callers import them from here
    NO_LOSS_CHECK,
    WORKER_MODULE,
    Event,
    LossCheck,
    RunOptions,
    _failed,
    _with_verdict,
    default_reference,
    start_process_worker,
)
from devicebench.trials.protocol import (
    FINISH,
    BlockReply,
    FinishReply,
    MeasureRequest,
    PrepareRequest,
    SetupReply,
    SetupRequest,
)
from devicebench.trials.replication import measure_replicated
from devicebench.trials.result import TrialResult, fastest_setup_step
from devicebench.trials.rounds import block_changes, cut_as, set_blocks_apart, start_replicas
from devicebench.trials.rounds import bounded_request as _bounded_request
from devicebench.trials.spec import TrialSpec

DEFAULT_OPTIONS = RunOptions()  # frozen: safe as a default argument

__all__ = ["NO_LOSS_CHECK", "WORKER_MODULE", "Event", "LossCheck", "RunOptions",
           "TrialGroup", "default_reference", "run_workload_group", "start_process_worker"]


class TrialGroup:
    """Live workers of one workload, measured together round by round.

    Trials are added (workers start at once, imports overlap; set-ups run in turn, the
    reference first), measured in interleaved rounds as often as the caller likes (in
    one or more processes each: :meth:`replicate`), and finished when the caller says
    (results then final, to ``on_result``): a search keeps survivors' workers alive.

    Example:
        >>> with TrialGroup(reference, options) as group:  # doctest: +SKIP
        ...     group.add([reference, candidate])
        ...     group.measure(RunOptions(min_rounds=2, max_rounds=2))
        ...     group.finish([candidate])          # pruned: its result is final
        ...     group.measure(options)             # the rest get more rounds
        >>> group.results[reference].step_time  # doctest: +SKIP
    """

    def __init__(
        self,
        reference: TrialSpec,
        options: RunOptions = DEFAULT_OPTIONS,
        *,
        equivalence_seconds: float | None = None,
        screen_factor: float | None = None,
        start_worker: Callable[[TrialSpec], Worker] | None = None,
        on_event: Event | None = None,
        on_result: Callable[[TrialResult], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        run_id: int | None = None,
        group_id: str | None = None,
        loss_check: LossCheck | None = None,
    ) -> None:
        """Args:
            reference: the trial others are compared with; add it first: its initial
                weights are copied to every other trial.
            options: set-up settings (equivalence steps, timeouts, memory limit, warm-up).
            equivalence_seconds: cap on each trial's equivalence steps (None: all run).
            screen_factor: a trial (not the reference) whose set-up steps already take
                this many times the fastest set-up step so far stops its equivalence
                steps early: a search that screens on set-up steps will not time it.
            start_worker: launcher seam (default: a fresh process per trial, under
                ``options.memory_limit_bytes``), or a replayed profile
                (:mod:`devicebench.profiles.replay`).
            clock: what ``measure``'s budget is counted on (a replay's virtual clock);
            run_id: the store's run of these trials (carried by every result).
            group_id: this group's id, carried by every result (default: a fresh one);
                only results of one group are paired by round.
            loss_check: the equivalence policy, applied to each trial's equivalence
                losses against the reference's (None: verdicts stay ``n/a``).
        """
        self.reference = reference
        self.options = options
        self.equivalence_seconds = equivalence_seconds
        self.screen_factor = screen_factor
        self._start_worker = start_worker or (lambda spec: start_process_worker(
            spec, options.memory_limit_bytes))
        self._clock = clock
        self._emit = on_event or (lambda *a: None)
        self._on_result = on_result
        self.run_id = run_id
        self.loss_check = loss_check
        self.group_id = group_id or uuid.uuid4().hex[:12]
        # Each value is replaced (never changed in place) as the trial goes on.
        self.results: dict[TrialSpec, TrialResult] = {}
        self.order: list[TrialSpec] = []
        self.finished: set[TrialSpec] = set()
        self._workers: dict[TrialSpec, Worker] = {}
        # More worker processes for the trials a verdict rests on: replica k (1, 2, ...)
        # of a trial is self._replicas[spec][k - 1]; replica 0 is self._workers[spec].
        self._replicas: dict[TrialSpec, list[Worker]] = {}
        self._replica_ids: dict[TrialSpec, list[int]] = {}
        self._estimates: dict[TrialSpec, float] = {}
        self._whole: bool | None = None  # how the live trials' blocks are cut now
        self._rounds = 0
        self._comparable_rounds = 0
        self._tmp = tempfile.TemporaryDirectory(prefix="devicebench-weights-")
        self._weights = Path(self._tmp.name) / "initial_weights.npz"
        self._weights_source: TrialSpec | None = None

    def __enter__(self) -> TrialGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def live(self) -> list[TrialSpec]:
        return [s for s in self.order if s not in self.finished]

    @property
    def rounds_done(self) -> int:
        """Rounds kept since the live trials' blocks were last cut another way."""
        return self._comparable_rounds

    def _update(self, spec: TrialSpec, **changes: Any) -> TrialResult:
        """Replace ``spec``'s result with a copy carrying ``changes``."""
        self.results[spec] = replace(self.results[spec], **changes)
        return self.results[spec]

    def _fail(self, spec: TrialSpec, exc: WorkerFailure) -> None:
        self.results[spec] = _failed(self.results[spec], exc)

    def _done(self, *specs: TrialSpec) -> None:
        """These trials' results are final: their workers are told to exit (all at
        once), each result goes to ``on_result`` (stored before anything else can go
        wrong), then the workers' exits are awaited."""
        closing = []
        for spec in specs:
            self.finished.add(spec)
            self._replica_ids.pop(spec, None)
            for w in [self._workers.pop(spec, None), *self._replicas.pop(spec, [])]:
                if w is not None:
                    w.begin_close()
                    closing.append(w)
        try:
            for spec in specs:
                result = self.results[spec]
                if result.status == "nan":
                    result = self.results[spec] = _with_verdict(result, None, None)
                if self._on_result is not None:
                    self._on_result(result)
                self._emit("done", spec, {"status": result.status})
        finally:
            for w in closing:
                w.close()

    def _ask(self, spec: TrialSpec, exchange: Callable[[], Any]) -> Any:
        """One exchange with ``spec``'s worker; if it fails, the trial ends with the
        failure's status and error (stored at once) and None is returned."""
        try:
            return exchange()
        except WorkerFailure as exc:
            self._fail(spec, exc)
            self._done(spec)
            return None

    def add(self, specs: list[TrialSpec], start_by: dict[TrialSpec, float] | None = None,
            end_by: dict[TrialSpec, float] | None = None) -> None:
        """Start workers for ``specs`` (imports overlap), then set each up in turn; a
        trial (not the reference) whose set-up would start after its ``start_by`` time,
        or has not ended by its ``end_by`` time (on this group's clock: it is stopped
        there), ends as ``skipped`` (a search's budget)."""
        new = [s for s in dict.fromkeys(specs) if s not in self.results]
        if self.reference in new:  # the reference sets up first: others copy its weights
            new.remove(self.reference)
            new.insert(0, self.reference)
        opts = self.options

        def start(spec: TrialSpec) -> None:
            self._workers[spec] = self._start_worker(spec)
            self._workers[spec].send(PrepareRequest(spec).to_message())

        for spec in new:
            self.results[spec] = TrialResult(spec, run_id=self.run_id, group_id=self.group_id)
            self.order.append(spec)
            self._emit("start", spec, {})
            self._ask(spec, lambda s=spec: start(s))
        # Every import ends before the first set-up: no set-up step runs beside an import.
        for spec in [s for s in new if s not in self.finished]:
            self._ask(spec, lambda s=spec: self._workers[s].receive(timeout=opts.import_timeout))
        for spec in new:
            if spec in self.finished:
                continue
            latest = (start_by or {}).get(spec)
            if latest is not None and spec != self.reference and self._clock() > latest:
                self._fail(spec, WorkerFailure(
                    "skipped", "budget: its set-up would have started after the search's "
                    "set-up deadline"))
                self._done(spec)
                continue
            self._emit("setup", spec, {})
            fastest = fastest_setup_step(self.results.values())
            screen = (self.screen_factor * fastest
                      if self.screen_factor and fastest and spec != self.reference else None)
            first = self._weights_source is None
            req = SetupRequest(
                spec, weights_in=None if first else str(self._weights),
                weights_out=str(self._weights) if first else None,
                equivalence_steps=opts.equivalence_steps,
                equivalence_seconds=self.equivalence_seconds,
                min_equivalence_steps=MIN_EQUIVALENCE_STEPS,
                max_warmup_seconds=opts.max_warmup_seconds,
                screen_step_seconds=screen, screen_min_steps=SCREEN_MIN_STEPS)
            wire = req.to_message()
            end = None if spec == self.reference else (end_by or {}).get(spec)
            msg = self._ask(spec, lambda s=spec, m=wire, e=end: _bounded_request(
                self._workers[s], m, opts.setup_timeout, e, self._clock))
            if msg is None:
                continue
            reply = SetupReply.from_message(msg)
            if self._weights_source is None:
                self._weights_source = spec
            self._estimates[spec] = (float("inf") if reply.epoch_estimate_seconds is None
                                     else reply.epoch_estimate_seconds)
            r = self._update(spec, **reply.result_fields())
            if spec != self._weights_source:
                # Known from the equivalence steps alone: a search can drop a candidate
                # whose loss differs before timing it.
                self.results[spec] = _with_verdict(r, self.results[self._weights_source],
                                                   self.loss_check)

    def processes(self, spec: TrialSpec) -> int:
        """Live worker processes measuring ``spec`` (0 once it is finished)."""
        if spec in self.finished or spec not in self._workers:
            return 0
        return 1 + len(self._replicas.get(spec, []))

    def replicate(self, counts: dict[TrialSpec, int]) -> dict[TrialSpec, int]:
        """Give live trials more worker processes, up to ``counts[spec]`` in all (new
        ones import together, load the shared weights, run the fewest equivalence steps;
        set-up figures stay the first process's). Each later round times one block in
        every process, interleaved, tagged with its replica; a replica that fails is
        dropped (its blocks kept). Returns the processes each spec has now."""
        opts = self.options
        wanted = {spec: n - self.processes(spec) for spec, n in counts.items()
                  if spec not in self.finished and spec in self._workers
                  and self.results[spec].status == "ok"}
        ready = start_replicas(self._start_worker, wanted, self._replica_ids,
                               opts.import_timeout, self._emit)
        for spec, w, k in ready:
            req = SetupRequest(
                spec, weights_in=str(self._weights) if self._weights_source else None,
                equivalence_steps=MIN_EQUIVALENCE_STEPS, equivalence_seconds=0.0,
                min_equivalence_steps=MIN_EQUIVALENCE_STEPS,
                max_warmup_seconds=opts.max_warmup_seconds)
            self._replicas.setdefault(spec, []).append(w)
            self._replica_ids.setdefault(spec, []).append(k)
            try:
                w.request(req.to_message(), timeout=opts.setup_timeout)
            except WorkerFailure as exc:
                self._drop_replica(w, spec, k, exc)
        return {s: self.processes(s) for s in counts}

    def _drop_replica(self, worker: Worker, spec: TrialSpec, k: int,
                      exc: WorkerFailure) -> None:
        i = self._replicas[spec].index(worker)
        del self._replicas[spec][i], self._replica_ids[spec][i]
        worker.kill()
        worker.close()
        self._emit("replica-failed", spec, {"replica": k, "error": exc.message})

    def _processes_of(self, spec: TrialSpec) -> list[tuple[int, Worker]]:
        return [(0, self._workers[spec]),
                *zip(self._replica_ids.get(spec, []), self._replicas.get(spec, []),
                     strict=True)]

    def measure(self, options: RunOptions,
                enough: Callable[[dict[TrialSpec, TrialResult]], bool] | None = None) -> int:
        """Interleaved rounds over the live trials until they have had, in all, at
        least ``options.min_rounds`` and at most ``options.max_rounds``, stopping when
        every CI is within ``options.target_ci``, ``enough(results)`` says the figures
        answer the caller's question, or another round as long as the last would end
        past ``options.budget_seconds`` (of this call). Returns the number of rounds
        this call ran."""
        # One way of cutting blocks for every live trial: whole epochs when all of them
        # are short, else K-step blocks (mixing the two would bias ratios). When the
        # live set changes the answer (a search pruned the slow candidates, whose long
        # epochs forced K-step blocks), the workers switch and the blocks cut the other
        # way are dropped: step times from the two ways do not mix.
        whole = all(self._estimates.get(s, float("inf")) <= options.whole_epoch_seconds
                    for s in self.live)
        if self._whole is not None and whole != self._whole:
            for spec in self.live:  # kept apart: what the pruned were compared against
                self._update(spec, **set_blocks_apart(self.results[spec]))
            self._comparable_rounds = 0
        self._whole = whole
        for spec in self.live:
            self._update(spec, blocks_cut="epochs" if whole else "steps")
        start = self._clock()
        ran = 0
        while self._comparable_rounds < options.max_rounds and self.live:
            round_start = self._clock()
            rnd = self._rounds
            depth = max((self.processes(sp) for sp in self.live), default=1)
            for level in range(depth):  # A0 B0 C0, A1 B1, ...: replicas interleave too
                for spec in self.live:
                    procs = self._processes_of(spec)
                    if level >= len(procs):
                        continue
                    k, worker = procs[level]
                    k_steps = self.results[spec].steps_per_block if k else None  # 1 K/trial
                    request = MeasureRequest(bool(self._whole), k_steps).to_message()
                    if k == 0:
                        msg = self._ask(spec, lambda w=worker, m=request: w.request(
                            m, timeout=options.block_timeout))
                        if msg is None:
                            continue
                        reply = BlockReply.from_message(msg)
                    else:
                        try:
                            msg = worker.request(request, timeout=options.block_timeout)
                            cut_as(reply := BlockReply.from_message(msg), self.results[spec])
                        except WorkerFailure as exc:
                            self._drop_replica(worker, spec, k, exc)
                            continue
                    self._update(spec, **block_changes(self.results[spec], reply, rnd, k))
            self._rounds += 1
            self._comparable_rounds += 1
            ran += 1
            self._emit("round", None, {"round": ran, "max_rounds": options.max_rounds})
            if self._comparable_rounds < options.min_rounds:
                continue
            precise = all((st := self.results[s].step_time) is not None
                          and st.rel_ci_halfwidth <= options.target_ci for s in self.live)
            # Another round like this one would end past the budget: stop now, so the
            # budget is kept to within the rounds' noise, not overrun by a whole round.
            now = self._clock()
            if (precise or now - start + (now - round_start) > options.budget_seconds
                    or (enough is not None and enough(self.results))):
                break
        return ran

    def finish(self, specs: list[TrialSpec] | None = None) -> None:
        """End these live trials (default: all): memory, final loss, loss verdict. The
        workers are asked together and exit together."""
        ending = [s for s in (self.live if specs is None else specs) if s not in self.finished]
        asked = []
        for spec in ending:
            try:
                self._workers[spec].send(FINISH)
                asked.append(spec)
            except WorkerFailure as exc:
                self._fail(spec, exc)
        for spec in asked:
            try:
                reply = FinishReply.from_message(self._workers[spec].receive(timeout=60))
                self._update(spec, peak_device_memory_bytes=reply.peak_device_memory_bytes,
                             peak_rss_bytes=reply.peak_rss_bytes, final_loss=reply.final_loss)
            except WorkerFailure as exc:
                self._fail(spec, exc)
        for spec in ending:
            self.results[spec] = _with_verdict(
                self.results[spec],
                self.results.get(self._weights_source) if self._weights_source else None,
                self.loss_check)
        self._done(*ending)

    def close(self) -> None:
        """Kill whatever is still running (an interrupted run) and clean up."""
        try:
            for w in [*self._workers.values(),
                      *(r for rs in self._replicas.values() for r in rs)]:
                w.kill()
                w.close()
            self._workers.clear()
            self._replicas.clear()
        finally:
            self._tmp.cleanup()


def run_workload_group(
    specs: list[TrialSpec],
    options: RunOptions = DEFAULT_OPTIONS,
    *,
    reference: TrialSpec | None = None,
    start_worker: Callable[[TrialSpec], Worker] | None = None,
    on_event: Event | None = None,
    on_result: Callable[[TrialResult], None] | None = None,
    enough: Callable[[dict[TrialSpec, TrialResult]], bool] | None = None,
    run_id: int | None = None,
    loss_check: LossCheck | None = None,
    replicate: bool = False,
    on_replication: Callable[[Any], None] | None = None,
) -> list[TrialResult]:
    """Measure trials of one workload against each other, interleaved.

    Args:
        specs: the trials (same workload); duplicates are measured once.
        reference: the trial others are compared with (default: :func:`default_reference`);
            its initial weights are copied to every other trial.
        start_worker: launcher seam (tests pass a fake); default: a fresh process.
        on_event: progress callback ``(event, spec, info)``.
        on_result: called once per trial as soon as its result is final (store it there).
        enough: an extra stop rule past ``options.min_rounds`` (see
            :meth:`TrialGroup.measure`), e.g. :func:`devicebench.trials.summary.ratios_precise`.
        run_id: the store's run the results belong to (carried by each).
        loss_check: the equivalence policy (see :class:`TrialGroup`).
        replicate: measure the reference, its accelerator/CPU partner and the likely
            winner in two or more processes each, as the budget holds
            (:func:`devicebench.trials.replication.measure_replicated`);
            ``on_replication`` receives what was done.

    Returns:
        one TrialResult per spec, in the given order; a failed trial has its status and
        error set and never stops the others.
    """
    specs = list(dict.fromkeys(specs))
    ref = reference if reference in specs else default_reference(specs)
    with TrialGroup(ref, options, start_worker=start_worker, on_event=on_event,
                    on_result=on_result, run_id=run_id, loss_check=loss_check) as group:
        group.add(specs)
        if replicate:  # one configuration too: its absolute time is the headline
            measure_replicated(group, options, enough, clock=time.monotonic,
                               on_replication=on_replication)
        else:
            group.measure(options, enough)
        group.finish()
    return [group.results[s] for s in specs]
