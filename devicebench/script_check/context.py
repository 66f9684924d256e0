"""The context every script rule sees, and the rule registry.

A rule is one function ``rule(ctx)`` registered with :func:`rule`, which also holds the
rule's message (title, why, fix, source). Rules report through :meth:`Context.add`; they
never import a framework.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devicebench.env.finding import Finding, Severity
from devicebench.env.snapshot import EnvSnapshot
from devicebench.script_check.ast_tools import (
    const,
    dotted,
    elements,
    keras_rel,
    last_name,
    target_names,
    walk,
)
from devicebench.script_check.pins import keras_assumed

DEFAULT_ALIASES = {"tf": "tensorflow", "np": "numpy", "jnp": "jax.numpy"}
TENSOR_ROOTS = ("tensorflow.", "jax.", "torch.")
SYNC_METHODS = {"numpy", "item", "tolist", "block_until_ready", "synchronize", "cpu"}
SYNC_FUNCS = {"torch.cuda.synchronize", "torch.mps.synchronize", "torch.xpu.synchronize",
              "jax.block_until_ready", "jax.device_get", "numpy.asarray", "numpy.array", "float",
              "sync", "synchronize", "block_until_ready"}
STEP_NAMES = {"apply_gradients", "backward", "step", "minimize", "GradientTape"}
SMALL_CREATORS = {"constant", "Variable", "convert_to_tensor"}
SHAPE_CREATORS = {"ones", "zeros", "fill", "random.normal", "random.uniform"}
SMALL_ELEMENTS = 4096
TF_NO_INIT = ("config.", "random.set_seed", "debugging.set_log_device_placement", "get_logger",
              "function", "autograph.", "device")
KERAS_NO_INIT = ("mixed_precision.", "config.", "datasets.", "utils.set_random_seed")
FuncDef = ast.FunctionDef | ast.AsyncFunctionDef
_NOT_MODELS = ("Tokenizer", "Processor", "Config", "FeatureExtractor", "ImageProcessor")


@dataclass(frozen=True)
class Message:
    """A rule's text; ``{name}``-style fields are filled in per finding."""

    title: str
    why: str
    fix: str
    source: str = ""


@dataclass(frozen=True)
class Rule:
    """One registered rule: the finding id it reports, its text and its function."""

    id: str
    message: Message
    check: Callable[[Context], None]


RULES: dict[str, Rule] = {}


def rule(fid: str, title: str, why: str, fix: str, source: str = "",
         ) -> Callable[[Callable[[Context], None]], Callable[[Context], None]]:
    """Register ``fn(ctx)`` as the rule reporting finding ``fid`` with this message."""
    def register(fn: Callable[[Context], None]) -> Callable[[Context], None]:
        RULES[fid] = Rule(fid, Message(title, why, fix, source), fn)
        return fn
    return register


# libraries whose calls are JAX computations (round 12: zodiax_65 imported only optax and
# zodiax, so no JAX rule looked at it)
JAX_LIBRARIES = ("optax", "flax", "equinox", "haiku", "chex", "jaxopt", "diffrax", "numpyro",
                 "distrax", "optimistix", "lineax", "blackjax", "jraph", "zodiax")


