"""The change to make, as a patch to the user's own script (``patch -p0`` applies it).

From the measured baseline (the script as written) to the recommended configuration:
the ``KERAS_BACKEND`` (and device) lines at the top, before any import; ``jit_compile`` and
``steps_per_execution`` in *their* ``compile(...)`` call; a ``mixed_precision`` (or TF32)
line after their imports; ``batch_size`` in their ``fit(...)``. Knobs a few lines cannot
express (an input pipeline, thread pools) are listed apart, as code to adapt.
"""

from __future__ import annotations

import ast
import difflib
import os
import re
import shlex
from dataclasses import dataclass, field

from devicebench.trials.spec import TF32_SWITCH, TrialSpec

MARK = "  # devicebench advise"
_ENV_RE = r"""^(\s*)os\.environ\[\s*["']{name}["']\s*\]\s*=\s*(["'])(.*?)\2"""


@dataclass(frozen=True)
class ScriptPatch:
    """A unified diff to the script, what it could not express, and what in the script
    must change first for the patched script to run (``blockers``: one line each)."""

    diff: str
    changes: list[str] = field(default_factory=list)
    not_patched: list[str] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)
    directory: str = ""  # where `patch -p0` must run ("": the current directory)

    @property
    def command(self) -> str:
        """The command that applies the diff saved as ``devicebench.patch``."""
        where = f" -d {shlex.quote(self.directory)}" if self.directory else ""
        return f"patch{where} -p0 < devicebench.patch"


def patch_name(script: str, cwd: str | None = None) -> tuple[str, str]:
    """The file name the diff's headers carry, and the directory ``patch`` must run in.

    GNU patch ignores an absolute name or one with ``..`` in it ("Ignoring potentially
    dangerous file name") and then cannot find the file: a script given as
    ``~/proj/train.py`` (the shell makes it absolute) or outside the current directory is
    named by its base name, applied with ``patch -d ITS_DIRECTORY``."""
    path = os.path.abspath(script)
    rel = os.path.relpath(path, cwd or os.getcwd())
    if not rel.startswith(".."):
        return rel, ""
    return os.path.basename(path), os.path.dirname(path)


def backend_blocker(backend: str, failure: str, source: str) -> str:
    """One line: the script, run up to its fit() on ``backend`` (the patch's
    ``KERAS_BACKEND``), failed — ``failure`` says how and where — and what to change.

    TensorFlow's tutorials call ``.numpy()`` on what a Keras model or layer returns (an
    eager TF tensor there); on the JAX and torch backends it is a ``jax.Array`` or
    ``torch.Tensor`` without that method: ``keras.ops.convert_to_numpy(x)`` works on every
    backend (spelled ``tf.keras.ops`` in a script that imports only TensorFlow). The
    script's other ``.numpy()`` calls (never reached) are named too.

    Example:
        >>> src = "import tensorflow as tf\\nm = tf.keras.Sequential()\\ny = m(x).numpy()"
        >>> line = backend_blocker("jax", "AttributeError: 'Array' object has no attribute "
        ...                        "'numpy' (at t.py:3)", src)
        >>> line.split("; ")[1][:60]
        'change `x.numpy()` to `tf.keras.ops.convert_to_numpy(x)` (an'
        >>> line.endswith("(the script calls .numpy() at line 3), then apply the patch")
        True
    """
    line = f"on the {backend} backend your script fails before its fit(): {failure}"
    if "attribute 'numpy'" in failure:
        tree = ast.parse(source)
        name = _keras_name(tree) or "keras"  # tf.keras in a script importing only tf
        calls = sorted({n.lineno for n in ast.walk(tree)
                        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                        and n.func.attr == "numpy" and not n.args})
        line += (f"; change `x.numpy()` to `{name}.ops.convert_to_numpy(x)` (any backend) "
                 "where x comes from Keras" + (f" (the script calls .numpy() at line"
                                               f"{'s' if len(calls) > 1 else ''} "
                                               f"{', '.join(map(str, calls))})"
                                               if calls else ""))
    else:
        line += f"; change that line so it runs on {backend} too"
    return line + ", then apply the patch"


def _top_index(tree: ast.Module, lines: list[str]) -> int:
    """Where lines that must run before any import go: after a shebang, encoding line,
    docstring and ``from __future__`` imports."""
    at = 0
    while at < len(lines) and (lines[at].startswith("#!") or re.match(r"#.*coding[:=]",
                                                                       lines[at])):
        at += 1
    for node in tree.body:
        is_doc = (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                  and isinstance(node.value.value, str) and node is tree.body[0])
        if is_doc or (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            at = max(at, node.end_lineno or node.lineno)
        else:
            break
    return at


def _keras_name(tree: ast.Module) -> str | None:
    """How the script's top level can say ``keras``: ``keras`` or ``tf.keras``."""
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "keras":
                    return a.asname or "keras"
        elif isinstance(node, ast.ImportFrom) and node.module == "tensorflow":
            for a in node.names:
                if a.name == "keras":
                    return a.asname or "keras"
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "tensorflow":
                    return f"{a.asname or 'tensorflow'}.keras"
    return None


def _after_imports(tree: ast.Module) -> int:
    """The line after the script's opening block of imports (0-based index to insert
    at): before the code that builds a model, even when a later import follows it."""
    last = 0
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            last = node.end_lineno or node.lineno
        elif not (node is tree.body[0] and isinstance(node, ast.Expr)) and \
                "os.environ" not in ast.unparse(node).split("=")[0]:
            break
    return last


def _call_at(tree: ast.Module, attr: str, line: int | None) -> ast.Call | None:
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr == attr]
    exact = [c for c in calls if line is not None and c.lineno <= line <= (c.end_lineno or 0)]
    return (exact or calls or [None])[0]


