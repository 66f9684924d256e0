"""The main job (``devicebench`` with no command): the doctor on this machine, the
per-op dispatch probe once per machine, then advise on two built-in workloads under a
short budget; and the same on the user's own script (``devicebench train.py``).

The job hands each part to ``on_step`` as it is ready (the CLI prints the doctor's
summary before advise starts) and returns them all in one outcome."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from devicebench.jobs.doctor import DoctorResult
from devicebench.progress import OnProgress
from devicebench.schema import envelope


@dataclass(frozen=True)
class MainStep:
    """One part of the main job, handed on as soon as it is ready.

    Attributes:
        kind: ``doctor`` (value: the :class:`DoctorResult`), ``probe`` (value: the line
            saying what the dispatch probe measured, or None when figures were stored
            already) or ``advice`` (value: one workload's advice).
    """

    kind: Literal["doctor", "probe", "advice"]
    value: Any


OnStep = Callable[[MainStep], None]


@dataclass(frozen=True)
class MainOutcome:
    """What the main job found: the doctor's result, the dispatch probe's line and one
    advice per workload (:class:`devicebench.advisor.advice.AdviceResult`; on a script,
    one :class:`devicebench.jobs.advise_script.ScriptAdvice`)."""

    doctor: DoctorResult
    probed: str | None
    advice: tuple[Any, ...]
    script: str | None = None

    @property
    def exit_code(self) -> int:
        """1 when the doctor found an error, else 0."""
        return 1 if self.doctor.errors else 0

    def to_dict(self) -> dict[str, Any]:
        return envelope("main", {"script": self.script, "doctor": self.doctor.to_dict(),
                                 "dispatch_probe": self.probed,
                                 "advice": [a.to_dict() for a in self.advice]})


def main_job(*, workloads: tuple[str, ...] = ("seed-rnn", "mnist-cnn"), budget: float = 40.0,
             total: float = 90.0, equivalence_steps: int = 20, db: str | Path | None = None,
             on_step: OnStep | None = None,
             on_progress: OnProgress | None = None) -> MainOutcome:
    """``devicebench`` alone: the doctor (every installed framework probed), the per-op
    dispatch probe when this machine has no ``devicebench ops`` run stored, then advise
    on each of ``workloads`` under ``budget`` seconds — less where the whole job's
    ``total`` (doctor and dispatch probe included) would not hold it: each advise gets an
    even share of what is left (:func:`devicebench.advisor.budget.share_of_total`).

    Args:
        on_step: each part as it is ready (:class:`MainStep`).
        on_progress: progress events (:mod:`devicebench.progress`) of the probe, the
            dispatch probe (each worker, k of n) and each advise (set-ups, rounds, the
            budget left). Default: one line each on stderr when it is a terminal.
    """
    import time

    from devicebench.advisor.advice import default_baseline
    from devicebench.advisor.budget import share_of_total
    from devicebench.jobs.advise import ensure_dispatch_figures
    from devicebench.jobs.advise_any import advise
    from devicebench.jobs.doctor import doctor

    step = on_step or (lambda s: None)
    db = Path(db) if db else None
    started = time.monotonic()
    found = doctor(on_progress=on_progress)
    step(MainStep("doctor", found))
    # The per-op cost behind the accelerator verdict's reasons, once per machine.
    probed = ensure_dispatch_figures(
        db, found.snapshot, default_baseline(found.snapshot, workloads[0])[0].backend,
        on_progress=on_progress)
    step(MainStep("probe", probed))
    advice = []
    for i, name in enumerate(workloads):
        share = share_of_total(total, time.monotonic() - started, len(workloads) - i, budget)
        advice.append(advise(name, budget=share, db=db, snapshot=found.snapshot,
                             equivalence_steps=equivalence_steps, on_progress=on_progress))
        step(MainStep("advice", advice[-1]))
    return MainOutcome(found, probed, tuple(advice))


def main_script(script: str, args: list[str] | tuple[str, ...] = (), *,
                budget: float = 60.0, db: str | Path | None = None,
                on_step: OnStep | None = None,
                on_progress: OnProgress | None = None) -> MainOutcome:
    """The main job on a script (``devicebench train.py [-- ARGS]``): the doctor on this
    machine and the script (read, never run), then advise on the model it trains."""
    from devicebench.jobs.advise_any import advise
    from devicebench.jobs.doctor import doctor

    step = on_step or (lambda s: None)
    found = doctor(script, on_progress=on_progress)
    step(MainStep("doctor", found))
    result = advise(script, budget=budget, db=db, script_args=list(args),
                    on_progress=on_progress)
    step(MainStep("advice", result))
    return MainOutcome(found, None, (result,), script=script)
