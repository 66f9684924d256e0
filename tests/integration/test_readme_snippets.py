"""Every snippet in the README and docs/ runs as written (issue 26).

Each fenced ``bash`` / ``python`` block of README.md and docs/*.md is run in a sandbox
as a user would paste it: a fresh directory holding ``train.py`` (a copy of
``examples/train.py``, for "your script"), links to ``tests/``, ``examples/`` and
``bench/``, a fresh results store (``$DEVICEBENCH_DB``) into which the NVIDIA H200 bundle
is imported first (runs 1 and 2, for the ``report``/``compare``/``export`` snippets), and
``devicebench`` / ``python`` on PATH meaning this checkout. A bash block runs under
``bash -e -o pipefail``, so any line that fails fails the test, with the snippet's file
and line. ``json`` blocks must parse.

A block is marked by an HTML comment on the line before its fence (invisible on GitHub):

- ``<!-- snippet: slow -->``: takes more than a few seconds (it measures, or imports
  TensorFlow); run only with ``pytest -m slow``.
- ``<!-- snippet: skip — REASON -->``: cannot run here (installs packages, needs a Ray
  cluster, has placeholders for ids); never run, and the reason must be given.
- ``<!-- snippet: exit N -->``: the block ends with exit status N (``doctor`` exits 1 when
  it finds an error), combinable with ``slow``.

Every Python block, run or not, is also checked for what it uses: no undefined name
(ruff's F821, where ruff is installed) and every ``devicebench.x.y`` attribute chain
resolves after the block's own imports (``devicebench.api.ops(...)`` after a bare
``import devicebench`` once failed).

Python blocks run with ``KERAS_BACKEND=jax`` (set in the sandbox, not in the snippet):
Keras on JAX imports in about a second against TensorFlow's several.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)\s*$")
MARK = re.compile(r"^\s*<!--\s*snippet:\s*(?P<spec>.*?)\s*-->\s*$")
RUN_LANGS = {"bash": "bash", "sh": "bash", "shell": "bash", "python": "python",
             "json": "json"}


@dataclass(frozen=True)
class Snippet:
    """One fenced block: where it is, its language and code, and how it is marked."""

    doc: str
    line: int
    lang: str
    code: str
    slow: bool = False
    skip: str | None = None
    exit: int = 0

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def parse_mark(spec: str, where: str) -> dict:
    """``slow``, ``skip — reason``, ``exit N``, comma-separated."""
    out: dict = {}
    for item in (s.strip() for s in spec.split(",") if s.strip()):
        if item == "slow":
            out["slow"] = True
        elif item.startswith("skip"):
            reason = item[4:].strip(" —-:()")
            if not reason:
                raise ValueError(f"{where}: `snippet: skip` needs a reason")
            out["skip"] = reason
        elif re.fullmatch(r"exit \d+", item):
            out["exit"] = int(item.split()[1])
        else:
            raise ValueError(f"{where}: unknown snippet mark {item!r}")
    return out


def extract(path: Path) -> list[Snippet]:
    """The fenced blocks of a Markdown file, in order, with their marks."""
    lines = path.read_text(encoding="utf-8").splitlines()
    doc = str(path.relative_to(ROOT))
    found, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or not m.group("lang"):
            i += 1
            continue
        start, indent, lang = i, m.group("indent"), m.group("lang")
        i += 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        prev = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        mark = MARK.match(prev)
        opts = parse_mark(mark.group("spec"), f"{doc}:{start + 1}") if mark else {}
        found.append(Snippet(doc, start + 1, lang, textwrap.dedent("\n".join(body)), **opts))
    return found


SNIPPETS = [s for p in DOCS for s in extract(p) if s.lang in RUN_LANGS]
PYTHON = [s for s in SNIPPETS if s.lang == "python"]


def _param(s: Snippet):
    marks = [pytest.mark.slow] if s.slow else []
    if s.skip:
        marks.append(pytest.mark.skip(reason=f"{s.where}: {s.skip}"))
    return pytest.param(s, id=f"{s.where}-{s.lang}", marks=marks)


@pytest.fixture()
def sandbox(tmp_path):
    """A user's fresh directory: train.py, the repository's tests/ examples/ bench/,
    a store holding the H200 bundle, and `devicebench`/`python` meaning this checkout."""
    for name in ("tests", "examples", "bench"):
        (tmp_path / name).symlink_to(ROOT / name)
    shutil.copy(ROOT / "examples" / "train.py", tmp_path / "train.py")
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    # Scripts, not symlinks: a symlinked venv python in another directory does not find
    # its pyvenv.cfg, and then its site-packages (the frameworks) are missing.
    for name, args in (("python", ""), ("python3", ""), ("devicebench", " -m devicebench")):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}"{args} "$@"\n')
        shim.chmod(0o755)
    env = dict(os.environ)
    env.update({
        "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p),
        "DEVICEBENCH_DB": str(tmp_path / "results.db"),
        "DEVICEBENCH_CACHE_DIR": str(tmp_path / ".cache"),
        "KERAS_BACKEND": "jax",
        "COLUMNS": "120",
    })
    res = subprocess.run([sys.executable, "-m", "devicebench", "import",
                          str(ROOT / "tests" / "fixtures" / "bundles" / "h200.json")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return tmp_path, env


def test_the_docs_have_snippets_and_every_mark_is_well_formed():
    assert len(SNIPPETS) >= 15 and len(PYTHON) >= 4
    fast = [s for s in SNIPPETS if not s.slow and not s.skip and s.lang != "json"]
    assert len(fast) >= 8, [s.where for s in fast]  # most of the guide is checked by default
    for s in SNIPPETS:  # a test never installs anything into the environment it runs in
        commands = re.sub(r"(^|\s)#.*", "", s.code)  # comments may name an install
        if re.search(r"\b(pip|apt-get|conda) install\b|\bray start\b", commands):
            assert s.skip, f"{s.where}: installs or starts something: mark it skip"


@pytest.mark.parametrize("snippet", [_param(s) for s in SNIPPETS])
def test_snippet_runs(snippet: Snippet, sandbox):
    cwd, env = sandbox
    if snippet.lang == "json":
        json.loads(snippet.code)
        return
    if snippet.lang == "python":
        (cwd / "snippet.py").write_text(snippet.code)
        cmd = [sys.executable, "snippet.py"]
    else:
        cmd = ["bash", "-e", "-o", "pipefail", "-c", snippet.code]
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=1800 if snippet.slow else 300)
    assert res.returncode == snippet.exit, (
        f"{snippet.where} exited {res.returncode} (expected {snippet.exit}):\n"
        f"{snippet.code}\n--- stdout ---\n{res.stdout[-3000:]}\n"
        f"--- stderr ---\n{res.stderr[-3000:]}")
    assert "Traceback (most recent call last)" not in res.stderr, (snippet.where, res.stderr)


def _devicebench_chains(code: str) -> tuple[list[str], list[str]]:
    """The block's devicebench imports (as statements) and every dotted attribute chain
    rooted at a name a plain ``import devicebench...`` binds."""
    tree = ast.parse(code)
    imports, roots = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            mod = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
            if (mod or "").split(".")[0] == "devicebench":
                imports.append(ast.unparse(node))
                if isinstance(node, ast.Import):
                    roots |= {a.asname or a.name.split(".")[0] for a in node.names}
    chains = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            parts, cur = [], node
            while isinstance(cur, ast.Attribute):
                parts.append(cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name) and cur.id in roots:
                chains.append(".".join([cur.id, *reversed(parts)]))
    return imports, chains


RESOLVE = """
import importlib, json, sys, types
imports, chains = json.loads(sys.argv[1])
for stmt in imports:
    exec(stmt)
