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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from devicebench.errors import strip_ansi
from devicebench.launch import Worker, WorkerFailure, WorkerProcess, worker_env
from devicebench.trials.blocks import MIN_EQUIVALENCE_STEPS, SCREEN_MIN_STEPS, WHOLE_EPOCH_SECONDS
from devicebench.trials.protocol import (
    FINISH,
    BlockReply,
    FinishReply,
    MeasureRequest,
    PrepareRequest,
    SetupReply,
    SetupRequest,
)
from devicebench.trials.result import TrialResult, fastest_setup_step
from devicebench.trials.spec import TrialSpec

WORKER_MODULE = "devicebench.trials.worker"


@dataclass(frozen=True)
class RunOptions:
    """How long and how precisely to measure.

    Attributes:
        min_rounds: rounds always measured (per trial one timed block per round).
        max_rounds: stop after this many rounds.
        budget_seconds: measuring stops (past min_rounds) when another round like the
            last would end after this long, even if the CI target is not met; the table
            then says the spread is wide.
        target_ci: stop when every trial's 95% CI half-width is at most this fraction.
        equivalence_steps: steps from the shared initial weights whose losses are compared.
        setup_timeout: seconds for a worker's build, compile, equivalence steps and
            warm-up (the user's ``--timeout``).
        import_timeout: seconds for a worker's framework import, apart: workers import
            side by side, and on a loaded machine an import alone can take a minute.
        block_timeout: seconds for one round's block(s) of one trial.
        memory_limit_bytes: resident-memory limit of each worker (its framework and
            children included): the parent kills it there and records ``oom``.
        whole_epoch_seconds: when every live trial's epoch is estimated shorter than
            this, blocks are whole epochs (as the user's fit runs them); otherwise every
            trial uses blocks of K steps (0: always K steps). Decided at each measure.
        max_warmup_seconds: warm-up stops after this long even if not settled.
    """

    min_rounds: int = 5
    max_rounds: int = 30
    budget_seconds: float = 60.0
    target_ci: float = 0.03
    equivalence_steps: int = 50
    setup_timeout: float = 300.0
    import_timeout: float = 600.0
    block_timeout: float = 120.0
    memory_limit_bytes: int | None = None
    whole_epoch_seconds: float = WHOLE_EPOCH_SECONDS
    max_warmup_seconds: float = 60.0


def start_process_worker(spec: TrialSpec, memory_limit_bytes: int | None = None) -> Worker:
    """A fresh worker process with ``spec``'s process-global settings in its environment;
    killed (status ``oom``) if its resident memory reaches ``memory_limit_bytes``."""
    return WorkerProcess.start(WORKER_MODULE, env=worker_env(spec.backend, spec.device,
                                                             spec.threads),
                               memory_limit_bytes=memory_limit_bytes)


def default_reference(specs: list[TrialSpec]) -> TrialSpec:
    """TensorFlow, cpu, float32, the workload's defaults if present; else the first spec."""
    for s in specs:
        if (s.backend, s.device, s.precision, s.jit, s.batch_size) == (
            "tensorflow", "cpu", "float32", "auto", None):
            return s
    return specs[0]


Event = Callable[[str, TrialSpec | None, dict[str, Any]], None]
# (reference, candidate) -> (verdict, detail): do the two train the same model? The
# caller's policy (tolerances per precision): devicebench.advisor.equivalence.loss_check.
LossCheck = Callable[[TrialResult, TrialResult], tuple[str, str]]
NO_LOSS_CHECK = "losses not compared (no loss check was given)"


def _failed(result: TrialResult, exc: WorkerFailure) -> TrialResult:
    """``result`` ended by ``exc``: its status, error and tails (a new record)."""
    changes: dict[str, Any] = {
        "status": exc.status,
        "error": strip_ansi(exc.message),  # stored text: no terminal colour codes
        "stderr_tail": strip_ansi(exc.stderr_tail)[-2000:],
        "traceback_tail": strip_ansi(exc.traceback_tail),
    }
    if exc.peak_rss_bytes is not None:
        changes["peak_rss_bytes"] = exc.peak_rss_bytes
    if exc.status == "nan":
        changes["nonfinite"] = True
    return replace(result, **changes)


