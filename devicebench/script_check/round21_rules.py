"""corpus_round20's dev forms (issue 24, round 21), under existing ids, all ``info`` and
added late (``Context.add_late``: none takes an older warning's place). Two analysis
extensions carry most of them: values followed from a caller into a function's parameter
(a device tensor, a loop element of a device tensor), and functions handed to another
call as callbacks (they run as often as the framework calls them).

- a ``jax.jit(f)`` wrapper assigned to a name that is never called, while a loop calls
  ``f`` itself (``script.hot-function-not-compiled``; blackjax-devs/blackjax#711);
- a tensor attribute indexed by a parameter (or a value derived from it) whose callers pass
  the loop element of ``for t in obj.attr`` where the file gives ``obj`` a ``device=``: each
  index is a 0-d device tensor read back (``script.sync-in-step-loop``;
  huggingface/diffusers#13969);
- a comprehension or loop in per-batch code whose element calls a file function that runs
  ``.item()``/``.nonzero()``/``.tolist()`` (``script.sync-in-step-loop``; diffusers#9417);
- an ``equinox.Module`` field annotated ``int``/``float``/``bool`` that a ``filter_jit``
  function rewrites with ``eqx.tree_at``, called in a loop: a static leaf, so every new value
  recompiles (``script.recompile-shapes``; patrick-kidger/equinox#1062);
- in a loop of per-batch code, ``slice(p[i], p[i + 1])`` of a received tensor and indexing by
  a received mask's piece (``script.sync-in-step-loop``; modelscope/ms-swift#9795);
- an ``if`` in a loop comparing an element of a parameter that a caller fills with a tensor
  made with ``device=`` (``script.sync-in-step-loop``;
  AUTOMATIC1111/stable-diffusion-webui#15823);
- ``jax.jit(param.method)`` inside a function handed to another call as a callback (a
  ``*_fn``/``*callback*``/``*hook*`` keyword, directly or by ``functools.partial``): each call
  compiles again (``script.jit-in-loop``; talmolab/track-mjx#45);
- ``ds.map(f)`` without ``batched=True`` where ``f`` calls a tokenizer or processor the file
  loads with ``from_pretrained`` (``script.unbatched-map``; huggingface/trl#3895).

Sources: the threads above (https://github.com/<owner>/<repo>/issues/<n> or ``/pull/<n>``).
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, const, keyword, last_name, walk
from devicebench.script_check.context import Context
from devicebench.script_check.gap20_rules import per_batch

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COMPS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_SYNC = "script.sync-in-step-loop"
_SYNCS = ("item", "nonzero", "tolist")
_FIX = "keep the values the host decides on on the CPU (a CPU copy for indexing and tests)"


def _params(fn: ast.AST) -> list[str]:
    return [a.arg for a in fn.args.args]


def _jit_left_unused(ctx: Context) -> None:
    called = {last_name(c.func) for c in ctx.calls() if isinstance(c.func, ast.Name)}
    for a in ast.walk(ctx.tree):
        if not (isinstance(a, ast.Assign) and isinstance(a.value, ast.Call)
                and ctx.resolve(a.value.func) == "jax.jit" and a.value.args
                and len(a.targets) == 1 and isinstance(a.targets[0], ast.Name)):
            continue
        if a.targets[0].id in called:
            continue
        inner = ast.dump(a.value.args[0])
        for c in ctx.calls():
            if ast.dump(c.func) == inner and ctx.enclosing(c, LOOPS) is not None:
                ctx.add_late("script.hot-function-not-compiled", "info", c,
                             f"`{a.targets[0].id} = jax.jit({ast.unparse(c.func)})` is built "
                             f"at {ctx.line(a.lineno)} but the loop calls "
                             f"`{ast.unparse(c.func)}` itself", framework="JAX",
                             reason="the loop runs the un-jitted function op by op; call "
                             "the jitted wrapper (blackjax-devs/blackjax#711)")


def _callbacks(ctx: Context) -> set[str]:
    out = set()
    for c in ctx.calls():
        for k in c.keywords:
            if not k.arg or not any(s in k.arg for s in ("fn", "callback", "hook")):
                continue
            v = k.value
            if isinstance(v, ast.Call) and last_name(v.func) == "partial" and v.args:
                v = v.args[0]
            if isinstance(v, ast.Name):
                out.add(v.id)
    return out


def _jit_in_callback(ctx: Context) -> None:
    funcs = ctx.funcs
    for name in _callbacks(ctx):
        fn = funcs.get(name)
        if fn is None:
            continue
        params = set(_params(fn))
        for c in ctx.calls(fn.body):
            if ctx.resolve(c.func) == "jax.jit" and c.args and isinstance(
                    c.args[0], ast.Attribute) and isinstance(c.args[0].value, ast.Name) \
                    and c.args[0].value.id in params:
                ctx.add_late("script.jit-in-loop", "info", c,
                             f"`{fn.name}` is handed to another call as a callback, and "
                             f"builds `jax.jit({ast.unparse(c.args[0])})` each time it runs",
                             how="`jax.jit` (in a callback)", ctor="jax.jit",
                             reason="a framework calls its callbacks again and again "
                             "(talmolab/track-mjx#45)")


def _static_field_rewritten(ctx: Context) -> None:
    static = set()
    for cls in ast.walk(ctx.tree):
        if isinstance(cls, ast.ClassDef) and any(last_name(b) == "Module" for b in cls.bases):
            static |= {s.target.id for s in cls.body if isinstance(s, ast.AnnAssign)
                       and isinstance(s.target, ast.Name)
                       and last_name(s.annotation) in ("int", "float", "bool")}
    for fn in ast.walk(ctx.tree):
        if not isinstance(fn, _FUNCS) or not any(
                ctx.resolve(d).endswith("filter_jit") for d in fn.decorator_list):
            continue
        rewrites = [c for c in ctx.calls(fn.body) if last_name(c.func) == "tree_at"
                    and c.args and isinstance(c.args[0], ast.Lambda)
                    and isinstance(c.args[0].body, ast.Attribute)
                    and c.args[0].body.attr in static]
        if not rewrites:
            continue
        for c in ctx.calls():
            if last_name(c.func) == fn.name and ctx.enclosing(c, LOOPS) is not None:
                field = rewrites[0].args[0].body.attr
                ctx.add_late("script.recompile-shapes", "info", c,
                             f"`{fn.name}` is filter_jit'd and rewrites `.{field}`, a Python "
                             "scalar field of an equinox Module (a static leaf)",
                             how="a new static field value on every call",
                             fixtext="hold the counter as a JAX array (equinox#1062)")


def _tokenizers(ctx: Context) -> set[str]:
    return {t.id for a in ast.walk(ctx.tree) if isinstance(a, ast.Assign)
            and isinstance(a.value, ast.Call) and last_name(a.value.func) == "from_pretrained"
            and any(s in ast.unparse(a.value.func).lower() for s in ("token", "processor"))
            for t in a.targets if isinstance(t, ast.Name)}


def _tokenizer_map_unbatched(ctx: Context) -> None:
    toks, funcs = _tokenizers(ctx), ctx.funcs
    for c in ctx.calls():
        if not (isinstance(c.func, ast.Attribute) and c.func.attr == "map" and c.args
                and isinstance(c.args[0], ast.Name) and c.args[0].id in funcs):
            continue
        if const(keyword(c, "batched")) is True:
            continue
        fn = funcs[c.args[0].id]
        kw = keyword(c, "fn_kwargs")
        passed = {k.value for k in kw.keys if isinstance(k, ast.Constant)} if isinstance(
            kw, ast.Dict) else set()
        uses = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} & toks
        if uses or (passed & set(_params(fn)) and kw is not None and any(
                isinstance(v, ast.Name) and v.id in toks for v in kw.values)):
            ctx.add_late("script.unbatched-map", "info", c,
                         f"`{fn.name}` calls a tokenizer/processor one example at a time",
                         does="tokenizes")


def _derived(fn: ast.AST, seeds: set[str]) -> set[str]:
    names = set(seeds)
    for _ in range(2):
        for a in walk(fn.body):
            if isinstance(a, ast.Assign) and {n.id for n in ast.walk(a.value)
                                              if isinstance(n, ast.Name)} & names:
                names |= {t.id for t in a.targets if isinstance(t, ast.Name)}
    return names


def _placed_objects(ctx: Context) -> set[str]:
    """Names the file hands a ``device=`` that is not the CPU."""
    return {ast.unparse(c.func.value) for c in ctx.calls() if isinstance(c.func, ast.Attribute)
            and keyword(c, "device") is not None and const(keyword(c, "device")) != "cpu"}


def _index_by_device_element(ctx: Context) -> None:
    placed, funcs = _placed_objects(ctx), ctx.funcs
    for loop in ast.walk(ctx.tree):
        if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)
                and isinstance(loop.iter, ast.Attribute)
                and ast.unparse(loop.iter.value) in placed):
            continue
        for c in ctx.calls(loop.body):
            fn = funcs.get(last_name(c.func))
            if fn is None or ctx.enclosing(fn, (ast.ClassDef,)) is None:
                continue
            params = _params(fn)[1:]
            seeds = {params[i] for i, v in enumerate(c.args) if i < len(params)
                     and isinstance(v, ast.Name) and v.id == loop.target.id}
            names = _derived(fn, seeds)
            for s in walk(fn.body):
                if isinstance(s, ast.Subscript) and isinstance(s.value, ast.Attribute) \
                        and s.value.attr != loop.iter.attr and isinstance(s.slice, ast.Name) \
                        and s.slice.id in names:
                    ctx.add_late(_SYNC, "info", s, f"`{ast.unparse(s)}`: the index is an "
                                 f"element of `{ast.unparse(loop.iter)}`, a device tensor the "
                                 f"loop at {ctx.line(loop.lineno)} walks", fixtext=_FIX)


def _syncs_inside(fn: ast.AST) -> bool:
    return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
               and c.func.attr in _SYNCS for c in ast.walk(fn))


def _syncing_callee_per_element(ctx: Context) -> None:
    funcs = ctx.funcs
    for comp in ast.walk(ctx.tree):
        if not isinstance(comp, _COMPS) or not per_batch(ctx, comp):
            continue
        for c in ctx.calls([comp]):
            fn = funcs.get(last_name(c.func))
            if fn is not None and fn is not ctx.enclosing(comp, _FUNCS) and _syncs_inside(fn):
                ctx.add_late(_SYNC, "info", comp, f"`{fn.name}` reads a value back to the "
                             "host, and this comprehension calls it once per element of "
                             "per-batch data", fixtext="match all elements in one vectorised "
                             "operation")


def _slices_and_masks_in_loop(ctx: Context) -> None:
    for fn in ast.walk(ctx.tree):
        if not isinstance(fn, _FUNCS) or not per_batch(ctx, fn.body[0]):
            continue
        params = set(_params(fn))
        for loop in walk(fn.body):
            if not isinstance(loop, LOOPS):
                continue
            for n in walk(loop.body):
                if isinstance(n, ast.Call) and last_name(n.func) == "slice" and n.args and all(
                        isinstance(a, ast.Subscript) and last_name(a.value) in params
                        for a in n.args):
                    what = "a slice bounded by elements of a received tensor"
                elif isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Subscript) \
                        and last_name(n.slice.value) in params and "mask" in last_name(
                            n.slice.value):
                    what = "indexing by a received mask (its size is data-dependent)"
                else:
                    continue
                ctx.add_late(_SYNC, "info", n, f"`{ast.unparse(n)[:50]}`: {what}, once per "
                             f"iteration of the loop at {ctx.line(loop.lineno)}", fixtext=_FIX)


def _device_made(ctx: Context) -> set[str]:
    return {t.id for a in ast.walk(ctx.tree) if isinstance(a, ast.Assign)
            and isinstance(a.value, ast.Call) and keyword(a.value, "device") is not None
            and const(keyword(a.value, "device")) != "cpu"
            for t in a.targets if isinstance(t, ast.Name)}


def _branch_on_device_parameter(ctx: Context) -> None:
    made, funcs = _device_made(ctx), ctx.funcs
    for c in ctx.calls():
        fn = funcs.get(last_name(c.func)) if isinstance(c.func, ast.Name) else None
        if fn is None:
            continue
        params = _params(fn)
        dev = {params[i] for i, v in enumerate(c.args) if i < len(params)
               and isinstance(v, ast.Name) and v.id in made}
        for loop in walk(fn.body) if dev else []:
            if not isinstance(loop, LOOPS):
                continue
            for n in walk(loop.body):
                if isinstance(n, ast.If) and any(
                        isinstance(m, ast.Compare) and isinstance(m.left, ast.Subscript)
                        and last_name(m.left.value) in dev for m in ast.walk(n.test)):
                    ctx.add_late(_SYNC, "info", n, "the test compares an element of a device "
                                 f"tensor the caller at {ctx.line(c.lineno)} passes, once per "
                                 f"iteration of the loop at {ctx.line(loop.lineno)}",
                                 fixtext=_FIX)

