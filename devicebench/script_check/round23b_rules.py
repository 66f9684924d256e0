"""corpus_round22's dev forms (issue 24, round 23), continued: the per-step and per-item
forms of the former ``round23_rules`` (:mod:`.forms_data`'s docstring lists them with
their sources), all ``info`` and added late; run from :func:`.forms.run_forms`.

Its DDP form (``ddp-no-sync``) now lives in :mod:`.forms_distributed`.
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, const, keyword, last_name, walk
from devicebench.script_check.context import Context
from devicebench.script_check.round19_rules import hot

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SYNC = "script.sync-in-step-loop"
_EVAL_STEPS = ("validation_step", "test_step", "predict_step")
_STEP_METHODS = ("compute_loss", "_compute_loss", "training_step", "prediction_step")
_INPLACE = ("mul_", "add_", "addcmul_", "addcdiv_", "div_", "sqrt_", "lerp_", "sub_")


def _grad_on_in_eval_steps(ctx: Context) -> None:
    for c in ctx.calls():
        fn = ctx.enclosing(c, _FUNCS)
        if fn is None:
            continue
        if ctx.resolve(c.func) == "torch.set_grad_enabled" and c.args \
                and const(c.args[0]) is True and fn.name in _EVAL_STEPS:
            ctx.add_late("script.inference-grad", "info", c,
                         what=f"`{fn.name}` turns autograd on for every batch "
                              "(materialyzeai/matgl#781)")
        cg = keyword(c, "create_graph")
        if last_name(c) == "grad" and cg is not None and const(cg) is True \
                and fn.name == "forward":
            ctx.add_late("script.inference-grad", "info", c,
                         what="`create_graph=True` in forward keeps a second-order graph "
                              "also when no backward follows (evaluation, MD); "
                              "materialyzeai/matgl#783 ties it to self.training")


def _gather_in_trainer_step(ctx: Context) -> None:
    for cls in ast.walk(ctx.tree):
        if not (isinstance(cls, ast.ClassDef)
                and any(last_name(b).endswith("Trainer") for b in cls.bases)):
            continue
        for fn in cls.body:
            if not (isinstance(fn, _FUNCS) and fn.name in _STEP_METHODS):
                continue
            for c in ctx.calls(fn.body):
                if last_name(c) == "gather" and isinstance(c.func, ast.Attribute) \
                        and "accelerator" in ast.unparse(c.func.value):
                    ctx.add_late(_SYNC, "info", c,
                                 fixtext="gather the metrics once per logging step, not "
                                         "per loss call (huggingface/trl#3838)")


def _tensor_names(ctx: Context, fn: ast.AST) -> set[str]:
    return {t.id for s in ast.walk(fn) if isinstance(s, ast.Assign)
            and isinstance(s.value, ast.Call) and ctx.resolve(s.value.func).startswith("torch.")
            for t in s.targets if isinstance(t, ast.Name)}


def _item_per_tensor_element(ctx: Context) -> None:
    for comp in ast.walk(ctx.tree):
        if not isinstance(comp, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            continue
        fn = ctx.enclosing(comp, _FUNCS)
        tensors = _tensor_names(ctx, fn) if fn is not None else set()
        for g in comp.generators:
            if not (isinstance(g.iter, ast.Name) and g.iter.id in tensors):
                continue
            targets = {n.id for n in ast.walk(g.target) if isinstance(n, ast.Name)}
            if any(isinstance(c, ast.Call) and last_name(c) == "item"
                   and isinstance(c.func, ast.Attribute)
                   and isinstance(c.func.value, ast.Name) and c.func.value.id in targets
                   for c in ast.walk(comp)):
                ctx.add_late(_SYNC, "info", ctx.enclosing(comp, (ast.stmt,)) or comp,
                             fixtext=f"one .item() per element of `{g.iter.id}`: read it "
                                     "once with .tolist(), or index a device lookup table "
                                     "(huggingface/trl#4888)")


def _index_search_per_item(ctx: Context) -> None:
    for comp in ast.walk(ctx.tree):
        if isinstance(comp, ast.ListComp) and isinstance(comp.elt, ast.Call) \
                and last_name(comp.elt) == "index" and isinstance(comp.elt.func, ast.Attribute) \
                and isinstance(comp.elt.func.value, ast.Name) and ctx.uses("torch"):
            ctx.add_late("script.per-sample-python-loop", "info",
                         ctx.enclosing(comp, (ast.stmt,)) or comp,
                         what=f"`{comp.elt.func.value.id}.index(...)` searches the list once "
                              "per item (a dict from value to index does it in one pass; "
                              "materialyzeai/matgl#781)")


def _per_param_optimizer_loop(ctx: Context) -> None:
    for cls in ast.walk(ctx.tree):
        if not (isinstance(cls, ast.ClassDef)
                and any(last_name(b) == "Optimizer" for b in cls.bases)):
            continue
        for fn in cls.body:
            if not (isinstance(fn, _FUNCS) and fn.name == "step"):
                continue
            for loop in walk(fn.body):
                if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Subscript)
                        and const(loop.iter.slice) == "params"):
                    continue
                ops = sorted({last_name(c) for c in ast.walk(loop) if isinstance(c, ast.Call)
                              and last_name(c) in _INPLACE})
                if len(ops) >= 2:
                    ctx.add_late("script.foreach-not-used", "info", loop, n="each",
                                 op=ops[0], ops=", ".join(ops))


def _host_tensor_in_loop_helper(ctx: Context) -> None:
    for fn in ast.walk(ctx.tree):
        if not isinstance(fn, _FUNCS):
            continue
        in_loop = ctx.enclosing(fn, LOOPS) is not None or any(
            isinstance(c.func, ast.Name) and c.func.id == fn.name
            and ctx.enclosing(c, LOOPS) is not None for c in ctx.calls())
        if not in_loop:
            continue
        for s in walk(fn.body):
            if not (isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)
                    and ctx.resolve(s.value.func) == "torch.tensor"
                    and keyword(s.value, "device") is None and len(s.targets) == 1
                    and isinstance(s.targets[0], ast.Name)):
                continue
            name = s.targets[0].id
            if any(last_name(c) == "to" and isinstance(c.func, ast.Attribute)
                   and isinstance(c.func.value, ast.Name) and c.func.value.id == name
                   for c in ctx.calls(fn.body)):
                ctx.add_late("script.host-built-in-forward", "info", s,
                             what=f"`{name}` (built on the host per call, then copied; "
                                  "huggingface/diffusers#9642)")


def _per_datum_grad_loop(ctx: Context) -> None:
    for fn in ast.walk(ctx.tree):
        if not isinstance(fn, _FUNCS):
            continue
        sizes = {}
        for s in walk(fn.body):
            if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                    and isinstance(s.targets[0], ast.Name):
                v = s.value
                if isinstance(v, ast.Subscript) and isinstance(v.value, ast.Attribute) \
                        and v.value.attr == "shape" and const(v.slice) == 0:
                    sizes[s.targets[0].id] = ast.unparse(v.value.value)
                elif isinstance(v, ast.Call) and isinstance(v.func, ast.Name) \
                        and v.func.id == "len" and v.args:
                    sizes[s.targets[0].id] = ast.unparse(v.args[0])
        for loop in walk(fn.body):
            if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)
                    and isinstance(loop.iter, ast.Call) and last_name(loop.iter) == "range"
                    and len(loop.iter.args) == 1 and isinstance(loop.iter.args[0], ast.Name)
                    and loop.iter.args[0].id in sizes):
                continue
            x, n = sizes[loop.iter.args[0].id], loop.target.id
            indexed = any(isinstance(e, ast.Subscript) and ast.unparse(e.value) == x
                          and ast.unparse(e.slice) == n for e in ast.walk(loop))
            if indexed and any(last_name(c) == "grad" and "autograd" in ast.unparse(c.func)
                               for c in ctx.calls(loop.body)):
                ctx.add_late("script.per-sample-python-loop", "info", loop,
                             what=f"`{x}[{n}]` one datum at a time through the model and "
                                  "autograd.grad (f-dangel/curvlinops#85)")


def lax_map_fresh_closure(ctx: Context) -> None:
    for c in ctx.calls():
        if ctx.resolve(c.func) not in ("jax.lax.map", "jax.lax.scan") or not c.args \
                or not isinstance(c.args[0], ast.Name):
            continue
        fn = ctx.enclosing(c, _FUNCS)
        if fn is None or fn.decorator_list or ctx.is_compiled_scope(fn):
            continue
        local = any(isinstance(d, _FUNCS) and d.name == c.args[0].id for d in fn.body)
        if local and hot(ctx, c):
            ctx.add_late("script.jit-in-loop", "info", c, ctor=ast.unparse(c.func),
                         reason=f"`{c.args[0].id}` is a closure made anew by each call of "
                                f"`{fn.name}`, so each call traces and compiles it again",
                         how="define the mapped function once (module level) and jit the "
                             "caller, passing the per-call values as arguments "
                             "(markean/aimz#275)")


def jit_loop_under_vmap(ctx: Context) -> None:
    vmapped = {c.args[0].id for c in ctx.calls() if ctx.resolve(c.func) == "jax.vmap"
               and c.args and isinstance(c.args[0], ast.Name)}
    called = {last_name(c) for d in ast.walk(ctx.tree) if isinstance(d, _FUNCS)
              and d.name in vmapped for c in ctx.calls(d.body)}
    for fn in ast.walk(ctx.tree):
        if not (isinstance(fn, _FUNCS) and fn.name in called):
            continue
        jitted = {d.name for d in fn.body if isinstance(d, _FUNCS) and any(
            ctx.resolve(x) == "jax.jit" for x in d.decorator_list)}
        for c in ctx.calls(fn.body):
            if isinstance(c.func, ast.Name) and c.func.id in jitted \
                    and ctx.enclosing(c, LOOPS) is not None:
                ctx.add_late("script.recompile-shapes", "info", c,
                             how=f"`{fn.name}` runs under vmap, so its Python loop calling "
                                 f"`{c.func.id}` is unrolled into the traced program",
                             fixtext="use lax.scan/fori_loop over the iterations "
                                     "(probml/dynamax#462)")


def _zip_comprehension_then_cat(ctx: Context) -> None:
    for fn in ast.walk(ctx.tree):
        if not isinstance(fn, _FUNCS):
            continue
        joined = {c.args[0].id for c in ctx.calls(fn.body)
                  if ctx.resolve(c.func) in ("torch.cat", "torch.stack") and c.args
                  and isinstance(c.args[0], ast.Name)}
        for s in walk(fn.body):
            if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                    and isinstance(s.targets[0], ast.Name) and s.targets[0].id in joined \
                    and isinstance(s.value, ast.ListComp) \
                    and isinstance(s.value.elt, ast.BinOp) and any(
                        isinstance(g.iter, ast.Call) and last_name(g.iter) == "zip"
                        for g in s.value.generators):
                ctx.add_late("script.per-sample-python-loop", "info", s,
                             what=f"`{s.targets[0].id}` built one product per element, "
                                  "then joined (materialyzeai/matgl#783 broadcasts it)")
