"""Rules about what a loop does on every iteration (issue 24, classes 13, 15 and 17): a
compiled function made anew inside the loop, forward passes that record autograd graphs
nobody uses, and chains of small un-jitted JAX ops."""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, dotted, last_name, target_names, walk
from devicebench.script_check.context import Context, rule
from devicebench.script_check.dataflow import module_names, wrapped_models
from devicebench.script_check.form_rules import attribute_bounded_loops, decorator_factory_in_loop
from devicebench.script_check.jax_rules import is_grad_value, local_callee
from devicebench.script_check.reach_rules import compiled_in_callees

_HOW = {"jax": "`jax.jit`", "tf": "`tf.function`", "torch": "`torch.compile`"}
_WHY = {"jax": "jit caches compiled code per function object: a fresh lambda, `partial` or "
               "`jax.grad(...)` each iteration is a new function, traced and compiled again",
        "tf": "each new `tf.function` object traces its Python function again (TensorFlow "
              "warns about \"creating @tf.function repeatedly in a loop\")",
        "torch": "each `torch.compile` of a new callable guards and compiles it again"}


def _loop_vars(loop: ast.AST) -> set[str]:
    if isinstance(loop, ast.For | ast.AsyncFor):
        return set(target_names(loop.target)) | {
            n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    return set()


def _cached(ctx: Context, node: ast.AST, loop: ast.AST) -> bool:
    """Under ``if fn is None:`` / ``if key not in cache:`` inside the loop: built once."""
    cur = ctx.parents.get(node)
    while cur is not None and cur is not loop:
        if isinstance(cur, ast.If) and any(isinstance(o, ast.Is | ast.NotIn | ast.In)
                                           for c in ast.walk(cur.test) if isinstance(c, ast.Compare)
                                           for o in c.ops):
            return True
        cur = ctx.parents.get(cur)
    return False


@rule("script.jit-in-loop",
      "{how} applied inside the loop, on every iteration",
      "{reason}: the loop pays tracing and compilation on every iteration instead of once",
      "build the compiled function once, before the loop (`step = {ctor}(step_fn)` at the top "
      "level), and only call it inside the loop; pass what changes as arguments")
def jit_in_loop(ctx: Context) -> None:
    done: set[int] = set()
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or ctx.is_compiled_scope(loop):
            continue
        lv = _loop_vars(loop)
        for n in walk(loop.body):
            if not isinstance(n, ast.Call) or id(n) in done or not n.args:
                continue
            kind = ctx.compiler(n.func)
            if not kind or isinstance(ctx.parents.get(n), ast.FunctionDef) or _cached(
                    ctx, n, loop):
                continue
            arg = n.args[0]
            if lv & {x.id for x in ast.walk(arg) if isinstance(x, ast.Name)}:
                continue  # compiling each of several models/functions the loop walks over
            fresh = isinstance(arg, ast.Lambda | ast.Call)
            done.add(id(n))
            ctx.add("script.jit-in-loop", "warning" if fresh or kind == "tf" else "info", n,
                    f"inside the loop at {ctx.line(loop.lineno)}"
                    + ("; its argument is built anew each time" if fresh else ""),
                    how=_HOW[kind], reason=_WHY[kind], ctor={"jax": "jax.jit", "tf": "tf.function",
                                                          "torch": "torch.compile"}[kind])
    compiled_in_callees(ctx)
    decorator_factory_in_loop(ctx)  # @factory(...) def f(): inside the loop (round 11)


def _no_grad_around(ctx: Context, node: ast.AST) -> bool:
    cur = ctx.parents.get(node)
    while cur is not None:
        if isinstance(cur, ast.With) and any("no_grad" in ast.unparse(i.context_expr) or
                                             "inference_mode" in ast.unparse(i.context_expr)
                                             for i in cur.items):
            return True
        if isinstance(cur, ast.FunctionDef | ast.AsyncFunctionDef):
            if any("no_grad" in ast.unparse(d) or "inference_mode" in ast.unparse(d)
                   for d in cur.decorator_list):
                return True
            return any(_no_grad_around(ctx, c) for c in ctx.calls()
                       if isinstance(c.func, ast.Name) and c.func.id == cur.name)
        cur = ctx.parents.get(cur)
    return False


_LAYER_ROOTS = ("torch.nn.", "torchvision.", "transformers.", "timm.")


def _parameterless(ctx: Context, call: ast.Call) -> bool:
    """A module of this file with no parameters (no layer or ``nn.Parameter`` built in its
    ``__init__``, nor in its submodules of this file): calling it records no graph."""
    if not isinstance(call.func, ast.Name):
        return False
    value = ctx.value_of(call.func.id)
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and (
            value.func.attr in ("to", "cuda", "eval", "train", "half", "float")):
        value = value.func.value
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
        return False
    cls = ctx.classes.get(value.func.id)
    return cls is not None and not _has_parameters(ctx, cls, 3)


def _has_parameters(ctx: Context, cls: ast.ClassDef, depth: int) -> bool:
    if depth == 0 or not any(last_name(b) == "Module" for b in cls.bases):
        return True  # not a plain nn.Module of this file: assume it has weights
    for n in ast.walk(cls):
        if not isinstance(n, ast.Call):
            continue
        q = ctx.resolve(n.func)
        if q.startswith(_LAYER_ROOTS) and last_name(n)[:1].isupper() or last_name(n) in (
                "Parameter", "register_parameter", "from_pretrained"):
            return True
        inner = ctx.classes.get(n.func.id) if isinstance(n.func, ast.Name) else None
        if inner is not None and inner is not cls and _has_parameters(ctx, inner, depth - 1):
            return True
    return False


def _backward_in(ctx: Context, roots: list[ast.AST]) -> ast.AST | None:
    """A backward pass: ``loss.backward()``, an optimizer step, or ``torch.autograd.grad``
    (forces as the gradient of an energy need the graph as much as a training step does),
    or a call of a function of this file that makes one, or of an imported ``backward``
    (open_lm's ``backward(loss, scaler)`` calls ``scaler.scale(loss).backward()``)."""
    def direct(n: ast.AST) -> bool:
        return isinstance(n, ast.Call) and (last_name(n) in (
            "backward", "step", "apply_gradients", "minimize") and isinstance(
                n.func, ast.Attribute)
            or ctx.resolve(n.func) in ("torch.autograd.grad", "torch.autograd.backward"))

    def helper(n: ast.AST) -> bool:
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Name)):
            return False
        fn = ctx.funcs.get(n.func.id)
        if fn is None:  # imported: its name says it (open_lm.train's backward)
            return n.func.id in ("backward", "backward_step", "backward_pass")
        return ctx.search(list(fn.body), direct) is not None

    return ctx.search(roots, lambda n: direct(n) or helper(n))


