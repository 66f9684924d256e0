"""The advise job: validate the input, probe the host, search and compare, store the
trials and the advice. ``devicebench advise``, the main job and :func:`devicebench.advise`
all call :func:`advise` (a script goes to :mod:`devicebench.jobs.advise_script`), whose
signature holds the defaults (the budget, the equivalence steps) once."""

from __future__ import annotations

import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devicebench.errors import InputError
from devicebench.progress import OnProgress, Reporter

if TYPE_CHECKING:
    from devicebench.advisor.advice import AdviceResult


def advise(
    workload_or_model: Any,
    data: tuple[Any, Any] | None = None,
    *,
    budget: float = 120.0,
    baseline: str | None = None,
    allow_batch_change: bool = False,
    epochs: int | None = None,
    db: str | Path | None = None,
    script_args: list[str] | None = None,
    equivalence_steps: int = 50,
    snapshot: Any = None,
    on_progress: OnProgress | None = None,
) -> Any:
    """Find the fastest safe way to train a workload or model on this machine.

    Args:
        workload_or_model: a training script (``"train.py"``: run up to its first
            ``fit()``, with ``script_args`` as its arguments; the result is a
            :class:`devicebench.jobs.advise_script.ScriptAdvice`, whose ``.patch.diff``
            is the change to the script), a built-in workload name,
            ``"path/file.py:function"``, a ``.keras`` path, or a compiled
            ``keras.Model`` (saved to a temporary file so worker processes can load it
            on every backend).
        data: ``(x, y)`` training arrays for a model (default: synthesised from its
            signature).
        budget: seconds for the search and the final comparison.
        baseline: your current configuration, e.g. ``"backend=tensorflow,device=gpu:0"``.
        epochs: the epochs you plan to train (default: the workload's own, else 10): a
            candidate whose extra compilation does not pay back within them is not
            recommended.
        equivalence_steps: steps whose losses are compared with the baseline's.
        snapshot: the machine's snapshot when the caller has probed it already.
        on_progress: progress events (:mod:`devicebench.progress`): started, each set-up
            and interleaved round with the budget left, finished. Default: one line each
            on stderr when it is a terminal, else none
            (:func:`devicebench.progress.silent` for none).

    Returns:
        an :class:`devicebench.advisor.advice.AdviceResult` (``.headline`` — does the
        accelerator speed this training up —, ``.verdict``, ``.reasons``, ``.code``,
        ``.to_dict()``).

    Raises:
        devicebench.errors.DevicebenchError: bad input (one clear message): an argument of
            the wrong type or out of range (``budget`` under 10 s), an unknown workload,
            a baseline this machine cannot run, training data with NaN or Inf.

    Example:
        >>> result = devicebench.advise("seed-rnn", budget=60)
        >>> print(result.verdict)
    """
    from devicebench.validate import check_advise_request
    from devicebench.workloads.script import is_script_ref

    budget = check_advise_request(budget, baseline, allow_batch_change, db, data, epochs)
    db = Path(db) if db else None
    if isinstance(workload_or_model, str | Path) and is_script_ref(str(workload_or_model)):
        return advise_script(str(workload_or_model), list(script_args or []),
                             baseline=baseline, budget=budget,
                             allow_batch_change=allow_batch_change, epochs=epochs, db=db,
                             snapshot=snapshot, equivalence_steps=equivalence_steps,
                             on_progress=on_progress)
    if script_args:
        raise InputError(f"arguments after -- ({' '.join(script_args)}) go with a training "
                         f"script, not {str(workload_or_model)!r}",
                         fix="devicebench advise train.py -- ARGS")
    with tempfile.TemporaryDirectory(prefix="devicebench-advise-") as tmp:
        ref = _as_ref(workload_or_model, data, Path(tmp))
        return run_advice(ref, baseline=baseline, budget=budget,
                          allow_batch_change=allow_batch_change, db=db, snapshot=snapshot,
                          equivalence_steps=equivalence_steps, epochs=epochs,
                          shown_as=str(workload_or_model), on_progress=on_progress)


