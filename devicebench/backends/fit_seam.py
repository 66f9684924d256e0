"""The one seam for attaching to an unmodified script's ``keras.Model.fit`` (and
``compile``): used by ``devicebench monitor`` (a TrainingMonitor added to each fit) and
by the script capture of ``advise train.py`` (the first fit recorded, then the script
stopped).

Keras is not imported here. If the script has imported it already, ``Model`` is patched
at once; otherwise a finder on ``sys.meta_path`` wraps the loader of every spec it finds
for ``keras`` and patches ``Model`` when one of them has executed, and only then leaves
``sys.meta_path``. It must not act once and leave: ``import tensorflow`` calls
``importlib.util.find_spec("keras")`` (tensorflow/python/tools/module_util.py) and
throws that spec away, so a one-shot hook is used up before the script's own
``import keras`` (or ``tf.keras``, ``from tensorflow import keras``) runs.

It lives in ``backends`` (Keras code run in a user's process) so that both the monitor
(``keras``) and the capture (``workloads``, a lower layer) can use it.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from typing import Any

# wrapper(original_fit, model, args, kwargs) -> whatever fit should return
FitWrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]
CompileHook = Callable[[Any, tuple[Any, ...], dict[str, Any]], None]

MARK = "_devicebench_seam"


def patch_model(keras_module: Any, fit_wrapper: FitWrapper,
                compile_hook: CompileHook | None = None) -> bool:
    """Wrap ``keras_module.Model.fit`` with ``fit_wrapper`` (and call ``compile_hook``
    before each ``compile``). On a Model patched already, the new wrapper and hook
    replace the old ones (one wrapper at a time: a process re-running a script up to
    its fit() attaches again).

    Returns:
        True when patched now, False when the wrappers of an earlier patch were replaced.

    Example:
        >>> patch_model(keras, lambda fit, model, a, kw: fit(model, *a, **kw))  # doctest: +SKIP
    """
    model_cls = keras_module.Model
    current = getattr(model_cls.fit, MARK, None)
    if current is not None:
        current["fit"], current["compile"] = fit_wrapper, compile_hook
        return False
    slot: dict[str, Any] = {"fit": fit_wrapper, "compile": compile_hook}
    original_fit, original_compile = model_cls.fit, model_cls.compile
    # ``compile`` is replaced where it is defined (Keras 3: ``Trainer``), not on ``Model``:
    # Keras 3's ``compile_from_config`` skips compiling a loaded model, with a warning,
    # when ``self.__class__.compile != Trainer.compile`` ("the model's compile() method is
    # custom"), so a wrapper on ``Model`` alone made every model the script saved and
    # loaded again come back uncompiled under the monitor.
    owner = next((c for c in model_cls.__mro__ if "compile" in vars(c)), model_cls)

    @functools.wraps(original_fit)
    def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
        return slot["fit"](original_fit, self, args, kwargs)

    @functools.wraps(original_compile)
    def compile_(self: Any, *args: Any, **kwargs: Any) -> Any:
        if slot["compile"] is not None:
            try:
                slot["compile"](self, args, kwargs)
            except Exception:  # noqa: BLE001 - a hook never breaks the user's compile
                pass
        return original_compile(self, *args, **kwargs)

    setattr(fit, MARK, slot)
    model_cls.fit = fit
    owner.compile = compile_
    return True


class _KerasFinder(importlib.abc.MetaPathFinder):
    """Finds ``keras`` with the other finders; patches ``Model`` once it has executed."""

    def __init__(self, fit_wrapper: FitWrapper, compile_hook: CompileHook | None,
                 on_error: Callable[[BaseException], None]) -> None:
        self.fit_wrapper = fit_wrapper
        self.compile_hook = compile_hook
        self.on_error = on_error
        self.searching = False

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "keras" or self.searching:
            return None
        self.searching = True
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self.searching = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_patch(module: Any) -> None:
            exec_module(module)
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            try:
                patch_model(module, self.fit_wrapper, self.compile_hook)
            except Exception as exc:  # noqa: BLE001 - never break the user's import
                self.on_error(exc)

        loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


def _stderr(prefix: str) -> Callable[[BaseException], None]:
    def report(exc: BaseException) -> None:
        print(f"{prefix}: not attached ({type(exc).__name__}: {exc})", file=sys.stderr)
    return report


def attach_fit(fit_wrapper: FitWrapper, compile_hook: CompileHook | None = None, *,
               who: str = "devicebench") -> str:
    """Attach ``fit_wrapper`` to every later ``keras.Model.fit`` call in this process,
    whatever the import style (``import keras``, ``import tensorflow as tf`` then
    ``tf.keras``, ``from tensorflow import keras``, Keras imported inside a function).

    Returns:
        ``"patched"`` when Keras was already imported, ``"armed"`` when the finder waits
        for its import.
    """
    module = sys.modules.get("keras")
    if module is not None and hasattr(module, "Model"):
        patch_model(module, fit_wrapper, compile_hook)
        return "patched"
    sys.meta_path.insert(0, _KerasFinder(fit_wrapper, compile_hook, _stderr(who)))
    return "armed"
