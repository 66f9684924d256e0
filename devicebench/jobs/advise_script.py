"""``advise train.py``: capture the script's first ``fit()``, advise on what it trains
with the script's own settings as the baseline, and write the change as a patch to the
script. What ``devicebench advise SCRIPT``, the main job on a script and
``devicebench.advise("train.py")`` do."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from devicebench.advisor.advice import AdviceResult
from devicebench.advisor.patch import ScriptPatch, backend_blocker, script_patch
from devicebench.advisor.pipeline import pipeline_figures
from devicebench.errors import InputError
from devicebench.workloads.script import SETUP_TIMEOUT_S, ScriptCapture, capture_script

JIT_OF = {"True": "on", "False": "off"}


@dataclass(frozen=True)
class ScriptAdvice:
    """The capture, the advice on it and the patch to the script.

    Attributes:
        capture: what the script's first fit() trains (``capture.fit_site``: file:line).
        advice: the advice (its ``workload`` is the script's name).
        patch: the diff to the script; None when the advice is to keep the script as it
            is (``patch.diff`` is "" when the change is not expressible as a patch: see
            ``patch.not_patched`` and ``snippet``).
        snippet: the generic code for the same change (knobs a patch cannot express).
    """

    capture: ScriptCapture
    advice: AdviceResult
    patch: ScriptPatch | None = None
    snippet: str = ""
    pipeline: dict[str, Any] | None = None  # advisor.pipeline.pipeline_figures

    def __getattr__(self, name: str) -> Any:
        # verdict, headline, recommended, reasons, ...: the advice's own
        if name.startswith("__") or name == "advice":
            raise AttributeError(name)
        return getattr(self.advice, name)

    def to_dict(self) -> dict[str, Any]:
        return {**self.advice.to_dict(), "script": self.capture.to_dict(),
                "patch": self.patch.diff if self.patch else "",
                "patch_changes": self.patch.changes if self.patch else [],
                "not_patched": self.patch.not_patched if self.patch else [],
                "patch_blockers": self.patch.blockers if self.patch else [],
                "patch_command": self.patch.command if self.patch else "",
                "code": self.snippet, "input_pipeline": self.pipeline}


def script_baseline(capture: ScriptCapture) -> tuple[str, str]:
    """The ``--baseline`` text of the script as written, and a sentence saying so."""
    info = capture.info
    jit = JIT_OF.get(str(info.get("compile_jit", "'auto'")), "auto")
    parts = [f"backend={info['keras_backend']}", f"jit={jit}"]
    spe = int(info.get("steps_per_execution") or 1)
    if spe != 1:
        parts.append(f"steps_per_execution={spe}")
    policy = info.get("dtype_policy") or "float32"
    if policy in ("mixed_float16", "mixed_bfloat16"):
        parts.append(f"precision={policy}")
    said = [f"Keras on {info['keras_backend']}", f"jit_compile={jit}"]
    if spe != 1:
        said.append(f"steps_per_execution={spe}")
    if policy != "float32":
        said.append(f"dtype policy {policy}")
    return ",".join(parts), "your script as written (" + ", ".join(said) + ")"


def _named(advice: AdviceResult, ref: str, script: str) -> AdviceResult:
    """The advice with the script's name where the trials carry the capture's
    reference."""
    def spec(s: Any) -> Any:
        return s.with_(workload=script) if s is not None and s.workload == ref else s

    return replace(
        advice, workload=script, baseline=spec(advice.baseline),
        recommended=spec(advice.recommended),
        rows=[replace(r, result=replace(r.result, spec=spec(r.result.spec)))
              for r in advice.rows],
        outcomes=[replace(o, spec=spec(o.spec)) for o in advice.outcomes],
        notes=[n.replace(ref, script) for n in advice.notes],
        stability=[replace(f, title=f.title.replace(ref, script),
                           observed=f.observed.replace(ref, script))
                   for f in advice.stability],
        verdict=advice.verdict.replace(ref, script),
        headline=replace(advice.headline, text=advice.headline.text.replace(ref, script))
        if advice.headline is not None else None)


def fails_before_fit(script: str, args: list[str] | tuple[str, ...], backend: str,
                     timeout: float) -> str:
    """How ``script`` fails when run up to its first fit() on the Keras ``backend`` (what a
    ``KERAS_BACKEND`` patch does to it), "" when it reaches fit() there. The trials never
    run the script's own code around the model (a saved model is reloaded), so a line
    only TensorFlow runs (``model(x).numpy()``) is found only this way."""
    try:
        capture_script(script, list(args), timeout=timeout,
                       env=dict(os.environ, KERAS_BACKEND=backend))
    except InputError as exc:
        return exc.what
    return ""


def advise_script(script: str, args: list[str] | tuple[str, ...] = (), *,
                  baseline: str | None, budget: float, allow_batch_change: bool,
                  db: Path | None, epochs: int | None, equivalence_steps: int,
                  snapshot: Any = None, setup_timeout: float = SETUP_TIMEOUT_S,
                  on_progress: Any = None, on_capture: Any = None) -> Any:
    """Advise on the model ``script`` trains with the script's own settings as the
    baseline, and write the change as a patch to the script
    (:class:`ScriptAdvice`): what :func:`devicebench.jobs.advise_any.advise` does
    given a script (its defaults are that job's).

    ``on_capture(capture)`` is called once the fit() is captured (or found cached).

    Raises:
        devicebench.errors.InputError: (one line) a script that cannot be captured:
            see :func:`devicebench.workloads.script.capture_script`; bad advise input.

    Example:
        >>> sa = devicebench.advise("train.py", script_args=["--epochs", "3"])  # doctest: +SKIP
        >>> print(sa.capture.fit_site, sa.advice.verdict, sa.patch.diff)  # doctest: +SKIP
    """
    from devicebench.jobs.advise import run_advice
    from devicebench.progress import Reporter

    Reporter(f"advise {script}", on_progress).progress(
        "running the script up to its first fit() (or reading its cached capture)")
    capture = capture_script(script, list(args), timeout=setup_timeout)
    if on_capture is not None:
        on_capture(capture)
    written, why = script_baseline(capture)
    advice = run_advice(capture.ref, baseline=baseline or written, budget=budget,
                        allow_batch_change=allow_batch_change, db=db, snapshot=snapshot,
                        equivalence_steps=equivalence_steps,
                        epochs=epochs or int(capture.info["epochs"]), shown_as=script,
                        on_progress=on_progress)
    advice = _named(advice, capture.ref, script)
    pipeline = pipeline_figures(capture.info, advice.baseline_row, advice.recommended_row)
    verdict = f"for the fit() at {capture.fit_site}: {advice.verdict}"
    if pipeline and pipeline.get("verdict_note"):
        verdict += f"; {pipeline['verdict_note']}"
    advice = replace(advice, verdict=verdict,
                     baseline_reason=f"{why}, on {advice.baseline.device}"
                     if baseline is None else advice.baseline_reason)
    snippet, patch = advice.code, None
    if advice.recommended is not None:
        source = Path(script).read_text(encoding="utf-8")
        site = capture.info.get("compile_site") or {}
        fit = capture.info.get("fit_site") or {}
        patch = script_patch(script, source, advice.baseline, advice.recommended,
                             compile_line=site.get("line"), fit_line=fit.get("line"))
        if patch.diff and not patch.not_patched:
            advice = replace(advice, code="")  # the patch is the change to make
        backend = advice.recommended.backend
        if patch.diff and backend != capture.info.get("keras_backend"):
            failure = fails_before_fit(script, args, backend, setup_timeout)
            if failure:
                patch = replace(patch, blockers=[backend_blocker(backend, failure, source)])
                advice = replace(advice, verdict=advice.verdict + "; your script needs a "
                                 f"change before it runs on {backend} (see the patch)")
    return ScriptAdvice(capture, advice, patch, snippet, pipeline=pipeline)
