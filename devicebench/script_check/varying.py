"""Values that change from one iteration of a loop to the next, as far as the file shows:
Python numbers (loop counters, enumerate indices, numbers read from the data with
``.item()``/``len``), and tensors whose shape follows them (random or per-item sizes, padded
or tokenized batches). Used by the recompilation rules (issue 24, class 13)."""

from __future__ import annotations

import ast

from devicebench.script_check.ast_tools import LOOPS, keyword, last_name, target_names, walk
from devicebench.script_check.context import Context

_CREATORS = {"randn", "rand", "zeros", "ones", "empty", "full", "randint", "normal", "uniform",
             "arange", "linspace"}
_RANDOM_INTS = {"numpy.random.randint", "random.randint", "random.randrange", "random.choice",
                "numpy.random.choice"}
PADDERS = ("pad_sequence", "pad_to_longest", "pad_batch")
_RESIZERS = {"interpolate", "resize", "upsample", "resize_images"}
# ops whose output size depends on the input's values, not its shape
DATA_SIZED = {"nonzero", "argwhere", "unique", "masked_select", "boolean_mask",
              "neighbor_list", "neighbour_list", "radius_graph", "knn_graph", "radius"}
PER_ITEM = ("video", "path", "file", "image", "img")


def _shape_args(call: ast.Call, resolved: str) -> list[ast.expr]:
    """The positional arguments of a tensor creator that set its shape: not ``full``'s
    fill value, ``randint``'s bounds or ``normal``'s loc and scale, nor a JAX key."""
    name = last_name(call)
    if resolved.startswith("jax.random."):
        return call.args[1:]
    if name == "full":
        return call.args[:1]
    if name in ("randint", "normal", "uniform"):
        return call.args[2:]
    return call.args


def padded_batch(call: ast.Call) -> bool:
    """``ds.padded_batch(n)`` without ``padded_shapes``: each batch padded to its own longest."""
    return any(isinstance(c, ast.Call) and last_name(c) == "padded_batch" and not (
        keyword(c, "padded_shapes") or len(c.args) > 1) for c in ast.walk(call))


_TOKENIZERS = ("encode", "tokenize")


def _data_number(fn: ast.FunctionDef | ast.AsyncFunctionDef, value: ast.expr) -> bool:
    """Whether ``value`` (in ``fn``) is a Python number read from a tensor: ``x.item()``,
    or a name ``fn`` assigns from one."""
    def read(v: ast.AST) -> bool:
        return isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and (
            v.func.attr == "item")
    if read(value):
        return True
    return isinstance(value, ast.Name) and any(
        isinstance(n, ast.Assign) and read(n.value) and any(
            isinstance(t, ast.Name) and t.id == value.id for t in n.targets)
        for n in ast.walk(fn))


