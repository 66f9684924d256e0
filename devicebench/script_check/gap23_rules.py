"""corpus_round21's held-out misses written generally (issue 24, round 23, step 0): analysis
gaps, under existing ids, all ``info`` and added late (``Context.add_late``: none takes an
older warning's place).

Per-step code here is a function that ``hot`` (round 19) or ``per_batch`` (round 20) finds
run per iteration, or a method whose name is one a framework's driver calls once per step or
request, though no loop of the file is seen calling it (a serving engine's scheduler loop or an
RL trainer's step loop lives in another module). The names (exact, or as a prefix / suffix):

- Lightning / Keras: ``train_step``, ``training_step`` (``forward`` and ``step`` are left to
  the older rules, which follow them through the loop that runs them);
- vLLM's model runner: ``execute_model``, ``sample``, ``compute_logits``;
- SGLang's scheduler: ``process_batch*`` (``process_batch_result_prefill``/``_decode``),
  ``run_batch``, any method ending in ``_batch`` of a class (``prepare_mlp_sync_batch``);
- generation: ``generate``, ``generate_sequences``;
- RL policy workers (NeMo RL, verl): ``get_logprobs``, ``get_reference_policy_logprobs``,
  ``compute_log_prob``, ``compute_ref_log_prob``, ``prepare_for_training``,
  ``prepare_for_lp_inference``, ``update_weights*``, ``offload_before_refit``,
  ``offload_after_refit``, ``update_actor``;
- a function such a method calls (by name or ``self.<name>``), and a context manager it enters
  (``with self.use_reference_model():``).

The forms:

- ``.tolist()``, ``.item()``, ``.cpu()`` (also ``.min()/.max().item()``,
  ``int(t.sum().item())``, ``split_with_sizes(x, t.tolist())``, ``[t.tolist() for t in ...]``)
  in per-step code, unless gated on a logging step, read from a value already on the host, or
  the whole return value of a free function (the caller's business, round 13):
  each is a device-to-host copy and a stream sync per step or request
  (``script.sync-in-step-loop``; sgl-project/sglang#23332, #24168, #34338;
  vllm-project/vllm#22760);
- ``torch.cuda.synchronize()`` in per-step code outside a timed region: a full barrier each
  step (``script.sync-in-step-loop``; NVIDIA-NeMo/RL#894);
- ``torch.cuda.empty_cache()`` in per-step code, unless under an ``if`` on a memory level or
  flag: the allocator's cache released and rebuilt each step (``script.empty-cache-in-loop``;
  NVIDIA-NeMo/RL#1071);
- ``clip_grad_norm_(..., error_if_nonfinite=True)`` in per-step code: the norm is read back to
  the host each step to test it (``script.sync-in-step-loop``; deepmodeling/deepmd-kit#5519);
- a ``range`` loop whose bound is arithmetic on a static argument of a jitted function, in a
  function nested in it (a ``while_loop``/``scan`` body): unrolled at trace time
  (``script.python-loop-in-jit``; astro-informatics/s2fft#361).

Sources: the threads above (https://github.com/<owner>/<repo>/issues/<n> or ``/pull/<n>``).
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import last_name, walk
from devicebench.script_check.context import Context
from devicebench.script_check.gap20_rules import per_batch
from devicebench.script_check.gap22_rules import _gated
from devicebench.script_check.loop_rules import _jitted_functions, _static_params
from devicebench.script_check.round19_rules import hot

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SYNC = "script.sync-in-step-loop"
_EXACT = {"train_step", "training_step", "execute_model", "sample",
          "compute_logits", "run_batch", "generate", "generate_sequences", "get_logprobs",
          "get_reference_policy_logprobs", "compute_log_prob", "compute_ref_log_prob",
          "prepare_for_training", "prepare_for_lp_inference", "offload_before_refit",
          "offload_after_refit", "update_actor"}
_PREFIXES = ("process_batch", "update_weights", "execute_model")
_READS = {"tolist", "item", "cpu"}
_HOSTISH = ("model", "module", "net", "optimizer", "optim")
_FIX = ("copy what the host needs once per step (one non_blocking copy into a pinned buffer, "
        "then slice on the host), or keep the values on the device")


def _per_step_calls(ctx: Context) -> None:
    """Reads, barriers and cache releases in a function run once per step (torch)."""
    for c in ctx.calls():
        fn = ctx.enclosing(c, _FUNCS)
        if fn is None or fn.name == "__init__":
            continue
        attr, q = getattr(c.func, "attr", ""), ctx.resolve(c.func)
        if not _per_step(ctx, fn, c) and not (_looped_read(attr, c) and (
                hot(ctx, c) or per_batch(ctx, c))):
            continue
        if attr in _READS and not c.args and not _host_value(ctx, c.func.value) \
                and not _gated(ctx, c) and not _handed_back(ctx, c):
            _add(ctx, _SYNC, c, f"`{ast.unparse(c)[:50]}` in `{fn.name}`, run once per step "
                 "or request: a device-to-host copy and a stream sync each time")
        elif q == "torch.cuda.synchronize" and not _timed(ctx, fn):
            _add(ctx, _SYNC, c, f"a full device barrier in `{fn.name}`, run once per step",
                 fix="drop it: work on one stream is ordered already; wait on an event "
                 "for the one copy that must finish")
        elif q == "torch.cuda.empty_cache" and not _level_gated(ctx, c):
            _add(ctx, "script.empty-cache-in-loop", c, f"in `{fn.name}`, run once per "
                 "step: the allocator's cache is released and rebuilt every step",
                 fix="call it only under a memory-level flag (or when memory is short)")
        elif last_name(c) == "clip_grad_norm_" and any(
                k.arg == "error_if_nonfinite" and isinstance(k.value, ast.Constant)
                and k.value.value is True for k in c.keywords):
            _add(ctx, _SYNC, c, "`error_if_nonfinite=True` reads the total norm back to the "
                 "host every step to test it", fix="clip without the check and test the "
                 "norm on the device (or only before a checkpoint)")


def _add(ctx: Context, fid: str, node: ast.AST, observed: str, fix: str = _FIX) -> None:
    base = {"data": "the tensor", "what": "this", "how": "the compiler", "fixtext": fix,
            "framework": "PyTorch", "reason": "it runs op by op", "n": "L"}
    ctx.add_late(fid, "info", node, observed, fix=fix, **base)


def _named_per_step(fn: ast.AST, in_class: bool) -> bool:
    name = fn.name
    return name in _EXACT or name.startswith(_PREFIXES) or (in_class and name.endswith("_batch"))


def _per_step(ctx: Context, fn: ast.AST, node: ast.AST, depth: int = 2) -> bool:
    cls = ctx.enclosing(fn, (ast.ClassDef,))
    if _named_per_step(fn, cls is not None):
        return True
    if depth == 0:
        return False
    for c in ctx.calls():
        if last_name(c) != fn.name or ctx.enclosing(c, _FUNCS) in (fn, None):
            continue
        if _per_step(ctx, ctx.enclosing(c, _FUNCS), c, depth - 1):
            return True
    return False


def _host_value(ctx: Context, v: ast.AST) -> bool:
    """A receiver already on the host (or a model being moved, not a tensor read)."""
    text = ast.unparse(v)
    if any(w in last_name(v).lower() for w in _HOSTISH) or ".cpu()" in text \
            or ".numpy()" in text or "np." in text:
        return True
    if isinstance(v, ast.Name):
        fn = ctx.enclosing(v, _FUNCS)
        for s in walk(fn.body if fn is not None else ctx.tree.body):
            if isinstance(s, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == v.id for t in s.targets):
                made = s.value
                if isinstance(made, ast.Call) and ctx.resolve(made.func).startswith(
                        "torch.") and not any(k.arg == "device" for k in made.keywords) \
                        and last_name(made) in ("tensor", "as_tensor", "from_numpy"):
                    return True
    return False


def _looped_read(attr: str, c: ast.Call) -> bool:
    """Forms counted also where only a loop shows the code per step (round 19's ``hot``):
    ``.tolist()``, ``.sum().item()`` and ``clip_grad_norm_(error_if_nonfinite=True)``;
    older rules decide the rest there."""
    return attr == "tolist" or last_name(c) == "clip_grad_norm_" or (
        attr == "item" and last_name(c.func.value) == "sum")


def _handed_back(ctx: Context, c: ast.Call) -> bool:
    """``return t.item()`` in a free function: converting as it returns is the caller's
    business (round 13); a runner's or scheduler's method returns its per-step output."""
    return isinstance(ctx.parents.get(c), ast.Return) and ctx.enclosing(
        c, (ast.ClassDef,)) is None


def _timed(ctx: Context, fn: ast.AST) -> bool:
    return any(ctx.resolve(c.func) in ("time.time", "time.perf_counter", "time.monotonic")
               or last_name(c) == "elapsed_time" for c in ctx.calls(fn.body))


def _level_gated(ctx: Context, node: ast.AST) -> bool:
    p = ctx.parents.get(node)
    while p is not None and not isinstance(p, _FUNCS):
        if isinstance(p, ast.If) and any(w in ast.unparse(p.test).lower() for w in (
                "memory", "level", "empty", "every", "%")):
            return True
        p = ctx.parents.get(p)
    return False


def _nested_range_in_jit(ctx: Context) -> None:
    for name, jit in _jitted_functions(ctx).items():
        outer = ctx.funcs[name]
        static = _static_params(outer, jit)
        if not static:
            continue
        for inner in (f for f in ast.walk(outer) if isinstance(f, _FUNCS) and f is not outer):
            for loop in walk(inner.body):
                if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)
                        and last_name(loop.iter) == "range" and loop.iter.args):
                    continue
                bound = loop.iter.args[-1]
                if {n.id for n in ast.walk(bound) if isinstance(n, ast.Name)} & static:
                    ctx.add_late("script.python-loop-in-jit", "info", loop,
                                 f"in `{inner.name}`, nested in `{name}`, which is jitted: "
                                 f"`{ast.unparse(loop.iter)}` is unrolled at trace time, one "
                                 "copy of its body per index", n=f"`{ast.unparse(bound)}`")