def _eval_only_branch(ctx: Context, fn: ast.AST | None, step: ast.AST) -> str:
    """``if train:`` around the backward, where ``train`` is a parameter of ``fn`` that some
    call passes as ``False``: that call runs the forward only (the name, or "")."""
    if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
        return ""
    params = [a.arg for a in fn.args.args]
    cur = ctx.parents.get(step)
    while cur is not None and cur is not fn:
        if isinstance(cur, ast.If) and isinstance(cur.test, ast.Name) and cur.test.id in params:
            flag, pos = cur.test.id, params.index(cur.test.id)
            for c in ctx.calls():
                if isinstance(c.func, ast.Name) and c.func.id == fn.name and (any(
                        k.arg == flag and isinstance(k.value, ast.Constant) and not k.value.value
                        for k in c.keywords) or len(c.args) > pos and isinstance(
                            c.args[pos], ast.Constant) and not c.args[pos].value):
                    return flag
        cur = ctx.parents.get(cur)
    return ""


@rule("script.inference-grad",
      "forward passes with autograd on, and no backward pass",
      "outside `torch.no_grad()` every forward op records its inputs for a backward pass: "
      "{what} never calls `backward()`, so the graph is built and thrown away on every "
      "iteration (more memory, and slower; compiled models also compile a training graph)",
      "wrap the inference in `with torch.inference_mode():` (or decorate the function with "
      "`@torch.inference_mode()`) and call `model.eval()`; compile after `eval()`")