def _as_ref(workload_or_model: Any, data: tuple[Any, Any] | None, tmp: Path) -> str:
    """A workload reference worker processes can load."""
    import numpy as np

    if isinstance(workload_or_model, str | Path):
        ref = str(workload_or_model)
        if data is None:
            return ref
        if not ref.endswith(".keras"):
            raise InputError("data= goes with a Keras model or a .keras file",
                             fix="a workload function provides its own data")
        model_path = ref
    elif hasattr(workload_or_model, "save") and hasattr(workload_or_model, "inputs"):
        model = workload_or_model
        if getattr(model, "optimizer", None) is None or getattr(model, "loss", None) is None:
            raise InputError("the model is not compiled",
                             fix="call model.compile(loss=..., optimizer=...) first")
        model_path = str(tmp / "model.keras")
        model.save(model_path)
    else:
        raise InputError(
            f"cannot advise on a {type(workload_or_model).__name__}",
            fix="pass a built-in name, 'path/file.py:function', a .keras path or a compiled "
                "keras.Model")
    if data is None:
        return model_path
    x, y = (np.asarray(a) for a in data)
    if len(x) != len(y):
        raise InputError(f"data does not fit: x has {len(x)} samples, y has {len(y)}",
                         fix="pass data=(x, y) with one target per sample")
    if hasattr(workload_or_model, "inputs"):
        expected = tuple(workload_or_model.inputs[0].shape[1:])
        if len(expected) != x.ndim - 1 or any(
                e is not None and e != g for e, g in zip(expected, x.shape[1:], strict=False)):
            raise InputError(f"data does not fit the model: x has shape {x.shape[1:]} per "
                             f"sample, the model expects {expected}",
                             fix="reshape x to the model's input shape")
    data_path = tmp / "data.npz"
    np.savez(data_path, x=x, y=y)
    return f"{model_path}::{data_path}"


def run_advice(workload: str, *, baseline: str | None, budget: float, allow_batch_change: bool,
               db: Path | None, equivalence_steps: int, snapshot=None,
               epochs: int | None = None, shown_as: str | None = None,
               on_progress: OnProgress | None = None, on_event=None,
               on_result=None) -> AdviceResult:
    """Validate, advise on this machine, store: :func:`advise` on a workload reference
    (its defaults are :func:`advise`'s). ``on_progress`` gets the progress events (as
    ``shown_as``, default the reference); ``on_event(kind, spec, info)`` the engine's
    own; ``on_result(result)`` sees each trial once it is stored (``fleet advise``
    streams both to the user's machine).

    Raises:
        devicebench.errors.DevicebenchError: bad input (an unknown workload, a baseline
            this machine cannot run, a user workload that does not load or fit).
    """
    from devicebench.advisor.advice import advise_workload, default_baseline, parse_baseline
    from devicebench.advisor.facts import workload_facts
    from devicebench.advisor.figures import device_figures
    from devicebench.env.probe import probe_host_layer
    from devicebench.measure.load import read_load
    from devicebench.store import recorded_run
    from devicebench.store.ops import latest_ops_run
    from devicebench.trials.plan import installed_backends, validate_spec
    from devicebench.trials.stability import finding_line, stability_findings
    from devicebench.validate import check_advise_request
    from devicebench.workloads.loader import check_workload_runs, validate_workload_ref

    check_advise_request(budget, baseline, allow_batch_change, db, None, epochs)
    validate_workload_ref(workload)
    snapshot = snapshot or probe_host_layer()
    if not installed_backends(snapshot):
        from devicebench.errors import InputError

        raise InputError("no deep-learning framework is installed",
                         fix="pip install 'devicebench[tensorflow,jax]'")
    default, why = default_baseline(snapshot, workload)
    spec = parse_baseline(baseline, workload, default.backend)
    if baseline is None or "device=" not in baseline:
        spec = spec.with_(device=default.device)
    validate_spec(spec, snapshot)  # as `run` refuses --device gpu:7 on a CPU machine
    if baseline is not None:
        why = "given with --baseline" + ("" if "device=" in baseline else
                                         f" ({default.device}: the default device)")
    # A user workload that does not load, returns the wrong thing or whose data does not
    # fit its model is bad input (exit 2), found in a throwaway worker before searching.
    check_workload_runs(workload, spec.backend)
    options = {"argv": sys.argv[1:], "workload": workload, "budget": budget}
    with recorded_run(db, snapshot, "advise", options) as rec:
        # `devicebench ops` figures of this machine (same hardware and versions), if any.
        load_before = read_load()
        found = latest_ops_run(rec.store, rec.machine_id)
        every = {d: f for d in {w.device for w in found[1]}
                 if (f := device_figures(*found, d))} if found else {}
        report = Reporter(f"advise {shown_as or workload}", on_progress, budget_s=budget)
        trial_event = report.trial_events()

        def event(kind: str, spec: Any, info: dict[str, Any]) -> None:
            if not started:
                started.append(True)
                report.started()
            trial_event(kind, spec, info)
            if on_event is not None:
                on_event(kind, spec, info)

        started: list[bool] = []
        advice = advise_workload(
            workload, snapshot, baseline=spec, budget_s=budget,
            allow_batch_change=allow_batch_change, equivalence_steps=equivalence_steps,
            facts=workload_facts(workload), epochs=epochs, figures=every.get(spec.device),
            device_figures=every, baseline_reason=why,
            on_result=lambda r: (rec.keep_trial(r), on_result(r) if on_result else None),
            on_event=event)
        report.finished()
        load_after = read_load()
        # Stability findings of the final's trials and the machine's load around them.
        stability = stability_findings([r.result for r in advice.rows], load_before,
                                       load_after)
        advice = replace(advice, stability=stability,
                         notes=[*advice.notes, *(finding_line(f) for f in stability)],
                         load={"before": load_before and load_before.to_dict(),
                               "after": load_after and load_after.to_dict()})
        rec.summary = advice.to_dict()
    if rec.problems:  # results the store would not take: kept aside
        advice = replace(advice, notes=[*advice.notes, *rec.problems])
    return advice


