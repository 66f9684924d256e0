"""Worker: ``python -m devicebench.workloads.check_worker RESULT_FILE REF [--no-fit]``.

Loads a user workload in a throwaway process (the parent never runs user code) and
checks what it returns: a Workload, numeric arrays of one length with no NaN or Inf,
data that fits the model (not with ``--no-fit``: ``run`` leaves a model that fails to
build to its trials, which record the failure per backend). The result is
``{"ok": true}`` or ``{"ok": false, "what", "fix"}``: one line for the parent to raise
as a SpecError (exit 2).
"""

from __future__ import annotations

import json
import sys

FIT_FIX = ("return devicebench.workloads.base.Workload(...) whose make_data() arrays "
           "match build_model()'s input and output")


def check(ref: str, fit: bool = True) -> dict:
    from devicebench.errors import exception_line
    from devicebench.workloads.arrays import n_samples, take
    from devicebench.workloads.base import data_problem
    from devicebench.workloads.loader import load_workload

    workload = load_workload(ref)  # SpecError when it is not a Workload
    data = workload.make_data(workload.default_seed)
    if n_samples(data.x) != n_samples(data.y):
        return {"ok": False, "what": f"its data does not fit: x has {n_samples(data.x)} "
                                     f"samples, y has {n_samples(data.y)}", "fix": FIT_FIX}
    problem = data_problem(data)
    if problem is not None:
        return {"ok": False, "what": problem[0], "fix": problem[1]}
    if not fit:
        return {"ok": True, "samples": n_samples(data.x)}
    import keras

    model = workload.built_model(keras)
    model.compile(loss=workload.loss, optimizer=workload.optimizer(keras))
    try:
        model.test_on_batch(take(data.x, 0, 2), take(data.y, 0, 2))
    except Exception as exc:  # the user's data and model disagree
        return {"ok": False, "what": f"its data does not fit the model: {exception_line(exc)}",
                "fix": FIT_FIX}
    return {"ok": True, "samples": n_samples(data.x)}


def main(argv: list[str]) -> int:
    from devicebench.errors import DevicebenchError, exception_line
    from devicebench.launch.child import die_with_parent

    die_with_parent()
    result_path, ref = argv[0], argv[1]
    try:
        result = check(ref, fit="--no-fit" not in argv[2:])
    except DevicebenchError as exc:  # what and fix apart: the parent adds no second fix
        result = {"ok": False, "what": exc.what, "fix": exc.fix or FIT_FIX}
    except Exception as exc:
        result = {"ok": False, "what": exception_line(exc),
                  "fix": "run the workload function by hand to see the whole error"}
    with open(result_path, "w", encoding="utf-8") as fh:
        json.dump(result, fh)
    return 0


if __name__ == "__main__":
    from devicebench.launch.child import exit_now

    exit_now(main(sys.argv[1:]))  # the result file is closed: no teardown to wait for