bad = []
for chain in chains:
    head, *rest = chain.split(".")
    obj = globals()[head]
    for name in rest:
        if not isinstance(obj, types.ModuleType):
            break  # past the modules: what a call returns is the run's business
        if not hasattr(obj, name):
            bad.append(chain)
            break
        obj = getattr(obj, name)
print(json.dumps(bad))
"""


@pytest.mark.parametrize("snippet", [pytest.param(s, id=f"{s.where}") for s in PYTHON])
def test_every_python_snippet_imports_what_it_uses(snippet: Snippet):
    imports, chains = _devicebench_chains(snippet.code)
    if chains:
        res = subprocess.run([sys.executable, "-c", RESOLVE, json.dumps([imports, chains])],
                             capture_output=True, text=True, timeout=60, cwd=ROOT,
                             env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout) == [], (
            f"{snippet.where}: attribute not there after the block's imports "
            f"(import the submodule): {res.stdout}")
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff not installed: undefined names not checked")
    res = subprocess.run([ruff, "check", "--isolated", "--select", "F821,F822,F823",
                          "--stdin-filename", "snippet.py", "-"], input=snippet.code,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, f"{snippet.where}: {res.stdout}"


def test_the_guide_starts_with_the_users_script_and_names_no_seed():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_screen = "\n".join(readme.splitlines()[:50])
    for command in ("pip install", "python -m pytest", "devicebench doctor train.py",
                    "devicebench advise train.py", "devicebench monitor -- python train.py"):
        assert command in first_screen, command
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        jargon = re.findall(r"\bseed[ _-]?00\d|\bseed 00\d", text, flags=re.I)
        assert not jargon, (doc.name, jargon)
        for target, anchor in re.findall(r"\]\(([\w./-]*\.md)?(?:#([\w-]+))?\)", text):
            linked = (doc.parent / target).resolve() if target else doc
            assert linked.exists(), (doc.name, target)
            if anchor:
                assert anchor in _anchors(linked), (doc.name, target, anchor)


def _anchors(doc: Path) -> set[str]:
    """The ids GitHub gives a Markdown file's headings: lower case, punctuation other
    than ``-`` and ``_`` dropped, each space a ``-``."""
    heads, fence = [], False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        elif not fence and re.match(r"#{1,6} ", line):
            heads.append(line.lstrip("#").strip())
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}
