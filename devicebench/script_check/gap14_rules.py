"""corpus_round12's held-out misses, written generally (issue 24, round 14, step 0; all
``info``: the cost depends on sizes the file does not show).

Analysis gaps first:

- what a model's forward runs: the ``forward``/``__call__`` of a module class and the
  methods and functions of this file it calls (``self.calculate_mask(...)``, a free
  ``_make_causal_mask(...)``), a few calls deep (``dataflow.callees``);
- what a training loop runs besides a forward: a method whose result the loop back-propagates
  (``loss = dut.loss_at_samples(...)``, ``loss.backward()``), read like a forward for loops
  over the batch given as a parameter (``for i in range(x_samples.shape[0])``);
- collators handed to Hugging Face's ``Trainer(data_collator=...)`` as well as a
  DataLoader's ``collate_fn=``.

Then two kinds no rule knew:

- ``script.host-built-in-forward``: a tensor built on the host (a factory call without
  ``device=``) in code every forward runs, then copied to the GPU: an allocation, a fill
  and a host-to-device copy per call (jeffra, huggingface/transformers#22378, 2023, profiled
  by tjruwase and tohtana; xtudbxk, HVision-NKU/SRFormer#5, 2023; rasbt,
  rasbt/LLMs-from-scratch#389, 2024);
- ``script.pad-in-collator``: ``tokenizer.pad`` in a collator over already tokenized
  features: transformers' own warning that with a fast tokenizer, calling it is faster than
  encoding and then padding (quoted on huggingface/notebooks#434, 2023).
"""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import last_name, walk
from devicebench.script_check.context import Context, FuncDef, rule
from devicebench.script_check.dataflow import callees
from devicebench.script_check.kinds import _collate_functions

_FACTORIES = ("torch.zeros", "torch.ones", "torch.full", "torch.empty", "torch.arange",
              "torch.eye", "torch.randn", "torch.rand", "torch.linspace", "torch.tensor")
_MODULE_BASES = ("Module",)
_FORWARDS = ("forward", "__call__")


def _forwards(ctx: Context) -> list[FuncDef]:
    return [m for cls in ctx.classes.values()
            if any(last_name(b) in _MODULE_BASES for b in cls.bases)
            for m in cls.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)
            and m.name in _FORWARDS]


def forward_reach(ctx: Context) -> list[tuple[ast.Call | None, FuncDef]]:
    """(call, function) for every module forward (call None) and what it runs."""
    out: list[tuple[ast.Call | None, FuncDef]] = []
    seen: set[int] = set()
    for fwd in _forwards(ctx):
        for call, fn in [(None, fwd), *callees(ctx, list(fwd.body))]:
            if id(fn) not in seen and fn.name != "__init__":
                seen.add(id(fn))
                out.append((call, fn))
    return out


def _host_factory(ctx: Context, n: ast.AST) -> bool:
    return isinstance(n, ast.Call) and ctx.resolve(n.func) in _FACTORIES and not any(
        k.arg == "device" for k in n.keywords)


def _copies(n: ast.AST) -> ast.AST | None:
    """The receiver of ``x.to(...)`` / ``x.cuda()``."""
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and (
            n.func.attr in ("to", "cuda") and (n.args or n.keywords or n.func.attr == "cuda")):
        return n.func.value
    return None


def _tainted(ctx: Context, fn: FuncDef) -> set[str]:
    """Names of ``fn`` bound, directly or through other such names, to a host factory."""
    names: set[str] = set()
    for _ in range(3):
        for s in walk(fn.body):
            if isinstance(s, ast.Assign) and any(
                    _host_factory(ctx, x) or isinstance(x, ast.Name) and x.id in names
                    for x in ast.walk(s.value)):
                names |= {t.id for t in s.targets if isinstance(t, ast.Name)}
    return names


@rule("script.host-built-in-forward",
      "a tensor is built on the host in every forward, then copied to the device",
      "`{what}` runs on every forward pass: the tensor is allocated and filled on the CPU and "
      "then copied to the GPU (a host-to-device transfer and a sync point each call) "
      "(huggingface/transformers#22378, jeffra: the causal mask built on the CPU; "
      "HVision-NKU/SRFormer#5; rasbt/LLMs-from-scratch#389)",
      "build it on the device (`device=x.device`), or once in `__init__` as a buffer "
      "(`self.register_buffer(\"mask\", ..., persistent=False)`) and slice it per call")
def host_built_in_forward(ctx: Context) -> None:
    if not ctx.uses("torch"):
        return
    reach = forward_reach(ctx)
    copied_calls = {id(r) for n in ast.walk(ctx.tree) if (r := _copies(n)) is not None}
    for _via, fn in reach:
        names = _tainted(ctx, fn)
        copied_here = any(isinstance(x, ast.Name) and x.id in names
                          for n in walk(fn.body) if (r := _copies(n)) is not None
                          for x in ast.walk(r))
        # the call that copies this function's result (``callees`` names the first call of
        # a chain, so the copying call is looked up by the function's name)
        call = next((c for _, f in reach for c in ctx.calls(f.body) if id(c) in copied_calls
                     and last_name(c) == fn.name), None) if fn not in _forwards(ctx) else None
        copied_by_caller = call is not None
        if not (copied_here or copied_by_caller):
            continue
        made = next((s for s in walk(fn.body) if isinstance(s, ast.stmt) and not isinstance(
            s, ast.For | ast.While | ast.If) and any(_host_factory(ctx, x) for x in ast.walk(s))),
            None)
        if made is None:
            continue
        ctx.add("script.host-built-in-forward", "info", made,
                f"in `{fn.name}`, which every forward runs; copied to the device afterwards",
                what=ctx.code(made.lineno)[:50])
        if call is not None and not any(
                _host_factory(ctx, x) for x in ast.walk(call)):
            ctx.add("script.host-built-in-forward", "info", call,
                    f"`{fn.name}` builds its result on the host and this copies it to the "
                    "device on every forward", what=ctx.code(call.lineno)[:50])


def _collators(ctx: Context) -> list[FuncDef]:
    out = list(_collate_functions(ctx))
    for c in ctx.calls():
        v = next((k.value for k in c.keywords if k.arg == "data_collator"), None)
        name = last_name(v.func) if isinstance(v, ast.Call) else (
            v.id if isinstance(v, ast.Name) else "")
        if name in ctx.classes:
            out += [m for m in ctx.classes[name].body if isinstance(m, ast.FunctionDef)
                    and m.name == "__call__"]
        elif name in ctx.funcs:
            out.append(ctx.funcs[name])
    return out


@rule("script.pad-in-collator",
      "the collator pads already tokenized features with `tokenizer.pad`",
      "`tokenizer.pad` runs on every batch in Python over per-example dicts; transformers "
      "warns that with a fast tokenizer, calling the tokenizer (`tokenizer(text, "
      "padding=...)`) is faster than encoding and then calling `pad` "
      "(huggingface/notebooks#434)",
      "tokenize with padding in one `tokenizer(...)` call (batched, up front), or use "
      "`DataCollatorWithPadding` over token ids already padded to a fixed length")
def pad_in_collator(ctx: Context) -> None:
    for fn in _collators(ctx):
        for c in walk(fn.body):
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and (
                    c.func.attr == "pad") and "tokenizer" in ast.unparse(c.func.value).lower():
                ctx.add("script.pad-in-collator", "info", c, f"in `{fn.name}`, per batch")
                break