def _set_kwarg(lines: list[str], call: ast.Call, name: str, value: str) -> None:
    """Set ``name=value`` in ``call`` (replace it, or add it before the closing paren)."""
    for kw in call.keywords:
        if kw.arg == name:
            v = kw.value
            row = lines[v.lineno - 1]
            if v.lineno == v.end_lineno:
                lines[v.lineno - 1] = row[:v.col_offset] + value + row[v.end_col_offset:]
                return
    row_i, col = (call.end_lineno or call.lineno) - 1, (call.end_col_offset or 1) - 1
    before = "".join(lines[call.lineno - 1:row_i]) + lines[row_i][:col]
    stripped = before.rstrip()
    has_args = bool(call.args or call.keywords)
    sep = "" if not has_args else (" " if stripped.endswith(",") else ", ")
    row = lines[row_i]
    lines[row_i] = row[:col] + f"{sep}{name}={value}" + row[col:]


def _set_env(lines: list[str], at: int, name: str, value: str, inserts: list[str]) -> None:
    pattern = re.compile(_ENV_RE.format(name=re.escape(name)))
    for i, row in enumerate(lines):
        m = pattern.match(row)
        if m:
            lines[i] = row[:m.start(3)] + value + row[m.end(3):]
            return
    inserts.append(f'os.environ["{name}"] = "{value}"{MARK}\n')


def script_patch(script: str, source: str, baseline: TrialSpec, recommended: TrialSpec,
                 *, compile_line: int | None = None, fit_line: int | None = None
                 ) -> ScriptPatch:
    """The unified diff that turns ``script`` (``source``, run as ``baseline``) into the
    ``recommended`` configuration; ``diff`` is "" when nothing is to change.

    Example:
        >>> p = script_patch("train.py", src, base, base.with_(backend="jax"))  # doctest: +SKIP
        >>> print(p.diff)  # doctest: +SKIP
    """
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    changes: list[str] = []
    not_patched: list[str] = []
    top: list[str] = []  # before any import
    after: list[str] = []  # after the script's imports
    r, b = recommended, baseline
    if r.backend != b.backend:
        _set_env(lines, 0, "KERAS_BACKEND", r.backend, top)
        changes.append(f"KERAS_BACKEND={r.backend}")
    if r.device != b.device:
        if r.device == "cpu":
            var, val = ("JAX_PLATFORMS", "cpu") if r.backend == "jax" else \
                ("CUDA_VISIBLE_DEVICES", "")
            _set_env(lines, 0, var, val, top)
            changes.append("train on the CPU")
        elif r.device.startswith("gpu:"):
            _set_env(lines, 0, "CUDA_VISIBLE_DEVICES", r.device.split(":")[1], top)
            changes.append(f"train on {r.device}")
        else:
            _set_env(lines, 0, "KERAS_TORCH_DEVICE", "mps", top)
            changes.append("train on mps")
    compile_call = _call_at(tree, "compile", compile_line)
    for name, differs, value in (
            ("jit_compile", r.jit != b.jit,
             {"on": "True", "off": "False", "auto": '"auto"'}[r.jit]),
            ("steps_per_execution", r.steps_per_execution != b.steps_per_execution,
             str(r.steps_per_execution))):
        if not differs:
            continue
        if compile_call is None:
            not_patched.append(f"model.compile(..., {name}={value})")
        else:
            _set_kwarg(lines, compile_call, name, value)
            changes.append(f"{name}={value} in compile() at {script}:{compile_call.lineno}")
    if r.precision != b.precision:
        if r.precision == "tf32":
            module = {"tensorflow": "import tensorflow as tf"}.get(r.backend,
                                                                 f"import {r.backend}")
            after += [module + "\n"] + [ln + MARK + "\n" for ln in TF32_SWITCH[r.backend]]
        else:
            name = _keras_name(tree)
            if name is None:
                after.append("import keras\n")
                name = "keras"
            after.append(f'{name}.mixed_precision.set_global_policy("{r.precision}")'
                         f"{MARK}\n")
        changes.append(f"precision {r.precision}")
    if r.batch_size != b.batch_size and r.batch_size:
        fit_call = _call_at(tree, "fit", fit_line)
        if fit_call is None:
            not_patched.append(f"model.fit(..., batch_size={r.batch_size})")
        else:
            _set_kwarg(lines, fit_call, "batch_size", str(r.batch_size))
            changes.append(f"batch_size={r.batch_size} in fit() at {script}:{fit_call.lineno}")
    if r.pipeline != b.pipeline:
        not_patched.append(f"input pipeline: {r.pipeline} (see the code below)")
    if r.threads != b.threads:
        not_patched.append(f"threads: {r.threads} (see the code below)")
    if after:
        at = _after_imports(tree)
        lines[at:at] = after
    if top:
        at = _top_index(tree, lines)
        lines[at:at] = ["import os" + MARK + "\n", *top]
    original = source.splitlines(keepends=True)
    if original and not original[-1].endswith("\n"):
        original[-1] += "\n"
    name, directory = patch_name(script)
    diff = "".join(difflib.unified_diff(original, lines, fromfile=name, tofile=name))
    return ScriptPatch(diff, changes, not_patched, directory=directory)
