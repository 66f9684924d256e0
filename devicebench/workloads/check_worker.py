"""Worker: ``python -m devicebench.workloads.check_worker RESULT_FILE REF``.

Loads a user workload in a throwaway process (the parent never runs user code) and
checks what it returns: a Workload, arrays of one length, data that fits the model.
"""

from __future__ import annotations

import json
import sys


def check(ref: str) -> dict:
    from devicebench.workloads.loader import load_workload

    workload = load_workload(ref)  # SpecError when it is not a Workload
    data = workload.make_data(workload.default_seed)
    if len(data.x) != len(data.y):
        return {"ok": False, "what": f"its data does not fit: x has {len(data.x)} samples, "
                                     f"y has {len(data.y)}"}
    import keras

    model = workload.build_model(keras)
    model.compile(loss=workload.loss, optimizer=workload.optimizer(keras))
    try:
        model.test_on_batch(data.x[:2], data.y[:2])
    except Exception as exc:  # the user's data and model disagree
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return {"ok": False, "what": f"its data does not fit the model: {first[:300]}"}
    return {"ok": True, "samples": len(data.x)}


def main(argv: list[str]) -> int:
    result_path, ref = argv[0], argv[1]
    try:
        result = check(ref)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        result = {"ok": False, "what": f"{type(exc).__name__}: {first[:300]}"}
    with open(result_path, "w", encoding="utf-8") as fh:
        json.dump(result, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
