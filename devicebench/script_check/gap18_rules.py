"""corpus_round16's held-out misses written generally (issue 24, round 18, step 0): analysis
gaps, under existing ids, all ``info`` (the cost depends on sizes the file does not show).

- a call that breaks a ``torch.compile`` graph -- ``x.is_inference()``, ``.item()``,
  ``.tolist()``, ``.numpy()``, ``print(...)``, or an ``if``/``while`` deciding on a reduction
  of the inputs (``if x.sum() > 0``, ``if m.any()``) -- in the forward of a module the file
  compiles (also when the compiled model's class is not in the file: the file's modules may
  be its parts) or in a compiled function (``script.graph-break-item``; kleme,
  nomic-ai/contrastors#83, 2025: without the check ``fullgraph=True`` trained >= 30% faster);
- a name bound, outside a loop, to host NumPy arrays (``np.load``, ``np.array``, ... or a
  list/tuple/dict of them) and handed to a jitted function on every iteration: the same host
  data is transferred on each call (``script.jax-batch-on-host``; Qazalbash,
  kokabsc/gwkokab#467, 2025: ``jax.device_put`` once). A batch built in the loop is the normal
  way to feed a step and is not reported;
- ``jax.jit(f)(x)`` inline inside code that is traced already -- a jitted function, what it
  calls, or a ``lax.scan``/``fori_loop``/``while_loop``/``map`` body: a compilation barrier
  (``script.jit-in-loop``; jvmadan, climate-analytics-lab/jax-gcm#331, 2025);
- Lightning's ``strategy="ddp_find_unused_parameters_true"`` (``script.ddp-find-unused-parameters``;
  guarin, lightly-ai/lightly#1434, 2023);
- ``@tf.function`` on a ``def`` nested in a function that calls it, when that function is
  called in a loop or from a ``Dataset.map`` callable: a new function, traced again, on every
  call (``script.jit-in-loop``; DLPerf, JayYip/m3tl#115, 2023);
- ``ds.map(f)`` before ``.batch(...)`` (chained, or on the same name later in the function)
  when ``f`` parses one record with ``tf.io.parse_single_example`` or
  ``parse_single_sequence_example``, which have batched forms (``tf.io.parse_example``):
  only these forms are taken as vectorizable (``script.unbatched-map``; DLPerf,
  tensorflow/models#10218, 2021, citing the tf.data guide's "Vectorizing mapping");
- a boolean-mask assignment (``x[mask] = v``) in a helper a module's forward calls, with no
  step loop in the file (``script.sync-in-step-loop``; lgeiger, vllm-project/vllm#19578, 2025);
- a Python ``for i in range(N)`` over a global ``N`` whose body computes a gradient
  (``jax.grad``, ``value_and_grad``, ``vjp``), inside ``@jax.jit``: gradient accumulation
  unrolled into N forward-backward copies (``script.python-loop-in-jit``; fattorib,
  fattorib/ZeRO-transformer#13, 2023: ``jax.lax.scan`` compiles much quicker).

Sources: the threads above (https://github.com/<owner>/<repo>/issues/<n> or ``/pull/<n>``);
https://www.tensorflow.org/guide/function (retracing) and
https://www.tensorflow.org/guide/data_performance#vectorizing_mapping.

Its DDP form (``ddp-find-unused-parameters``) now lives in :mod:`.forms_distributed`.
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, last_name, target_names, walk
from devicebench.script_check.compile_rules import _reached, compiled_classes
from devicebench.script_check.context import Context, FuncDef
from devicebench.script_check.dataflow import callees
from devicebench.script_check.gap14_rules import forward_reach
from devicebench.script_check.gap17_rules import _derived
from devicebench.script_check.kinds import scope_of
from devicebench.script_check.loop_rules import _jitted_functions
from devicebench.script_check.shape_sync import _FIX, _numpy_value, is_mask

_BREAKS = ("is_inference", "item", "tolist", "numpy")
_REDUCTIONS = ("any", "all", "sum", "max", "min", "mean", "norm", "item")
_TRACED_BODIES = ("jax.lax.scan", "jax.lax.fori_loop", "jax.lax.while_loop", "jax.lax.map")
_HOST = ("numpy.load", "numpy.array", "numpy.asarray", "numpy.stack", "numpy.concatenate",
         "numpy.zeros", "numpy.ones", "numpy.loadtxt", "numpy.genfromtxt", "numpy.fromfile")
_PARSERS = ("tensorflow.io.parse_single_example", "tensorflow.io.parse_single_sequence_example")
_GRADS = ("jax.grad", "jax.value_and_grad", "jax.vjp")


# -- torch.compile graph breaks -------------------------------------------------------------

def _compiled_code(ctx: Context) -> list[FuncDef]:
    names = compiled_classes(ctx)
    for c in ctx.calls():
        if ctx.resolve(c.func) == "torch.compile" and c.args and any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                and n.func.id[:1].isupper() and n.func.id not in ctx.classes
                for n in ast.walk(c.args[0])):  # torch.compile(Model()) of a class not here
            names |= {k for k, cls in ctx.classes.items()
                      if any(last_name(b) == "Module" for b in cls.bases)}
    out = [fn for n in sorted(names) for fn in _reached(ctx.classes[n], "forward")]
    for fn in ctx.funcs.values():
        if any(ctx.compiler(d) == "torch" for d in fn.decorator_list) or any(
                ctx.compiler(v.func) == "torch" and v.args and isinstance(v.args[0], ast.Name)
                and v.args[0].id == fn.name for vs in ctx.assigns.values() for v in vs
                if isinstance(v, ast.Call)):
            out.append(fn)
    return out


def _branch_on_data(test: ast.AST, values: set[str]) -> ast.AST | None:
    for n in ast.walk(test):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr in _REDUCTIONS and any(
                    isinstance(m, ast.Name) and m.id in values for m in ast.walk(n.func.value))):
            return n
    return None


def _graph_breaks(ctx: Context) -> None:
    for fn in _compiled_code(ctx):
        params = {a.arg for a in fn.args.args} - {"self"}
        values = params | _derived(fn, params)
        for n in walk(fn.body):
            hit, what = None, ""
            if isinstance(n, ast.Call) and (isinstance(n.func, ast.Attribute) and n.func.attr
                                            in _BREAKS and not n.args or ctx.resolve(n.func)
                                            in ("torch.is_inference", "print")):
                hit, what = n, ast.unparse(n.func)[-30:] + "()"
            elif isinstance(n, ast.If | ast.While) and (b := _branch_on_data(n.test, values)):
                hit, what = n, f"if {ast.unparse(b)[:30]}"
            if hit is not None:
                ctx.add("script.graph-break-item", "info", hit,
                        f"in `{fn.name}`, which `torch.compile` traces: Dynamo cannot trace "
                        f"`{what}` and breaks the graph there", call=what)


def _mask_assignment_in_forward_helper(ctx: Context) -> None:
    for call, fn in forward_reach(ctx):
        if call is None or ctx.is_compiled_scope(fn):
            continue
        for s in walk(fn.body):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target] if isinstance(
                s, ast.AugAssign) else []
            if any(isinstance(t, ast.Subscript) and is_mask(t.slice, scope_of(ctx, t))
                   and not _numpy_value(ctx, t.value, fn) for t in targets):
                ctx.add("script.sync-in-step-loop", "info", s,
                        f"`{ast.unparse(s)[:50]}` assigns through a boolean mask in "
                        f"`{fn.name}`, which every forward runs ({ctx.line(call.lineno)}): it "
                        "becomes `nonzero()`, and the host waits for the count", fixtext=_FIX)


# -- JAX ------------------------------------------------------------------------------------

def _jitted_names(ctx: Context) -> set[str]:
    out = {n for n, jit in _jitted_functions(ctx).items() if jit is None}
    return out | {name for name, vs in ctx.assigns.items() for v in vs
                  if isinstance(v, ast.Call) and ctx.compiler(v.func) == "jax" and v.args}


def _host_value(ctx: Context, v: ast.AST) -> bool:
    if isinstance(v, ast.Call):
        return ctx.resolve(v.func) in _HOST
    if isinstance(v, ast.ListComp | ast.SetComp):
        return _host_value(ctx, v.elt)
    if isinstance(v, ast.DictComp):
        return _host_value(ctx, v.value)
    if isinstance(v, ast.List | ast.Tuple):
        return bool(v.elts) and all(_host_value(ctx, e) for e in v.elts)
    return False


def _host_arrays_into_jit(ctx: Context) -> None:
    jitted = _jitted_names(ctx)
    placed = {n.id for c in ctx.calls() if ctx.resolve(c.func) in ("jax.device_put",
                                                                   "jax.numpy.asarray")
              for a in c.args for n in ast.walk(a) if isinstance(n, ast.Name)}
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or ctx.is_compiled_scope(loop):
            continue
        local = {t for s in walk(loop.body) if isinstance(s, ast.Assign | ast.AugAssign)
                 for x in getattr(s, "targets", [getattr(s, "target", None)]) if x is not None
                 for t in target_names(x)} | set(target_names(getattr(loop, "target", loop)))
        for c in walk(loop.body):
            if not (isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                    and c.func.id in jitted):
                continue
            for a in c.args:
                if (isinstance(a, ast.Name) and a.id not in local | placed
                        and ctx.assigns.get(a.id)
                        and all(_host_value(ctx, v) for v in ctx.assigns[a.id])):
                    ctx.add("script.jax-batch-on-host", "info", c,
                            f"`{a.id}` holds NumPy arrays on the host and goes into the jitted "
                            f"`{c.func.id}` on every iteration of the loop at "
                            f"{ctx.line(loop.lineno)}: it is transferred again on each call",
                            why="a NumPy argument of a jitted function is copied to the "
                                "device on every call; data that does not change between "
                                "calls pays that transfer each time (kokabsc/gwkokab#467)",
                            fix=f"put it on the device once, before the loop: `{a.id} = "
                                f"jax.device_put({a.id})`")
                    break


def _traced_functions(ctx: Context) -> list[ast.AST]:
    roots = [ctx.funcs[n] for n in _jitted_functions(ctx) if n in ctx.funcs]
    roots += [fn for _, fn in callees(ctx, [b for r in roots for b in r.body], depth=2)]
    for c in ctx.calls():
        if ctx.resolve(c.func) in _TRACED_BODIES:
            roots += [ctx.funcs[a.id] for a in c.args
                      if isinstance(a, ast.Name) and a.id in ctx.funcs]
    return roots


def _inline_jit_in_traced(ctx: Context) -> None:
    for fn in _traced_functions(ctx):
        for n in ast.walk(fn):
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Call)
                    and ctx.compiler(n.func.func) == "jax" and n.func.args):
                ctx.add("script.jit-in-loop", "info", n,
                        f"`{ast.unparse(n.func)[:40]}` is applied inside `{fn.name}`, which "
                        "is traced already (jitted, called from a jitted function, or a "
                        "`lax` loop body)", how="`jax.jit`", ctor="jax.jit",
                        reason="a `jax.jit` inside traced code is a compilation barrier: the "
                               "outer compilation treats the inner function as a black box "
                               "(climate-analytics-lab/jax-gcm#331: removing it cut compile "
                               "time 1.5-6% and run time ~3-4%)",
                        fix="call the function directly (`step_fn(carry, dt)`); the outer "
                            "`jax.jit` compiles it with the rest")


def _computes_gradient(ctx: Context, body: list[ast.stmt]) -> bool:
    found = [c for c in walk(body) if isinstance(c, ast.Call)]
    found += [c for _, fn in callees(ctx, list(body), depth=1) for c in ctx.calls(fn.body)]
    return any(ctx.resolve(c.func if not isinstance(c.func, ast.Call) else c.func.func)
               in _GRADS for c in found)


def _accumulation_loop_in_jit(ctx: Context) -> None:
    for name in _jitted_functions(ctx):
        fn = ctx.funcs.get(name)
        if fn is None:
            continue
        own = {a.arg for a in fn.args.args} | {t for s in walk(fn.body) if isinstance(
            s, ast.Assign) for x in s.targets for t in target_names(x)}
        for loop in walk(fn.body):
            if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)
                    and last_name(loop.iter) == "range" and len(loop.iter.args) == 1):
                continue
            bound = loop.iter.args[0]
            if not (isinstance(bound, ast.Name) and bound.id not in own and (
                    bound.id.isupper() or bound.id in ctx.assigns)):
                continue
            if _computes_gradient(ctx, loop.body):
                ctx.add("script.python-loop-in-jit", "info", loop,
                        f"in `{name}`, which is jitted; `{bound.id}` is a Python number at "
                        "trace time, and each copy of the body computes a gradient "
                        "(gradient accumulation unrolled)", n=f"`{bound.id}`")


# -- TensorFlow -----------------------------------------------------------------------------

def _called_repeatedly(ctx: Context, name: str) -> bool:
    for n in ast.walk(ctx.tree):
        if not (isinstance(n, ast.Call) and last_name(n) == name):
            continue
        if ctx.enclosing(n, LOOPS) is not None or isinstance(ctx.enclosing(n, (ast.Lambda,)),
                                                             ast.Lambda):
            return True
    return any(isinstance(c.func, ast.Attribute) and c.func.attr == "map" and any(
        isinstance(a, ast.Name) and a.id == name for a in c.args) for c in ctx.calls())


def _tf_function_defined_per_call(ctx: Context) -> None:
    for outer in list(ctx.funcs.values()):
        for inner in outer.body:
            if not (isinstance(inner, ast.FunctionDef) and any(
                    ctx.compiler(d) == "tf" for d in inner.decorator_list)):
                continue
            used = any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                       and c.func.id == inner.name for c in walk(outer.body))
            if used and _called_repeatedly(ctx, outer.name):
                ctx.add("script.jit-in-loop", "info", inner,
                        f"`@tf.function` `{inner.name}` is defined inside `{outer.name}`, "
                        f"which is called repeatedly (in a loop or from a `Dataset.map` "
                        "function): each call makes a new function and traces it again",
                        how="`tf.function` (on a nested `def`)", ctor="tf.function",
                        reason="the decorator runs each time the enclosing function does: a "
                               "new `tf.function` per call, traced again (the tf.function "
                               "guide's retracing rules; JayYip/m3tl#115)")


def _parses_one(ctx: Context, f: ast.AST) -> bool:
    body: list[ast.AST] = [f.body] if isinstance(f, ast.Lambda) else list(
        ctx.funcs[f.id].body) if isinstance(f, ast.Name) and f.id in ctx.funcs else []
    return any(isinstance(c, ast.Call) and ctx.resolve(c.func) in _PARSERS for c in walk(body))


def _batched_after(ctx: Context, call: ast.Call) -> bool:
    parent = ctx.parents.get(call)
    if isinstance(parent, ast.Attribute) and parent.attr in ("batch", "padded_batch"):
        return True
    stmt = parent
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)):
        return False
    var, body = stmt.targets[0].id, getattr(ctx.parents.get(stmt), "body", [])
    later = body[body.index(stmt) + 1:] if stmt in body else []
    return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
               and c.func.attr in ("batch", "padded_batch") and isinstance(c.func.value, ast.Name)
               and c.func.value.id == var for c in walk(later))


def _parse_map_before_batch(ctx: Context) -> None:
    for call in ctx.calls():
        if (isinstance(call.func, ast.Attribute) and call.func.attr == "map" and call.args
                and _parses_one(ctx, call.args[0]) and _batched_after(ctx, call)):
            ctx.add("script.unbatched-map", "info", call,
                    f"`{ast.unparse(call.args[0])[:30]}` parses one record per call, and the "
                    "batch is made only after the map", does="parses",
                    why="a cheap function mapped before `batch` runs once per example, and "
                        "the per-call overhead dominates; the tf.data guide (\"Vectorizing "
                        "mapping\") batches first and maps a batched function "
                        "(tensorflow/models#10218)",
                    fix="`.batch(n)` first, then `.map(f, num_parallel_calls=tf.data.AUTOTUNE)` "
                        "with `tf.io.parse_example` (the batched parser) in `f`")