class TrialGroup:
    """Live workers of one workload, measured together round by round.

    Trials are added (their workers start at once, so the framework imports overlap;
    then each is set up in turn, the reference first), measured in interleaved rounds
    as often as the caller likes, and finished when the caller says (their results are
    final and go to ``on_result`` then). A search keeps the survivors' workers alive from one rung
    to the next and into the final comparison, never paying a set-up twice.

    Example:
        >>> with TrialGroup(reference, options) as group:
        ...     group.add([reference, candidate])
        ...     group.measure(RunOptions(min_rounds=2, max_rounds=2))
        ...     group.finish([candidate])          # pruned: its result is final
        ...     group.measure(options)             # the rest get more rounds
        >>> group.results[reference].step_time
    """

    def __init__(
        self,
        reference: TrialSpec,
        options: RunOptions = RunOptions(),
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
            clock: what ``measure``'s budget is counted on (a replay's virtual clock).
            run_id: the store's run these trials belong to (carried by every result).
            group_id: this group's id, carried by every result (default: a fresh one);
                only results of one group are paired by round.
            loss_check: the caller's equivalence policy, applied to each trial's
                equivalence losses against the reference's (None: verdicts stay ``n/a``).
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
        """Rounds whose blocks are kept (since the live trials' blocks were last cut
        another way)."""
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
            w = self._workers.pop(spec, None)
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

    def add(self, specs: list[TrialSpec],
            start_by: dict[TrialSpec, float] | None = None) -> None:
        """Start workers for ``specs`` (imports overlap), then set each up in turn; a
        trial (not the reference) whose set-up would start after its ``start_by`` time
        (on this group's clock) is not set up: it ends as ``skipped`` (a search's
        budget)."""
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
        # Every import finishes before the first set-up, so no set-up (its first step,
        # its equivalence steps, the step estimate blocks are cut by) runs beside one.
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
            msg = self._ask(spec, lambda s=spec, m=wire: self._workers[s].request(
                m, timeout=opts.setup_timeout))
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
                r = self.results[spec]
                self._update(spec, earlier_blocks={
                    "cut": r.blocks_cut, "steps_per_block": r.steps_per_block,
                    "block_seconds": list(r.block_seconds),
                    "block_rounds": list(r.block_rounds)}, block_seconds=(), block_rounds=())
            self._comparable_rounds = 0
        self._whole = whole
        for spec in self.live:
            self._update(spec, blocks_cut="epochs" if whole else "steps")
        start = self._clock()
        ran = 0
        while self._comparable_rounds < options.max_rounds and self.live:
            round_start = self._clock()
            rnd = self._rounds
            for spec in self.live:
                msg = self._ask(spec, lambda s=spec: self._workers[s].request(
                    MeasureRequest(bool(self._whole)).to_message(),
                    timeout=options.block_timeout))
                if msg is None:
                    continue
                reply = BlockReply.from_message(msg)
                r = self.results[spec]
                changes: dict[str, Any] = {
                    "block_seconds": r.block_seconds + tuple(reply.block_seconds),
                    "block_rounds": r.block_rounds + (rnd,) * len(reply.block_seconds)}
                if reply.warmup_seconds is not None:
                    changes["warmup_seconds"] = reply.warmup_seconds
                    changes["warmup_blocks"] = reply.warmup_blocks or 0
                if reply.validation_first_seconds is not None:
                    changes["validation_first_seconds"] = reply.validation_first_seconds
                if reply.validation_seconds:
                    changes["validation_seconds"] = (r.validation_seconds
                                                     + tuple(reply.validation_seconds))
                    changes["validation_rounds"] = (r.validation_rounds
                                                    + (rnd,) * len(reply.validation_seconds))
                if reply.steps_per_block is not None:
                    changes["steps_per_block"] = reply.steps_per_block
                self._update(spec, **changes)
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
            for w in self._workers.values():
                w.kill()
                w.close()
            self._workers.clear()
        finally:
            self._tmp.cleanup()


def run_workload_group(
    specs: list[TrialSpec],
    options: RunOptions = RunOptions(),
    *,
    reference: TrialSpec | None = None,
    start_worker: Callable[[TrialSpec], Worker] | None = None,
    on_event: Event | None = None,
    on_result: Callable[[TrialResult], None] | None = None,
    enough: Callable[[dict[TrialSpec, TrialResult]], bool] | None = None,
    run_id: int | None = None,
    loss_check: LossCheck | None = None,
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

    Returns:
        one TrialResult per spec, in the given order; a failed trial has its status and
        error set and never stops the others.
    """
    specs = list(dict.fromkeys(specs))
    ref = reference if reference in specs else default_reference(specs)
    with TrialGroup(ref, options, start_worker=start_worker, on_event=on_event,
                    on_result=on_result, run_id=run_id, loss_check=loss_check) as group:
        group.add(specs)
        group.measure(options, enough)
        group.finish()
    return [group.results[s] for s in specs]


def _with_verdict(result: TrialResult, reference: TrialResult | None,
                  loss_check: LossCheck | None) -> TrialResult:
    """``result`` with its loss verdict against ``reference`` by ``loss_check`` (a new
    record)."""
    if result.status == "nan":
        return replace(result, loss_verdict="nan", loss_detail=result.error)
    if result.status != "ok":
        return result
    if reference is None or reference.spec == result.spec:
        return replace(result, loss_verdict="reference",
                       loss_detail="initial weights from this trial")
    changed = result.spec.math_changes(reference.spec)
    if "batch_size" in changed:
        return replace(result, loss_verdict="n/a", loss_detail="batch size changes the "
                       "training itself; losses not comparable")
    if loss_check is None:
        return replace(result, loss_verdict="n/a", loss_detail=NO_LOSS_CHECK)
    verdict, detail = loss_check(reference, result)
    return replace(result, loss_verdict=verdict, loss_detail=detail)