def advise_script(script: str, args: list[str] | tuple[str, ...] = (), *,
                  baseline: str | None, budget: float, allow_batch_change: bool,
                  db: Path | None, epochs: int | None, equivalence_steps: int,
                  snapshot: Any = None, setup_timeout: float | None = None,
                  on_progress: Any = None, on_capture: Any = None) -> Any:
    """Advise on the model ``script`` trains with the script's own settings as the
    baseline, and write the change as a patch to the script
    (:class:`devicebench.jobs.advise_script.ScriptAdvice`): what
    :func:`devicebench.jobs.advise.advise` does given a script (its defaults are that
    job's).

    ``on_capture(capture)`` is called once the fit() is captured (or found cached).

    Raises:
        devicebench.errors.InputError: (one line) a script that cannot be captured:
            see :func:`devicebench.workloads.script.capture_script`; bad advise input.

    Example:
        >>> sa = devicebench.advise("train.py", script_args=["--epochs", "3"])  # doctest: +SKIP
        >>> print(sa.capture.fit_site, sa.advice.verdict, sa.patch.diff)
    """
    from devicebench.advisor.patch import script_patch
    from devicebench.jobs.advise_script import (
        ScriptAdvice,
        _named,
        pipeline_note,
        script_baseline,
    )
    from devicebench.workloads.script import capture_script

    Reporter(f"advise {script}", on_progress).progress(
        "running the script up to its first fit() (or reading its cached capture)")
    capture = capture_script(script, list(args), **(
        {"timeout": setup_timeout} if setup_timeout is not None else {}))
    if on_capture is not None:
        on_capture(capture)
    written, why = script_baseline(capture)
    advice = run_advice(capture.ref, baseline=baseline or written, budget=budget,
                        allow_batch_change=allow_batch_change, db=db, snapshot=snapshot,
                        equivalence_steps=equivalence_steps,
                        epochs=epochs or int(capture.info["epochs"]), shown_as=script,
                        on_progress=on_progress)
    advice = _named(advice, capture.ref, script)
    advice = replace(advice, verdict=f"for the fit() at {capture.fit_site}: {advice.verdict}",
                     baseline_reason=f"{why}, on {advice.baseline.device}"
                     if baseline is None else advice.baseline_reason)
    line = pipeline_note(capture, advice)
    if line:
        advice = replace(advice, notes=[*advice.notes, line])
    snippet, patch = advice.code, None
    if advice.recommended is not None:
        source = Path(script).read_text(encoding="utf-8")
        site = capture.info.get("compile_site") or {}
        fit = capture.info.get("fit_site") or {}
        patch = script_patch(script, source, advice.baseline, advice.recommended,
                             compile_line=site.get("line"), fit_line=fit.get("line"))
        if patch.diff and not patch.not_patched:
            advice = replace(advice, code="")  # the patch is the change to make
    return ScriptAdvice(capture, advice, patch, snippet)