class Varying:
    """Names bound, inside one loop, to values whose size changes from one iteration to the
    next: random or per-iteration sizes, tensors created with them, padded batches."""

    def __init__(self, ctx: Context, loop: ast.For | ast.AsyncFor | ast.While) -> None:
        self.ctx = ctx
        self.sizes: set[str] = set()   # ints that change per iteration
        self.shaped: set[str] = set()  # tensors whose shape changes per iteration
        self.why: dict[str, str] = {}
        self.per_item = False  # a loop over files/videos/images: each has its own size
        self.guess: set[str] = set()  # shaped by a guess (the data's sizes are not in the file)
        self.maybe: set[str] = set()  # items of an iterable of unknown kind: numbers, perhaps
        if isinstance(loop, ast.For | ast.AsyncFor):
            if isinstance(loop.iter, ast.Call) and last_name(loop.iter) == "range":
                self.sizes |= set(target_names(loop.target))
            elif isinstance(loop.iter, ast.List | ast.Tuple) and len({ast.dump(e) for e in
                                                                    loop.iter.elts}) > 1:
                self.sizes |= set(target_names(loop.target))  # for n in [5, 8, 10]
                for name in target_names(loop.target):
                    self.why[name] = f"`{name}` takes the values of `{ast.unparse(loop.iter)}`"
            elif isinstance(loop.iter, ast.Name) and any(
                    "shape" in loop.iter.id or "size" in loop.iter.id for _ in [0]):
                self.sizes |= set(target_names(loop.target))  # for n in shape_array
            loader = loop.iter.args[0] if isinstance(loop.iter, ast.Call) and last_name(
                loop.iter) == "enumerate" and loop.iter.args else loop.iter
            if isinstance(loader, ast.Name) and any(
                    isinstance(v, ast.Call) and (any(
                        k.arg == "collate_fn" and "pad" in ast.unparse(k.value).lower()
                        for k in v.keywords) or padded_batch(v))
                    for v in ctx.assigns.get(loader.id, [])):
                for name in target_names(loop.target):
                    self.shaped.add(name)
                    self.why[name] = (f"`{loader.id}` pads each batch to its own longest "
                                      "element (its collate_fn or padded_batch), so lengths "
                                      "change per batch")
            self.per_item = isinstance(loop.iter, ast.Name) and any(
                w in loop.iter.id.lower() for w in PER_ITEM)
            self._enumerated(loop)
            if isinstance(loader, ast.Name):
                self._collated(loader.id, loop.target)
        self.targets = set(target_names(loop.target)) if isinstance(
            loop, ast.For | ast.AsyncFor) else set()
        self.items = isinstance(loop, ast.For | ast.AsyncFor) and not (
            isinstance(loop.iter, ast.Call) and last_name(loop.iter) == "range")
        for n in walk(loop.body, lambda x: isinstance(x, LOOPS)):
            if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and isinstance(
                    n.value, ast.Constant) and isinstance(n.value.value, int | float):
                self.sizes.add(n.target.id)  # step += 1: a counter
                self.why[n.target.id] = (f"`{n.target.id}` is a counter incremented every "
                                         f"iteration ({ctx.line(n.lineno)})")
        for _ in range(2):
            for n in walk(loop.body, lambda x: isinstance(x, LOOPS)):
                if isinstance(n, ast.Assign):
                    for t in n.targets:
                        if isinstance(t, ast.Tuple) and self._returned(t, n.value):
                            continue
                        for name in target_names(t):
                            self._bind(name, n.value)

    def _enumerated(self, loop: ast.For | ast.AsyncFor) -> None:
        """``for i, x in enumerate(xs)``: ``i`` counts; ``x`` is a number when ``xs`` is a
        NumPy array or a list of numbers (as the file assigns it)."""
        it, target = loop.iter, loop.target
        if isinstance(it, ast.Call) and last_name(it) == "enumerate" and it.args and (
                isinstance(target, ast.Tuple) and len(target.elts) == 2):
            idx, target, it = target.elts[0], target.elts[1], it.args[0]
            if isinstance(idx, ast.Name):
                self.sizes.add(idx.id)
                self.why[idx.id] = f"`{idx.id}` counts the iterations (`enumerate`)"
        if isinstance(target, ast.Name) and isinstance(it, ast.Name) and not any(
                isinstance(v, ast.Call) and self.ctx.is_tensor_op(v)
                for v in self.ctx.assigns.get(it.id, [])):
            self.maybe.add(target.id)  # `for i, sigma in enumerate(sigmas)`: sigmas unknown
        if isinstance(target, ast.Name) and isinstance(it, ast.Name) and any(
                isinstance(v, ast.Call) and self.ctx.resolve(v.func).startswith("numpy.")
                or isinstance(v, ast.List | ast.Tuple) and v.elts and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, int | float)
                    for e in v.elts) for v in self.ctx.assigns.get(it.id, [])):
            self.sizes.add(target.id)
            self.why[target.id] = (f"`{target.id}` takes the values of `{it.id}` (numbers, "
                                   "not tensors)")

    def _collated(self, loader: str, target: ast.expr) -> None:
        """A DataLoader whose ``collate_fn`` (a function of this file) returns a dict with a
        Python number read from the batch (``.item()``, ``len``): ``batch["key"]`` varies."""
        for v in self.ctx.assigns.get(loader, []):
            fn_node = keyword(v, "collate_fn") if isinstance(v, ast.Call) else None
            fn = self.ctx.funcs.get(fn_node.id) if isinstance(fn_node, ast.Name) else None
            if fn is None or not isinstance(target, ast.Name):
                continue
            for ret in (n for n in ast.walk(fn) if isinstance(n, ast.Return)):
                if isinstance(ret.value, ast.Dict):
                    for k, val in zip(ret.value.keys, ret.value.values, strict=True):
                        if isinstance(k, ast.Constant) and _data_number(fn, val):
                            key = f"{target.id}[{k.value!r}]"
                            self.sizes.add(key)
                            self.why[key] = (f"`{key}` is a Python number read from each "
                                             f"batch by `{fn.name}` (`{ast.unparse(val)[:40]}`)")

    def _returned(self, target: ast.Tuple, value: ast.expr) -> bool:
        """``a, n = helper(...)``: the names the local ``helper`` returns as numbers read from
        the data (``.item()``) vary per iteration. True when the target was handled."""
        fn = self.ctx.funcs.get(value.func.id) if isinstance(value, ast.Call) and isinstance(
            value.func, ast.Name) else None
        if fn is None:
            return False
        for ret in (n for n in ast.walk(fn) if isinstance(n, ast.Return)):
            if isinstance(ret.value, ast.Tuple) and len(ret.value.elts) == len(target.elts):
                for t, val in zip(target.elts, ret.value.elts, strict=True):
                    if isinstance(t, ast.Name) and _data_number(fn, val):
                        self.sizes.add(t.id)
                        self.why[t.id] = (f"`{t.id}` is a Python number `{fn.name}` reads "
                                          f"from each batch (`{ast.unparse(val)[:40]}`)")
        return False

    def _bind(self, name: str, value: ast.expr) -> None:
        if isinstance(value, ast.Call) and last_name(value) in DATA_SIZED:
            self.shaped.add(name)  # senders, receivers = neighbor_list(positions, r_max)
            self.why[name] = (f"`{name}` comes from `{ast.unparse(value)[:40]}`, whose size "
                              "depends on the values (how many pairs, hits or unique items)")
            return
        if isinstance(value, ast.Call) and self.ctx.resolve(value.func) in _RANDOM_INTS:
            self.sizes.add(name)
            self.why[name] = f"`{name}` is drawn at random each iteration"
        elif name not in self.sizes and self._python_number_of(value):
            v = self._python_number_of(value)
            self.sizes.add(name)
            self.why[name] = (f"`{name}` is a Python number computed from `{v}`, which changes "
                              "every iteration")
            if v in self.maybe or v in self.guess:
                self.guess.add(name)
                self.why[name] = (f"`{name}` is computed with Python arithmetic from `{v}`, "
                                  "which changes every iteration (a Python number if the "
                                  "iterable holds numbers, as the file does not show)")
        elif isinstance(value, ast.Call) and self._comprehended(value):
            self.shaped.add(name)
            self.why[name] = self._comprehended(value)
        elif self.shape_of(value):
            self.shaped.add(name)
            self.why.setdefault(name, self.shape_of(value))
        elif self.items and isinstance(value, ast.Call) and any(
                w in last_name(value).lower() for w in _TOKENIZERS) and not isinstance(
                keyword(value, "padding"), ast.Constant):
            self.shaped.add(name)
            self.why[name] = (f"`{name}` is one item's text tokenized "
                              f"(`{ast.unparse(value)[:40]}`): each item has its own length")
        elif self.per_item and isinstance(value, ast.Call) and any(
                w in last_name(value).lower() for w in ("read", "load", "imread", "open")):
            self.shaped.add(name)
            self.guess.add(name)
            self.why[name] = (f"`{name}` is read from one file per iteration "
                              f"(`{ast.unparse(value)[:40]}`); items of their own size each "
                              "give new shapes")

    def _python_number_of(self, value: ast.expr) -> str:
        """The changing number a plain Python arithmetic expression is computed from ("" if
        none, or if the expression makes a tensor)."""
        if not isinstance(value, ast.BinOp | ast.Call | ast.UnaryOp | ast.IfExp):
            return ""
        calls = [c for c in ast.walk(value) if isinstance(c, ast.Call)]
        if any(self.ctx.is_tensor_op(c) or last_name(c) in _CREATORS or isinstance(
                c.func, ast.Attribute) for c in calls):
            return ""
        if isinstance(value, ast.Call) and last_name(value) not in ("min", "max", "float", "int",
                                                                      "round", "abs") and not (
                isinstance(value.func, ast.Name) and value.func.id in self.ctx.funcs):
            return ""
        return next((n.id for n in ast.walk(value) if isinstance(n, ast.Name)
                     and (n.id in self.sizes or n.id in self.maybe and isinstance(
                         value, ast.BinOp))), "")

    def _comprehended(self, call: ast.Call) -> str:
        """``np.array([f(o) for o, _ in games])`` with ``games`` an item of this loop: the
        array has one element per entry of the item, a length that changes per iteration."""
        if not self.items or not self.ctx.resolve(call.func).startswith((
                "numpy.", "jax.numpy.", "torch.", "tensorflow.")):
            return ""
        for a in call.args[:1]:
            if isinstance(a, ast.ListComp | ast.GeneratorExp):
                src = ast.unparse(a.generators[0].iter)
                if any(isinstance(n, ast.Name) and n.id in self.targets for n in ast.walk(
                        a.generators[0].iter)):
                    return (f"`{ast.unparse(call)[:50]}` has one element per entry of "
                            f"`{src}`, which is a different item (of its own length) every "
                            "iteration")
        return ""

    def inherit(self, outer: Varying) -> None:
        """Numbers that change per iteration of an enclosing loop change between calls too."""
        self.guess |= outer.guess - self.sizes - self.shaped
        for name in outer.sizes - self.sizes:
            self.sizes.add(name)
            self.why.setdefault(name, outer.why.get(name, f"`{name}` changes every iteration "
                                                         "of an enclosing loop"))

    def shape_of(self, node: ast.AST) -> str:
        """Why ``node``'s shape changes per iteration ("" if it does not, as far as seen)."""
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and n.id in self.shaped:
                return self.why.get(n.id, f"`{n.id}` changes shape")
            if isinstance(n, ast.Call) and last_name(n) in PADDERS:
                return (f"`{last_name(n)}` pads each batch to its own longest element, so the "
                        "length changes from batch to batch")
            if isinstance(n, ast.Call) and last_name(n) in _RESIZERS:
                args = [*n.args[1:], *(k.value for k in n.keywords if k.arg in (
                    "size", "shape", "scale_factor", "dsize"))]
                hit = {m.id for a in args for m in ast.walk(a) if isinstance(m, ast.Name)
                       } & self.sizes
                if hit:  # F.interpolate(img, size=(scale[1], ...)) with a random scale
                    v = sorted(hit)[0]
                    return (self.why.get(v, f"`{v}` changes every iteration") +
                            f" and sets the size of `{ast.unparse(n)[:60]}`")
            if isinstance(n, ast.Call) and last_name(n) in _CREATORS:
                args = _shape_args(n, self.ctx.resolve(n.func))
                names = {m.id for a in [*args, *(k.value for k in n.keywords if k.arg in (
                    "shape", "size"))] for m in ast.walk(a) if isinstance(m, ast.Name)}
                hit = names & self.sizes
                if hit:
                    v = sorted(hit)[0]
                    return (self.why.get(v, f"`{v}` changes every iteration") +
                            f" and sizes `{ast.unparse(n)[:60]}`")
        return ""
