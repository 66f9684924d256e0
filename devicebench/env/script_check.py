"""Static check of a user's training script: parsed with ``ast``, never imported or run.

Each pitfall becomes a :class:`Finding` whose ``location`` is ``"path:line"``. The checks
are heuristics over the syntax tree: they resolve import aliases (``import tensorflow as
tf``, ``from tensorflow import keras``) and follow calls to functions defined in the same
file, but know nothing about runtime values or types.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from devicebench.env.finding import Finding, Severity
from devicebench.env.snapshot import EnvSnapshot
from devicebench.errors import InputError

_DEFAULT_ALIASES = {"tf": "tensorflow", "np": "numpy", "jnp": "jax.numpy"}
_KERAS_PREFIXES = ("tensorflow.keras.", "tensorflow.python.keras.", "keras.src.", "keras.api.",
                   "keras.", "tf_keras.")
_TENSOR_ROOTS = ("tensorflow.", "jax.", "torch.")
_CLOCKS = {"time.time", "time.perf_counter", "time.monotonic", "time.time_ns",
           "time.perf_counter_ns", "time.monotonic_ns", "timeit.default_timer"}
_SYNC_METHODS = {"numpy", "item", "tolist", "block_until_ready", "synchronize", "cpu"}
_SYNC_FUNCS = {"torch.cuda.synchronize", "torch.mps.synchronize", "torch.xpu.synchronize",
               "jax.block_until_ready", "jax.device_get", "numpy.asarray", "numpy.array", "float",
               "sync", "synchronize", "block_until_ready"}
_STEP_NAMES = {"apply_gradients", "backward", "step", "minimize", "GradientTape"}
_SMALL_CREATORS = {"constant", "Variable", "convert_to_tensor"}
_SHAPE_CREATORS = {"ones", "zeros", "fill", "random.normal", "random.uniform"}
_SMALL_ELEMENTS = 4096
_TF_NO_INIT = ("config.", "random.set_seed", "debugging.set_log_device_placement", "get_logger",
               "function", "autograph.", "device")
_KERAS_NO_INIT = ("mixed_precision.", "config.", "datasets.", "utils.set_random_seed")
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_OPS = "run `devicebench ops` for a sweep with warm-up, sync and the CPU/GPU crossover size"

# id -> (title, why, fix, source); {name}-style fields are filled in per finding.
_TEXT: dict[str, tuple[str, str, str, str]] = {
    "script.legacy-optimizer": (
        "`keras.optimizers.legacy` is gone in Keras 3",
        "Keras 3 keeps `keras.optimizers.legacy` only as a stub: creating an optimizer from it "
        "raises ImportError \"`keras.optimizers.legacy` is not supported in Keras 3\"",
        "use `keras.optimizers.{name}(learning_rate=...)` (the Keras 3 optimizer); to stay on "
        "Keras 2 instead: `pip install tf-keras` and `export TF_USE_LEGACY_KERAS=1` before "
        "importing TensorFlow", "https://keras.io/guides/migrating_to_keras_3/"),
    "script.input-shape": (
        "`{arg}=` on a layer",
        "Keras 3 warns \"Do not pass an `input_shape`/`input_dim` argument to a layer\": it "
        "builds models from an explicit Input",
        "make `keras.Input(shape={shape})` the first layer and drop `{arg}=`, e.g. "
        "`keras.Sequential([keras.Input(shape={shape}), keras.layers.{layer}(...)])`", ""),
    "script.run-eagerly": (
        "training runs eagerly",
        "every step then runs op by op in Python (~10-25 us dispatch per op), without "
        "tf.function graphs or XLA: typically several times slower; it is a debugging switch",
        "remove `run_eagerly=True` / `run_functions_eagerly(True)`: by default Keras compiles "
        "the train step (add `jit_compile=True` to try XLA)", ""),
    "script.sync-in-step-loop": (
        "host sync on every training step",
        "`.numpy()`/`.item()`/`float()` copies a value to the host and waits for the device "
        "to finish, so the next step cannot be queued while this one runs",
        "accumulate on the device (`total += loss`, or a `keras.metrics.Mean`) and read it "
        "every N steps (`if step % 100 == 0: print(float(loss))`) or once per epoch", ""),
    "script.unsynced-timing": (
        "timing loop without a device sync",
        "tensor ops are dispatched asynchronously: without a sync the clock measures Python "
        "and dispatch overhead (~10-25 us per eager op), not the device's work; with tiny "
        "tensors that overhead is all there is, so CPU vs GPU reads ~1x",
        "sync before reading the clock ({sync}), warm up first, and move the loop into the "
        "graph ({graph}) or time one large op; or " + _OPS, ""),
    "script.gpu-tiny-op": (
        "tiny tensor work placed on a GPU",
        "each GPU op costs a launch and, for host constants, a copy (tens of us), far more "
        "than the arithmetic on a few elements: CPU and GPU tie (~1x) or the CPU wins",
        "keep tiny work on the CPU; to compare devices use tensors of 1000x1000 or more, "
        "created on the device; or " + _OPS, ""),
    "script.mixed-float16": (
        "mixed_float16 precision policy",
        "float16 pays off only on GPUs with Tensor Cores (NVIDIA compute capability >= 7.0); "
        "on a CPU it is emulated: seed 001's MNIST CNN took ~16-20 s/epoch with mixed_float16 "
        "vs ~4.5 s in float32 (4x slower)",
        "enable it only when such a GPU is present (`if tf.config.list_physical_devices('GPU')"
        "`); on CPUs with AVX512-BF16/AMX use 'mixed_bfloat16'; keep the output layer "
        "`dtype='float32'`", "https://keras.io/api/mixed_precision/"),
    "script.memory-growth-late": (
        "`set_memory_growth` after TensorFlow initialised its devices",
        "once an op runs, a model is built or logical devices are listed, TensorFlow raises "
        "RuntimeError \"Physical devices cannot be modified after being initialized\" (a "
        "try/except only hides that memory growth stays off)",
        "move the memory-growth block right after `import tensorflow as tf`, before any other "
        "TensorFlow call; or `export TF_FORCE_GPU_ALLOW_GROWTH=true` before starting Python",
        "https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth"),
}


def check_script(path: str | Path, snapshot: EnvSnapshot | None = None) -> list[Finding]:
    """Read a training script (never run it) and report its device and speed pitfalls.

    Args:
        path: the ``.py`` file to read.
        snapshot: the environment it will run in; tailors severities and fixes (e.g.
            "mixed_float16 on this CPU-only machine"). ``None``: assume Keras 3, no facts.

    Returns:
        Findings sorted by line, each with ``location="path:line"``.

    Raises:
        InputError: the file is missing, a directory, unreadable, not text, or does not parse.

    Example:
        >>> [f.id for f in check_script("train.py")]  # doctest: +SKIP
        ['script.input-shape', 'script.legacy-optimizer']
    """
    p = Path(path)
    if p.is_dir():
        raise InputError(f"script path is a directory: {p}",
                         fix="pass the training script itself, e.g. path/to/train.py")
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"script not found: {p}",
                         fix="check the path and the current directory") from None
    except OSError as exc:
        raise InputError(f"cannot read script {p}: {exc.strerror or exc}",
                         fix="check the file's permissions") from None
    if b"\x00" in data:
        raise InputError(f"script {p} is a binary file, not Python source",
                         fix="pass the .py training script")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        source = data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        raise InputError(f"script {p} is not readable as Python source text ({exc})",
                         why="Python source must be UTF-8 or declare its encoding",
                         fix="save it as UTF-8") from None
    return check_source(source, filename=str(p), snapshot=snapshot)


def check_source(source: str, filename: str = "<script>",
                 snapshot: EnvSnapshot | None = None) -> list[Finding]:
    """Check Python source text: :func:`check_script` without the file handling.

    Raises:
        InputError: the source does not parse (the message names ``filename`` and the line).

    Example:
        >>> check_source("model.compile(run_eagerly=True)")[0].id
        'script.run-eagerly'
    """
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        raise InputError(f"script {filename} does not parse: line {exc.lineno}: {exc.msg}",
                         why="devicebench reads the script with Python's parser (never runs it)",
                         fix=f"fix the syntax at {filename}:{exc.lineno} "
                             f"(`python -m py_compile {filename}` shows it)") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise InputError(f"script {filename} cannot be parsed: {exc}",
                         fix="pass a plain-text Python training script") from None
    checker = _Checker(tree, source.splitlines(), filename, snapshot)
    checker.visit(tree)
    checker.check_timing(tree)
    checker.check_memory_growth(tree)
    return [checker.found[k] for k in sorted(checker.found, key=lambda k: (k[1], k[0]))]


def _dotted(node: ast.AST) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else ""


def _keras_rel(q: str) -> str | None:
    """``"tensorflow.keras.layers.Dense"`` -> ``"layers.Dense"``; None if not Keras."""
    return next((q[len(p):] for p in _KERAS_PREFIXES if q.startswith(p)), None)


def _walk(roots: Iterable[ast.AST], skip: Callable[[ast.AST], bool] | None = None,
          ) -> Iterator[ast.AST]:
    """Nodes under ``roots`` in source order, not entering nested defs, classes or lambdas."""
    def keep(nodes: Iterable[ast.AST]) -> list[ast.AST]:
        return [n for n in nodes if not isinstance(n, _SCOPES) and not (skip and skip(n))]

    stack = keep(reversed(list(roots)))
    while stack:
        node = stack.pop()
        yield node
        stack.extend(keep(reversed(list(ast.iter_child_nodes(node)))))


def _skip_in_step(node: ast.AST) -> bool:
    """Nested loops are checked on their own; ``if step % N == 0:`` syncs only every N steps."""
    return isinstance(node, _LOOPS) or isinstance(node, ast.If) and any(
        isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(node.test))


def _outer_loops(stmt: ast.stmt) -> list[ast.stmt]:
    if isinstance(stmt, _LOOPS):
        return [stmt]
    if isinstance(stmt, _SCOPES) or not hasattr(stmt, "body"):
        return []
    blocks = [stmt.body, getattr(stmt, "orelse", []), getattr(stmt, "finalbody", [])]
    blocks += [h.body for h in getattr(stmt, "handlers", [])]
    return [loop for block in blocks for s in block for loop in _outer_loops(s)]


def _elements(value: object) -> int:
    return sum(_elements(v) for v in value) if isinstance(value, list | tuple) else 1


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


class _Checker(ast.NodeVisitor):
    def __init__(self, tree: ast.Module, lines: list[str], filename: str,
                 snapshot: EnvSnapshot | None) -> None:
        self.lines, self.filename, self.snapshot = lines, filename, snapshot
        self.found: dict[tuple[str, int], Finding] = {}
        self.aliases: dict[str, str] = {}
        self.funcs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    local = a.asname or a.name.split(".")[0]
                    self.aliases[local] = a.name if a.asname else local
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.funcs[node.name] = node
        self.small = {t.id for s in tree.body if isinstance(s, ast.Assign)  # tiny module tensors
                      and self._is_small_tensor(s.value) for t in s.targets
                      if isinstance(t, ast.Name)}
        keras_v = snapshot.version_of("keras") if snapshot else ""
        self.keras_v, self.keras2 = keras_v, keras_v[:2] in ("1.", "2.")

    # -- helpers ------------------------------------------------------------------
    def resolve(self, node: ast.AST) -> str:
        head, _, rest = _dotted(node).partition(".")
        target = self.aliases.get(head) or _DEFAULT_ALIASES.get(head, head)
        return f"{target}.{rest}" if head and rest else target

    def code(self, line: int) -> str:
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        return text if len(text) <= 100 else text[:97] + "..."

    def add(self, fid: str, severity: Severity, node: ast.AST, observed: str = "",
            related: tuple[str, ...] = (), why: str = "", fix: str = "", **fields: str) -> None:
        line = getattr(node, "lineno", 0)
        title, why0, fix0, source = (t.format(**fields) for t in _TEXT[fid])
        seen = f"`{self.code(line)}`" + (f": {observed}" if observed else "")
        self.found.setdefault((fid, line), Finding(
            fid, severity, title, observed=seen, why=why or why0, fix=fix or fix0,
            source=source, location=f"{self.filename}:{line}", related=related))

    def search(self, roots: Iterable[ast.AST], pred: Callable[[ast.AST], bool],
               skip: Callable[[ast.AST], bool] | None = None, depth: int = 3,
               seen: set[str] | None = None) -> ast.AST | None:
        """First node matching ``pred``, following calls to functions of this file."""
        seen = set() if seen is None else seen
        for node in _walk(roots, skip):
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

    def _is_small_tensor(self, node: ast.AST) -> bool:
        if not isinstance(node, ast.Call) or not node.args:
            return False
        name = self.resolve(node.func).partition("tensorflow.")[2]
        try:
            value = ast.literal_eval(node.args[0])
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False
        if name in _SMALL_CREATORS:
            return _elements(value) <= _SMALL_ELEMENTS
        if name in _SHAPE_CREATORS and isinstance(value, list | tuple):
            total = 1
            for v in value:
                total *= v if isinstance(v, int) else _SMALL_ELEMENTS + 1
            return total <= _SMALL_ELEMENTS
        return False

    def _is_tensor_op(self, node: ast.AST) -> bool:
        q = self.resolve(node.func) if isinstance(node, ast.Call) else ""
        return (q.startswith(_TENSOR_ROOTS) and q not in _SYNC_FUNCS and ".config." not in q
                and not q.endswith((".device", "devices", "no_grad", "set_seed")))

    def _is_sync(self, node: ast.AST) -> bool:
        if not isinstance(node, ast.Call):
            return False
        if isinstance(node.func, ast.Attribute) and node.func.attr in _SYNC_METHODS:
            return True
        q = self.resolve(node.func)
        return q in _SYNC_FUNCS or q.rsplit(".", 1)[-1] in ("synchronize", "block_until_ready")

    def _is_step(self, node: ast.AST) -> bool:
        last = _dotted(node.func).rsplit(".", 1)[-1] if isinstance(node, ast.Call) else ""
        return last in _STEP_NAMES or "train_step" in last or last.endswith("_step")

    def _inits_devices(self, node: ast.AST) -> bool:
        q = self.resolve(node.func) if isinstance(node, ast.Call) else ""
        rel = _keras_rel(q)
        if rel is not None:
            return not rel.startswith(_KERAS_NO_INIT)
        rest = q.partition("tensorflow.")[2] if q.startswith("tensorflow.") else ""
        return bool(rest) and ("logical_device" in rest or not rest.startswith(_TF_NO_INIT))

    # -- per-node checks ---------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._legacy(node, a.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for a in node.names:
            self._legacy(node, f"{node.module or ''}.{a.name}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if "legacy" not in _dotted(node).split(".") or not self._legacy(node, self.resolve(node)):
            self.generic_visit(node)

    def _legacy(self, node: ast.AST, q: str) -> bool:
        rel = _keras_rel(q) or ""
        if q.startswith("tf_keras.") or rel.split(".")[:2] != ["optimizers", "legacy"]:
            return False
        snap, kv = self.snapshot, self.keras_v
        flag = snap.env_vars.get("TF_USE_LEGACY_KERAS", "") if snap else ""
        sev: Severity = "error"
        if snap is None:
            seen = "with Keras 3 (the Keras of TensorFlow >= 2.16) creating it raises ImportError"
        elif q.startswith("tensorflow.") and snap.has("tf-keras") and flag in ("1", "true", "True"):
            sev, seen = "info", (f"works here (tf-keras {snap.version_of('tf-keras')} with "
                                 f"TF_USE_LEGACY_KERAS={flag} makes tf.keras Keras 2), but "
                                 "raises ImportError wherever Keras 3 serves tf.keras")
        elif self.keras2:
            sev, seen = "info", (f"works with keras {kv} (Keras 2) here; raises ImportError "
                                 "after an upgrade to Keras 3 / TensorFlow >= 2.16")
        elif kv:
            seen = f"keras {kv} is installed: creating it raises ImportError"
        else:
            sev, seen = "warning", ("Keras is not installed in the probed environment; with "
                                    "Keras 3 creating it raises ImportError")
        self.add("script.legacy-optimizer", sev, node, seen, name=(rel.split(".") + ["Adam"])[2])
        return True

    def visit_Call(self, node: ast.Call) -> None:
        q = self.resolve(node.func)
        layer = _dotted(node.func).rsplit(".", 1)[-1]
        for kw in node.keywords:
            if kw.arg in ("input_shape", "input_dim") and (
                    layer[:1].isupper() or (_keras_rel(q) or "").startswith("layers.")):
                value = ast.unparse(kw.value)
                shape = value if kw.arg == "input_shape" else f"({value},)"
                self.add("script.input-shape", "info" if self.keras2 else "warning", node,
                         f"fine in keras {self.keras_v}, warns in Keras 3" if self.keras2 else "",
                         arg=kw.arg, shape=shape, layer=layer)
            if kw.arg == "run_eagerly" and isinstance(kw.value, ast.Constant) and kw.value.value:
                self.add("script.run-eagerly", "warning", node)
        if (q.endswith("run_functions_eagerly") and node.args
                and isinstance(node.args[0], ast.Constant) and node.args[0].value):
            self.add("script.run-eagerly", "warning", node)
        if q in ("timeit.timeit", "timeit.repeat") and node.args:
            body = node.args[0].body if isinstance(node.args[0], ast.Lambda) else node.args[0]
            op = self.search([body], self._is_tensor_op)
            if op is not None and self.search([body], self._is_sync) is None:
                self._timing(node, op, f"`{q}` times `{self.code(op.lineno)}`")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if node.value == "mixed_float16":
            self._mixed(node)

    def _mixed(self, node: ast.AST) -> None:
        snap, sev, related = self.snapshot, "warning", ()
        why = fix = ""
        gpus = [d for fw in (snap.frameworks.values() if snap else []) for d in fw.gpu_devices]
        if snap is None:
            seen = ""
        elif not gpus and snap.nvidia_smi is None and not snap.is_apple_silicon:
            related, seen = ("env.no-gpu",), "mixed_float16 on this CPU-only machine"
            flags = {f.lower() for f in snap.host.cpu_flags} & {"avx512_bf16", "amx_bf16"}
            fix = (f"this CPU has {', '.join(sorted(flags))}: use `keras.mixed_precision."
                   "set_global_policy('mixed_bfloat16')` (measured ~3.6-4.9 s/epoch vs 4.5 "
                   "float32), or drop the policy" if flags else
                   "drop the policy and train in float32 (this CPU lacks AVX512-BF16/AMX, so "
                   "'mixed_bfloat16' would not help either)")
        elif not gpus:
            seen = "no framework sees a GPU here, so the float16 math runs on the CPU"
        else:
            ccs = [c for c in (_number(d.compute_capability) for d in gpus) if c is not None]
            names = ", ".join(sorted({d.description or d.name for d in gpus}))
            seen = f"GPU {names} without known Tensor Cores: measure before keeping it"
            if ccs and max(ccs) >= 7.0:
                sev, seen = "info", f"GPU {names} (compute capability {max(ccs)}) has Tensor Cores"
                why = "mixed_float16 can speed up training on Tensor Cores"
                fix = "keep the output layer `dtype='float32'`; compare against float32"
        self.add("script.mixed-float16", sev, node, seen, related, why, fix)  # type: ignore[arg-type]

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            ctx = item.context_expr
            if not (isinstance(ctx, ast.Call) and self.resolve(ctx.func) == "tensorflow.device"
                    and ctx.args and isinstance(ctx.args[0], ast.Constant)
                    and "gpu" in str(ctx.args[0].value).lower()):
                continue
            op = self.search(node.body, lambda n: self._is_small_tensor(n) or (
                self._is_tensor_op(n) and any(isinstance(a, ast.Name) and a.id in self.small
                                              for a in _walk(n.args))))
            if op is not None:
                self.add("script.gpu-tiny-op", "warning", node,
                         f"`{self.code(op.lineno)}` (line {op.lineno}) works on a tiny constant "
                         f"under tf.device({ctx.args[0].value!r})")
        self.generic_visit(node)

    def visit_For(self, node: ast.For | ast.AsyncFor | ast.While) -> None:
        body = node.body
        if self.search(body, self._is_step, _skip_in_step) is not None:
            direct = list(_walk(body, _skip_in_step))
            assigned = {n.id for s in direct if isinstance(s, ast.Assign | ast.AugAssign)
                        for t in getattr(s, "targets", [getattr(s, "target", None)])
                        for n in ast.walk(t) if isinstance(n, ast.Name)}
            for n in direct:
                f = n.func if isinstance(n, ast.Call) else None
                if (isinstance(f, ast.Attribute) and f.attr in ("numpy", "item") and not n.args
                        or isinstance(f, ast.Name) and f.id == "float" and len(n.args) == 1
                        and _dotted(n.args[0]).split(".")[0] in assigned):
                    self.add("script.sync-in-step-loop", "warning", n,
                             f"runs on every step of the training loop at line {node.lineno}")
        self.generic_visit(node)

    visit_AsyncFor = visit_While = visit_For

    # -- whole-tree checks ----------------------------------------------------
    def check_timing(self, tree: ast.Module) -> None:
        """Loops of tensor ops between two clock readings with no device sync in between."""
        for node in ast.walk(tree):
            for block in (getattr(node, f, None) for f in ("body", "orelse", "finalbody")):
                if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                    self._timed_block(block)

    def _timed_block(self, stmts: list[ast.stmt]) -> None:
        clocks = [i for i, s in enumerate(stmts) if not hasattr(s, "body")
                  and any(isinstance(n, ast.Call) and self.resolve(n.func) in _CLOCKS
                          for n in _walk([s]))]
        for a, b in zip(clocks, clocks[1:], strict=False):
            region = stmts[a + 1:b]
            if not region or self.search(region, self._is_sync) is not None:
                continue
            for loop in (lp for s in region for lp in _outer_loops(s)):
                for call in (n for n in _walk(loop.body) if isinstance(n, ast.Call)):
                    op = self.search([call], self._is_tensor_op)
                    if op is not None:
                        via = "" if op is call else f"`{ast.unparse(call)}`, which runs "
                        self._timing(loop, op, f"the loop timed between lines {stmts[a].lineno} "
                                     f"and {stmts[b].lineno} calls {via}`{self.code(op.lineno)}`"
                                     f" (line {op.lineno}) and never waits for the device")
                        break

    def _timing(self, node: ast.AST, op: ast.AST, seen: str) -> None:
        q = self.resolve(op.func) if isinstance(op, ast.Call) else ""
        if q.startswith("jax."):
            sync, graph = "`jax.block_until_ready(result)`", "`jax.jit` + `jax.lax.fori_loop`"
        elif q.startswith("torch."):
            sync, graph = "`torch.cuda.synchronize()` / `torch.mps.synchronize()`", "batch the ops"
        else:
            sync, graph = "`result.numpy()` on the last result", "`@tf.function`"
        self.add("script.unsynced-timing", "warning", node, seen, sync=sync, graph=graph)

    def check_memory_growth(self, tree: ast.Module) -> None:
        """``set_memory_growth`` after a call in the same scope initialised the devices."""
        for scope in [tree, *self.funcs.values()]:
            calls = sorted((n for n in _walk(scope.body) if isinstance(n, ast.Call)),
                           key=lambda n: (n.lineno, n.col_offset))
            first: ast.Call | None = None
            for call in calls:
                if self.resolve(call.func).endswith("set_memory_growth"):
                    if first is not None:
                        self.add("script.memory-growth-late", "error", call,
                                 f"comes after `{self.code(first.lineno)}` (line "
                                 f"{first.lineno}), which initialises the devices")
                elif first is None and self.search([call], self._inits_devices) is not None:
                    first = call
