"""TensorFlow rules: device initialisation order and custom training loops."""

from __future__ import annotations

import ast

from devicebench.env.script_check.ast_tools import Context, rule, walk


@rule("script.memory-growth-late",
      "`set_memory_growth` after TensorFlow initialised its devices",
      "once an op runs, a model is built or logical devices are listed, TensorFlow raises "
      "RuntimeError \"Physical devices cannot be modified after being initialized\" (a "
      "try/except only hides that memory growth stays off)",
      "move the memory-growth block right after `import tensorflow as tf`, before any other "
      "TensorFlow call; or `export TF_FORCE_GPU_ALLOW_GROWTH=true` before starting Python",
      "https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth")
def memory_growth_late(ctx: Context) -> None:
    """``set_memory_growth`` after a call in the same scope initialised the devices."""
    for scope in [ctx.tree, *ctx.funcs.values()]:
        calls = sorted((n for n in walk(scope.body) if isinstance(n, ast.Call)),
                       key=lambda n: (n.lineno, n.col_offset))
        first: ast.Call | None = None
        for call in calls:
            if ctx.resolve(call.func).endswith("set_memory_growth"):
                if first is not None:
                    ctx.add("script.memory-growth-late", "error", call,
                            f"comes after `{ctx.code(first.lineno)}` (line "
                            f"{first.lineno}), which initialises the devices")
            elif first is None and ctx.search([call], ctx.inits_devices) is not None:
                first = call