def inference_grad(ctx: Context) -> None:
    if not ctx.uses("torch") or ctx.uses("tensorflow"):
        return
    models = (module_names(ctx) | wrapped_models(ctx)) - {n for n, k in ctx.compiled.items()
                                                     if k != "torch"}
    # self.net(x) where the class calls self.net.eval()/.train()/.parameters(): a submodule
    attrs = {c.func.value.attr for c in ctx.calls() if last_name(c) in (
        "eval", "train", "parameters") and isinstance(c.func, ast.Attribute) and isinstance(
        c.func.value, ast.Attribute) and dotted(c.func.value.value) == "self"}
    done: set[int] = set()
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or ctx.is_compiled_scope(loop):
            continue
        call = next((n for n in walk(loop.body, lambda x: isinstance(x, LOOPS))
                     if isinstance(n, ast.Call) and (
                         isinstance(n.func, ast.Name) and n.func.id in models
                         or isinstance(n.func, ast.Attribute) and n.func.attr in attrs
                         and dotted(n.func.value) == "self")), None)
        if call is None or id(call) in done or _no_grad_around(ctx, call) or (
                _parameterless(ctx, call)):
            continue
        fn = ctx.enclosing(loop, (ast.FunctionDef, ast.AsyncFunctionDef))
        step = _backward_in(ctx, list(loop.body))
        after = _backward_in(ctx, [s for s in (fn.body if fn else ctx.tree.body)
                                   if s.lineno > loop.end_lineno])  # type: ignore[attr-defined]
        if after is not None:
            continue
        if step is not None:
            flag = _eval_only_branch(ctx, fn, step)
            if not flag:
                continue
            what = (f"the call of `{fn.name}` with `{flag}` false (the evaluation pass)")  # type: ignore[union-attr]
        else:
            what = f"the loop at {ctx.line(loop.lineno)}"
        done.add(id(call))
        name = dotted(call.func)
        evals = {dotted(c.func.value) for c in ctx.calls() if last_name(c) == "eval"
                 and isinstance(c.func, ast.Attribute)}
        ctx.add("script.inference-grad", "info" if name in evals else "warning", call,
                f"`{name}` is called in the loop at {ctx.line(loop.lineno)} with "
                "gradients recorded, and " + what.replace("the loop at", "that loop, at") +
                " has no backward pass", what=what)


def _jax_op(ctx: Context, n: ast.AST) -> bool:
    if not isinstance(n, ast.Call):
        return False
    q = ctx.resolve(n.func)
    return q.startswith(("jax.random.", "jax.numpy.", "jax.scipy.", "jax.lax.", "jax.nn.")) or (
        isinstance(n.func, ast.Attribute) and n.func.attr in ("set", "add") and isinstance(
            n.func.value, ast.Subscript) and ast.unparse(n.func.value).split("[")[0].endswith(
                ".at"))


def jax_dispatch_chain(ctx: Context) -> None:
    """Un-jitted JAX ops chained from one iteration to the next (``key = split(key)``,
    ``q = q.at[k].set(...)``): each is dispatched alone, one after the other (mattjj,
    jax-ml/jax#968). Reported under ``script.jax-host-op-in-loop``."""
    if not ctx.uses("jax"):
        return
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, LOOPS) or ctx.is_compiled_scope(loop):
            continue
        body = list(walk(loop.body, lambda x: isinstance(x, LOOPS)))
        if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
               and ctx.compiled.get(n.func.id) == "jax" for n in body):
            continue  # between jitted steps: the other rule of this id
        if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and ctx.compiled.get(
                n.func.id) == "jax" for n in walk(loop.body) if ctx.enclosing(n, LOOPS)
               is not loop):
            continue  # an epoch loop: its inner loop runs the jitted step; once per epoch
        if any(isinstance(n, ast.Call) and (fn := local_callee(ctx, n)) is not None and any(
                is_grad_value(ctx, m) for m in ast.walk(fn)) for n in body):
            continue  # the loop runs an un-jitted training step: reported at that step's def
        ops = [s for s in body if isinstance(s, ast.Assign) and _jax_op(ctx, s.value)]
        for s in ops:
            bound = {x for t in s.targets for x in target_names(t)}
            read = {x.id for x in ast.walk(s.value) if isinstance(x, ast.Name)}
            if bound & read:
                first = ops[0]  # where the chain of one-by-one dispatches starts
                ctx.add("script.jax-host-op-in-loop", "warning", first.value,
                        f"`{ast.unparse(first.value)[:50]}` and the ops after it run outside any"
                        f" `jax.jit`; `{ast.unparse(s.value)[:40]}` feeds the next iteration of "
                        f"the loop at {ctx.line(loop.lineno)}",
                        why="each un-jitted JAX op is dispatched on its own (tens of us each), "
                            "and this one waits for the previous iteration's: the loop measures "
                            "dispatch overhead, not arithmetic (jax-ml/jax#968)",
                        fix="put the loop body in a jitted function (or the whole loop in "
                            "`jax.lax.fori_loop`/`scan`, or vectorise it with `jax.vmap`), so "
                            "one dispatch does all of it", op=ctx.resolve(first.value.func))
                break


