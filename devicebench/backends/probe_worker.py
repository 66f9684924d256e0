"""Worker: ``python -m devicebench.backends.probe_worker RESULT_FILE FRAMEWORK``.

Imports one framework (and Keras on that backend), then the installed packages that extend
it (:mod:`devicebench.backends.extensions`), and writes what it sees to RESULT_FILE as JSON.
A crash or hang here is caught by the parent and becomes a finding.
"""

from __future__ import annotations

import importlib
import json
import sys
import traceback

from devicebench.backends import FRAMEWORKS
from devicebench.launch.child import die_with_parent, exit_now


def main(argv: list[str]) -> int:
    die_with_parent()
    result_path, framework = argv[0], argv[1]
    if framework not in FRAMEWORKS:
        print(f"unknown framework {framework!r}", file=sys.stderr)
        return 2
    result: dict = {"name": framework, "status": "ok"}
    try:
        module = importlib.import_module(f"devicebench.backends.{framework}")
        result.update(module.probe())
    except BaseException as exc:  # noqa: BLE001 - report anything, including SystemExit
        result["status"] = "error"
        tb = traceback.format_exc()
        result["error"] = f"{type(exc).__name__}: {exc}\n{tb[-2000:]}"
    else:
        from devicebench.backends._keras import probe_keras

        keras_facts = probe_keras()
        extra = keras_facts.pop("extra", {})
        result.update(keras_facts)
        result.setdefault("extra", {}).update(extra)

        def save() -> None:
            with open(result_path, "w", encoding="utf-8") as fh:
                json.dump(result, fh)

        # The packages that extend it, after it (devicebench.backends.extensions): the
        # result is saved before each import, so one that kills the process names itself.
        from devicebench.backends.extensions import import_extensions

        import_extensions(framework, result["extra"], save)
        return 0
    with open(result_path, "w", encoding="utf-8") as fh:
        json.dump(result, fh)
    return 0


if __name__ == "__main__":
    exit_now(main(sys.argv[1:]))