# The dispatch probe: multiply and matmul at small sizes, one call per op ("compiled")
# and 64 chained inside one compiled call ("in-graph"): the per-call and per-op costs the
# accelerator and dispatch reasons use, in seconds rather than `ops`' minutes (jax's
# per-op cost is its matmul's: XLA fuses a chain of multiplies into one kernel).
DISPATCH_PROBE_SETTINGS: dict[str, Any] = {
    "ops": ("multiply", "matmul"), "modes": ("compiled", "in-graph"), "sizes": (2, 8),
    "threads": None, "chain": 64, "block_seconds": 0.02, "blocks": 7,
    "max_call_seconds": 0.25, "torch_compile": False}


def ensure_dispatch_figures(db: Path | None, snapshot, backend: str,
                            timeout: float = 120.0,
                            on_progress: OnProgress | None = None) -> str | None:
    """When no ``devicebench ops`` run is stored for this machine, measure the per-op
    dispatch cost of ``backend`` on the CPU and the accelerator (one worker each, a few
    seconds) and store it as an ``ops`` run, which ``advise`` then reads like any other
    (and later runs reuse). Returns a line saying what was measured, or None when
    figures were already stored or nothing could be measured. ``on_progress``: each
    worker (k of n) as it starts (:mod:`devicebench.progress`)."""
    import time

    from devicebench.ops.runner import plan_ops, run_ops
    from devicebench.store import ResultStore, recorded_run
    from devicebench.store.ops import add_ops_result, latest_ops_run
    from devicebench.trials.plan import machine_devices

    with ResultStore.open(db) as store:
        if latest_ops_run(store, store.add_machine(snapshot)) is not None:
            return None
    devices = [d for d in machine_devices(snapshot) if d != "mps" or backend == "torch"]
    accelerators = [d for d in devices if d != "cpu"][:1]
    plan = plan_ops(snapshot, backends=[backend], devices=["cpu", *accelerators],
                    **DISPATCH_PROBE_SETTINGS)
    t0 = time.monotonic()
    with recorded_run(db, snapshot, "ops", {"argv": ["(dispatch probe)"],
                                            **DISPATCH_PROBE_SETTINGS}) as rec:
        report = Reporter("dispatch probe", on_progress)
        report.started(f"the per-op dispatch cost of {backend}", total=len(plan.configs))
        results = run_ops(plan, timeout=timeout,
                          on_start=lambda config, i, n: report.progress(
                              f"measuring {config.label}: multiply and matmul, one call "
                              "and 64 chained", done=i, total=n),
                          on_result=lambda r: add_ops_result(rec.store, rec.run_id, r))
        report.finished()
        run_id = rec.run_id
    ok = [r for r in results if r.status == "ok"]
    if not ok:
        return None
    return (f"measured the per-op dispatch cost of {backend} on "
            f"{', '.join(r.device for r in ok)} in {time.monotonic() - t0:.0f} s "
            f"(stored as ops run #{run_id}; `devicebench ops` measures every op, size and "
            "mode)")