def _jitted_functions(ctx: Context) -> dict[str, ast.Call | None]:
    """Functions of this file compiled by ``jax.jit`` -> the jit call (None: a decorator)."""
    out: dict[str, ast.Call | None] = {}
    for fn in ctx.funcs.values():
        for dec in fn.decorator_list:
            if ctx.compiler(dec) == "jax":
                out[fn.name] = dec if isinstance(dec, ast.Call) else None
    for c in ctx.calls():
        if c.args and isinstance(c.args[0], ast.Name) and c.args[0].id in ctx.funcs and (
                ctx.compiler(c.func) == "jax" and not isinstance(c.func, ast.Call)):
            out[c.args[0].id] = c
    return out


def _static_params(fn: ast.FunctionDef | ast.AsyncFunctionDef, jit: ast.Call | None) -> set[str]:
    params = [a.arg for a in fn.args.args]
    if jit is None:
        return set()
    out: set[str] = set()
    for k in jit.keywords:
        v = k.value
        vals = [e.value for e in v.elts] if isinstance(v, ast.Tuple | ast.List) and all(
            isinstance(e, ast.Constant) for e in v.elts) else [v.value] if isinstance(
                v, ast.Constant) else []
        if k.arg == "static_argnums":
            out |= {params[i] for i in vals if isinstance(i, int) and i < len(params)}
        elif k.arg == "static_argnames":
            out |= {str(n) for n in vals}
    return out


_UNROLL = 32  # iterations from which unrolling visibly costs compile time
_CONTAINERS = ("layer", "block", "module", "head", "stage", "param", "key")


def _structural(it: ast.AST) -> bool:
    """A comprehension's iterable that is data held on an object (``coll.pairs``), whose
    length the trace unrolls -- not a literal, a small ``range``, nor a model's layers."""
    if not isinstance(it, ast.Attribute):
        return False
    return not any(w in it.attr.lower() for w in _CONTAINERS)


@rule("script.python-loop-in-jit",
      "a Python loop inside a jitted function",
      "`jax.jit` traces Python control flow: the `for` loop is unrolled into {n} copies of its "
      "body, so compilation grows with the loop count (minutes, for nothing at run time)",
      "write the loop as `jax.lax.fori_loop(lo, hi, body, carry)` (or `jax.lax.scan` to keep "
      "per-step outputs), which compiles the body once; or jit one step and loop outside")
def python_loop_in_jit(ctx: Context) -> None:
    if not ctx.uses("jax"):
        return
    for name, jit in _jitted_functions(ctx).items():
        fn = ctx.funcs[name]
        static = _static_params(fn, jit)
        attribute_bounded_loops(ctx, name, fn, _structural)  # range(model.n) (round 11)
        reported: list[ast.AST] = []
        for loop in walk(fn.body):
            if any(loop in ast.walk(r) for r in reported):
                continue  # an inner loop of one reported: it multiplies the copies
            if isinstance(loop, ast.ListComp) and _structural(loop.generators[0].iter):
                reported.append(loop)  # [f(i, j) for (i, j) in coll.pairs] (round 10)
                ctx.add("script.python-loop-in-jit", "info", loop,
                        f"in `{name}`, which is jitted; the comprehension over "
                        f"`{ast.unparse(loop.generators[0].iter)[:40]}` is unrolled at trace "
                        "time, one copy of its body per element",
                        n="len(list)",
                        why="`jax.jit` traces Python control flow: the comprehension is "
                            "unrolled into one copy of its body per element, so compilation "
                            "grows with the list (chungmin99/jaxmp#13: JIT of collision-aware "
                            "IK 61 s -> ~20 s once the factors were batched)",
                        fix="build the per-element values as arrays up front and apply the "
                            "body once to the batch (`jax.vmap`, or indexing with an array of "
                            "indices); or `jax.lax.map`/`scan` over them")
                continue
            if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)
                    and last_name(loop.iter) == "range" and loop.iter.args):
                continue
            bounds = [a.value if isinstance(a, ast.Constant) else a.id if isinstance(
                a, ast.Name) else None for a in loop.iter.args[:2]]
            hi = bounds[-1] if len(bounds) > 1 else bounds[0]
            lo = bounds[0] if len(bounds) > 1 and isinstance(bounds[0], int) else 0
            if isinstance(hi, int) and hi - lo >= _UNROLL:
                n = f"{hi - lo}"
            elif isinstance(hi, str) and hi in static:
                n = f"`{hi}` (a static argument)"
            else:
                continue
            inner = [x for x in walk(loop.body) if isinstance(x, ast.For)]
            reported.append(loop)
            ctx.add("script.python-loop-in-jit", "warning", loop,
                    f"in `{name}`, which is jitted; the loop runs {n} times at trace time"
                    + (" (with nested loops inside it)" if inner else ""), n=n)