class Context:
    """What every rule sees: the tree, the source lines, import aliases, the snapshot.

    Findings are kept once per (id, line); :meth:`findings` returns them sorted by line.
    """

    def __init__(self, tree: ast.Module, lines: list[str], filename: str,
                 snapshot: EnvSnapshot | None,
                 cells: Callable[[int], tuple[int, int]] | None = None,
                 directory: Path | None = None) -> None:
        self.tree, self.lines, self.filename, self.snapshot = tree, lines, filename, snapshot
        self.directory = directory
        self.late: list[tuple[tuple[Any, ...], dict[str, str]]] = []  # add_late's findings
        self.cells = cells  # notebook: source line -> (cell number, line in the cell)
        self.found: dict[tuple[str, int], Finding] = {}
        self.aliases: dict[str, str] = {}
        self.funcs: dict[str, FuncDef] = {}
        self.parents: dict[ast.AST, ast.AST] = {}
        self.assigns: dict[str, list[ast.expr]] = {}  # name -> values assigned to it
        self.classes: dict[str, ast.ClassDef] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
            if isinstance(node, ast.Import):
                for a in node.names:
                    local = a.asname or a.name.split(".")[0]
                    self.aliases[local] = a.name if a.asname else local
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.funcs[node.name] = node
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for name in target_names(t):
                        self.assigns.setdefault(name, []).append(node.value)
        self.small = {t.id for s in tree.body if isinstance(s, ast.Assign)  # tiny module tensors
                      and self.is_small_tensor(s.value) for t in s.targets
                      if isinstance(t, ast.Name)}
        keras_v = snapshot.version_of("keras") if snapshot else ""
        self.keras2, self.keras_basis = keras_assumed(lines, ast.unparse(tree), directory, keras_v)
        self.keras_v = keras_v if keras_v and self.keras2 == (keras_v[:2] in ("1.", "2.")) else (
            "2 (as the script pins it)" if self.keras2 else "")
        self.compiled = self._compiled()
        self.models = self._models()

    def _compiled(self) -> dict[str, str]:
        """Names of compiled callables -> "jax" / "tf" / "torch"."""
        found: dict[str, str] = {}
        for fn in self.funcs.values():
            for dec in fn.decorator_list:
                kind = self.compiler(dec)
                if kind:
                    found[fn.name] = kind
        for name, values in self.assigns.items():
            for v in values:
                kind = self.compiler(v.func) if isinstance(v, ast.Call) else ""
                if kind and v.args:
                    found[name] = kind
        for node in ast.walk(self.tree):  # self.train_step = tf.function(self.train_step)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and (
                    node.value.args):
                kind = self.compiler(node.value.func)
                for t in node.targets:
                    if kind and isinstance(t, ast.Attribute):
                        found[t.attr] = kind
        return found

    def compiler(self, node: ast.AST) -> str:
        """"jax"/"tf"/"torch" when ``node`` names (or calls) jax.jit, tf.function, ..."""
        if isinstance(node, ast.Call):
            if last_name(node) == "partial" and node.args:
                return self.compiler(node.args[0])
            node = node.func
        q = self.resolve(node)
        if q in ("jax.jit", "jax.pmap", "equinox.filter_jit", "flax.linen.jit",
                 "alpa.parallelize", "jax.experimental.pjit.pjit", "flax.nnx.jit") or (
                q == "jit" or q.endswith(".jit")) and self.uses("jax"):
            return "jax"
        if q in ("tensorflow.function", "tensorflow.compat.v1.function"):
            return "tf"
        if q in ("torch.compile", "torch.jit.script", "torch.jit.trace"):
            return "torch"
        return ""

    def _models(self) -> set[str]:
        """Names bound to model objects (nn.Module / keras.Model instances, compiled fns)."""
        module_classes = {c.name for c in self.classes.values() if any(
            last_name(b) in ("Module", "Model", "Layer", "Sequential") for b in c.bases)}
        names: set[str] = set(self.compiled)
        for _ in range(2):  # model = Net(); model = model.to(device)
            for name, values in self.assigns.items():
                for v in values:
                    call, moved = v, False
                    while (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                           and call.func.attr in ("to", "cuda", "eval", "train", "half",
                                                  "float", "double")):
                        call, moved = call.func.value, moved or call.func.attr in ("to", "cuda")
                    if isinstance(call, ast.Name) and call.id in names:
                        names.add(name)
                    elif moved and isinstance(call, ast.Call) and (
                            last_name(call)[:1].isupper() or last_name(call) == "from_pretrained"
                            and dotted(call.func).split(".")[0][:1].isupper()):
                        names.add(name)  # Net().cuda(), Bert.from_pretrained(...).cuda()
                    elif isinstance(call, ast.Call) and last_name(call) == "from_pretrained" and (
                            dotted(call.func).split(".")[0][:1].isupper()) and not any(
                            w in dotted(call.func) for w in _NOT_MODELS):
                        names.add(name)  # BertModel.from_pretrained(...): a model
                    elif isinstance(call, ast.Call):
                        q = self.resolve(call.func)
                        rel = keras_rel(q) or ""
                        if (isinstance(call.func, ast.Name) and call.func.id in module_classes
                                or q.startswith("torch.nn.") and last_name(call)[:1].isupper()
                                or q.startswith("torchvision.models.")
                                or rel.startswith(("Sequential", "Model", "models.",
                                                   "applications."))):
                            names.add(name)
        return names

    def runs_compiled(self, node: ast.AST) -> bool:
        """A call of a compiled callable: a name compiled here, or a step compiled inline
        that carries its state (``state, loss = jax.jit(body_fn)(state, ...)``, issue 24
        round 14: pyro-ppl/numpyro#2247)."""
        f = node.func if isinstance(node, ast.Call) else None
        if isinstance(f, ast.Name) and f.id in self.compiled:
            return True
        if not (isinstance(f, ast.Call) and self.resolve(f.func) in (
                "jax.jit", "jax.pmap", "torch.compile", "tensorflow.function")):
            return False
        stmt = self.parents.get(node)
        out = {n for t in getattr(stmt, "targets", []) for n in target_names(t)}
        return any(isinstance(a, ast.Name) and a.id in out
                   for a in node.args)  # type: ignore[union-attr]

    def is_compiled_scope(self, node: ast.AST) -> bool:
        """Whether ``node`` sits inside a jitted / tf.function / Keras train_step function."""
        cur = self.parents.get(node)
        while cur is not None:
            if isinstance(cur, ast.FunctionDef | ast.AsyncFunctionDef) and (
                    cur.name in self.compiled or cur.name in ("train_step", "test_step")
                    and self._may_be_keras(self.parents.get(cur))):
                return True
            cur = self.parents.get(cur)
        return False

    def _may_be_keras(self, cls: ast.AST | None, depth: int = 3) -> bool:
        """A class whose ``train_step`` a framework may compile: one derived from some base
        (a Keras model, or a class defined elsewhere); a plain class of this file (no base,
        or only bases of this file that have none) is not -- its methods run as written."""
        if not isinstance(cls, ast.ClassDef) or depth == 0:
            return False
        bases = [b for b in cls.bases if dotted(b) != "object"]
        return any(not (isinstance(b, ast.Name) and b.id in self.classes)
                   or self._may_be_keras(self.classes[b.id], depth - 1) for b in bases)

    def value_of(self, name: str) -> ast.expr | None:
        """The first value assigned to ``name`` in the file, or None."""
        values = self.assigns.get(name)
        return values[0] if values else None

    # -- reporting ------------------------------------------------------------------
    def line(self, line: int) -> str:
        """How a message names a line: "line 12", or "cell 3 line 4" in a notebook."""
        if self.cells is None:
            return f"line {line}"
        cell, row = self.cells(line)
        return f"cell {cell} line {row}"

    def locate(self, line: int) -> str:
        """A finding's location: "path:line", or "path:cell 3:4" in a notebook."""
        if self.cells is None:
            return f"{self.filename}:{line}"
        cell, row = self.cells(line)
        return f"{self.filename}:cell {cell}:{row}"

    def code(self, line: int) -> str:
        """The stripped source line, shortened to 100 characters."""
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        return text if len(text) <= 100 else text[:97] + "..."

    def add(self, fid: str, severity: Severity, node: ast.AST, observed: str = "",
            related: tuple[str, ...] = (), why: str = "", fix: str = "", **fields: str) -> None:
        """Report rule ``fid`` at ``node``'s line (once per id and line)."""
        line = getattr(node, "lineno", 0)
        m = RULES[fid].message
        title, why0, fix0, source = (t.format(**fields) for t in (m.title, m.why, m.fix,
                                                                    m.source))
        seen = f"`{self.code(line)}`" + (f": {observed}" if observed else "")
        self.found.setdefault((fid, line), Finding(
            fid, severity, title, observed=seen, why=why or why0, fix=fix or fix0,
            source=source, location=self.locate(line), related=related))

    def add_late(self, *args: Any, **fields: str) -> None:
        """``add``, deferred until every rule has run: an ``info`` of a later round never
        takes the place of an older rule's warning at the same id and line."""
        self.late.append((args, fields))

    def findings(self) -> list[Finding]:
        """Findings sorted by line, then id."""
        for args, fields in self.late:
            self.add(*args, **fields)
        self.late = []
        return [self.found[k] for k in sorted(self.found, key=lambda k: (k[1], k[0]))]

    # -- names ----------------------------------------------------------------------
    def resolve(self, node: ast.AST) -> str:
        """The fully qualified name of a Name/Attribute chain after import aliases."""
        head, _, rest = dotted(node).partition(".")
        target = self.aliases.get(head) or DEFAULT_ALIASES.get(head, head)
        return f"{target}.{rest}" if head and rest else target

    def calls(self, roots: Iterable[ast.AST] | None = None) -> Iterator[ast.Call]:
        """Every call under ``roots`` (default: the whole tree)."""
        nodes = ast.walk(self.tree) if roots is None else (n for r in roots for n in ast.walk(r))
        return (n for n in nodes if isinstance(n, ast.Call))

    def uses(self, root: str) -> bool:
        """Whether the script imports module ``root`` (e.g. "torch", "jax"); a library built
        on JAX (optax, flax, equinox, ...) counts as JAX: its calls run JAX ops."""
        if root == "jax" and any(self.uses(lib) for lib in JAX_LIBRARIES):
            return True
        return any(v == root or v.startswith(root + ".") for v in self.aliases.values())

    def enclosing(self, node: ast.AST, kinds: tuple[type, ...]) -> ast.AST | None:
        """The nearest ancestor of one of ``kinds``."""
        cur = self.parents.get(node)
        while cur is not None and not isinstance(cur, kinds):
            cur = self.parents.get(cur)
        return cur

    def between(self, node: ast.AST, stop: ast.AST) -> list[ast.AST]:
        """The ancestors of ``node`` below ``stop``, nearest first (all, if ``stop`` is
        not an ancestor)."""
        out, cur = [], self.parents.get(node)
        while cur is not None and cur is not stop:
            out.append(cur)
            cur = self.parents.get(cur)
        return out

    # -- search ---------------------------------------------------------------------
    def gpu_device_scopes(self) -> Iterator[tuple[ast.With, str]]:
        """Every ``with tf.device("...GPU...")`` block, with the device string."""
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.With):
                continue
            for item in node.items:
                c = item.context_expr
                if (isinstance(c, ast.Call) and self.resolve(c.func) == "tensorflow.device"
                        and c.args and isinstance(c.args[0], ast.Constant)
                        and "gpu" in str(c.args[0].value).lower()):
                    yield node, str(c.args[0].value)

    def search(self, roots: Iterable[ast.AST], pred: Callable[[ast.AST], bool],
               skip: Callable[[ast.AST], bool] | None = None, depth: int = 3,
               seen: set[str] | None = None) -> ast.AST | None:
        """First node matching ``pred``, following calls to functions of this file."""
        seen = set() if seen is None else seen
        for node in walk(roots, skip):
            if pred(node):
                return node
            if depth and isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                fn = self.funcs.get(node.func.id)
                if fn is not None and fn.name not in seen:
                    seen.add(fn.name)
                    hit = self.search(fn.body, pred, None, depth - 1, seen)
                    if hit is not None:
                        return hit
        return None

    # -- predicates -----------------------------------------------------------------
    def is_small_tensor(self, node: ast.AST) -> bool:
        """A TF constant/ones/zeros call with at most 4096 elements."""
        if not isinstance(node, ast.Call) or not node.args:
            return False
        name = self.resolve(node.func).partition("tensorflow.")[2]
        value = const(node.args[0])
        if value is None:
            return False
        if name in SMALL_CREATORS:
            return elements(value) <= SMALL_ELEMENTS
        if name in SHAPE_CREATORS and isinstance(value, list | tuple):
            total = 1
            for v in value:
                total *= v if isinstance(v, int) else SMALL_ELEMENTS + 1
            return total <= SMALL_ELEMENTS
        return False

    def is_tensor_op(self, node: ast.AST) -> bool:
        """A call into TensorFlow, JAX or torch that dispatches device work."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
                node.func.id in self.models):
            return True  # calling a model or a compiled function queues device work
        q = self.resolve(node.func) if isinstance(node, ast.Call) else ""
        return (q.startswith(TENSOR_ROOTS) and q not in SYNC_FUNCS and ".config." not in q
                and not q.endswith((".device", "devices", "no_grad", "set_seed")))

    def is_sync(self, node: ast.AST) -> bool:
        """A call that waits for the device (``.numpy()``, ``synchronize()``, ...)."""
        if not isinstance(node, ast.Call):
            return False
        if isinstance(node.func, ast.Attribute) and node.func.attr in SYNC_METHODS:
            return True
        q = self.resolve(node.func)
        return q in SYNC_FUNCS or q.rsplit(".", 1)[-1] in ("synchronize", "block_until_ready")

    def is_step(self, node: ast.AST) -> bool:
        """A call that looks like one optimisation step."""
        last = last_name(node) if isinstance(node, ast.Call) else ""  # (out.sum().backward())
        if last == "step" and node.args:  # type: ignore[attr-defined]
            return False  # env.step(action): an RL environment, not an optimizer
        if last == "update" and isinstance(node.func, ast.Attribute) and len(  # type: ignore[attr-defined]
                node.args) >= 2 and "opt" in dotted(node.func.value).lower():  # type: ignore[attr-defined]
            return True  # MLX's optimizer.update(model, grads), optax's tx.update(grads, state)
        return last in STEP_NAMES or "train_step" in last or last.endswith("_step")

    def inits_devices(self, node: ast.AST) -> bool:
        """A TensorFlow/Keras call that initialises TensorFlow's devices."""
        q = self.resolve(node.func) if isinstance(node, ast.Call) else ""
        rel = keras_rel(q)
        if rel is not None:
            return not rel.startswith(KERAS_NO_INIT)
        rest = q.partition("tensorflow.")[2] if q.startswith("tensorflow.") else ""
        return bool(rest) and ("logical_device" in rest or not rest.startswith(TF_NO_INIT))
