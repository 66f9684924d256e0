"""Round 25's step 0 (issue 24): corpus_round23's held-out misses (seen since its one
measurement, f827cc8), written as general forms under existing ids, all ``info`` and added
late (``Context.add_late``), so no older finding changes:

- a clock pair in one block around a call of a parameter fed a value moved to the device in
  the same function (``x = x.to(device)``; ``model(x)``) (``script.unsynced-timing``;
  saifhaq/alma#115);
- ``timer.start()`` ... ``timer.stop()`` of a file timer class around cupy/cuNumeric work,
  no device synchronize between (``script.unsynced-timing``; nv-legate/cupynumeric#747);
- a timer method that reads the clock and keeps the last reading in ``self`` (a "tick")
  called in a loop that calls a jitted function, with nothing blocked in the loop: each tick
  reads dispatch time, and the first includes the compile (``script.unsynced-timing``;
  bytedance/jaqmc#34);
- a clock read right before a loop over a generator function of the file that calls its
  model parameter, with no earlier call of it: the first item (the prompt) is timed cold
  (``script.cold-call-timed``; ml-explore/mlx-examples#380);
- ``start.elapsed_time(end)`` of CUDA events with no ``end.synchronize()`` or device
  synchronize after ``end.record()`` (``script.unsynced-timing``; pytorch/tutorials#3166);
- ``.predict(x)`` in a loop where ``x`` is built outside it with a leading dimension of 1:
  one sample per call (``script.keras-call-per-sample``; stackoverflow.com/q/58378374);
- ``xm.mark_step()``/``torch_xla.sync()`` without ``wait=True`` in a clock-timed loop, no
  ``wait_device_ops`` before the closing read: the clock measures tracing
  (``script.unsynced-timing``; pytorch/xla#8858);
- a worker count capped by a parameter whose default is a small constant (at most 4)
  (``n_max_processes=max_workers``, ``min(..., max_workers)``) and passed on as
  ``workers=``/``num_workers=`` (``script.dataloader-workers``; brainglobe/cellfinder#396).

Sources: https://github.com/<owner>/<repo>/pull/<n> or ``/issues/<n>`` as named above;
https://stackoverflow.com/questions/58378374.

Its timing forms (``unsynced-timing``, ``cold-call-timed``) now live in :mod:`.forms_timing`.
Its loader form (``_capped_workers``) now lives in :mod:`.forms_data`.
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, const, last_name, walk
from devicebench.script_check.context import Context


def _one_row(ctx: Context, name: str) -> bool:
    for v in ctx.assigns.get(name, []):
        while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and last_name(
                v) == "astype":
            v = v.func.value
        if isinstance(v, ast.Call) and v.args:
            first = v.args[0]
            if isinstance(first, ast.Tuple) and first.elts:
                first = first.elts[0]
            if const(first) == 1 and (len(v.args) > 1 or isinstance(v.args[0], ast.Tuple)):
                return True
    return False


def _predict_one_sample_in_loop(ctx: Context) -> None:
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS):
            continue
        inside = {t.id for s in walk(loop.body) if isinstance(s, ast.Assign)
                  for t in s.targets if isinstance(t, ast.Name)}
        for c in ctx.calls(loop.body):
            if last_name(c) == "predict" and isinstance(c.func, ast.Attribute) and c.args \
                    and isinstance(c.args[0], ast.Name) and c.args[0].id not in inside \
                    and _one_row(ctx, c.args[0].id):
                ctx.add_late("script.keras-call-per-sample", "info", c,
                             f"`{c.args[0].id}` has one row, and the loop at "
                             f"{ctx.line(loop.lineno)} calls predict on it every iteration",
                             method=".predict()",
                             remedy="call the model directly, `model(x, training=False)`, "
                                    "or predict all the inputs as one batch")


