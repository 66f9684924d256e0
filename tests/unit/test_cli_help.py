"""Every command's ``--help`` as a user reads it at 80 columns (issue 26): no typer
placeholders (``<bool>``, ``<int range>``, ``{workload}``), upper-case metavars, lines
wrapped to the terminal, text printed as written (a ``[...]`` in a help string survives:
rich markup once ate ``[report]`` from ``pip install 'devicebench[report]'``), and every
``--db`` names ``$DEVICEBENCH_DB``."""

from __future__ import annotations

import re

from devicebench.cli import command
from tests.conftest import run_cli

PLACEHOLDER = re.compile(r"<(bool|int|float|str|path|list|text)[^>]*>|\{[a-z_]+\}")


def _commands(cmd, path=()):
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def _words(text: str) -> str:
    return " ".join(text.split())


def test_every_help_reads_as_written_at_80_columns():
    seen = 0
    for path, cmd in _commands(command()):
        res = run_cli(*path, "--help", env={"COLUMNS": "80"})
        assert res.returncode == 0, (path, res.stderr)
        text = res.stdout
        where = " ".join(("devicebench", *path))
        assert not PLACEHOLDER.search(text), (where, PLACEHOLDER.search(text).group(0))
        assert max(len(line) for line in text.splitlines()) <= 80, where
        helps = [p.help or "" for p in cmd.params] + [cmd.help or ""]
        for bracketed in (m for h in helps for m in re.findall(r"\S*\[[^\]\s]+\]\S*", h)):
            assert _words(bracketed) in _words(text), (where, bracketed)
        for p in cmd.params:
            if p.name == "db":
                assert "$DEVICEBENCH_DB" in (p.help or ""), where
            if p.param_type_name == "option" and not getattr(p, "is_flag", False):
                assert p.metavar and p.metavar == p.metavar.upper() or p.metavar == "MiB", (
                    where, p.name, p.metavar)
        seen += 1
    assert seen >= 14  # the root, every command and the profile subcommands
    report = run_cli("report", "--help", env={"COLUMNS": "80"}).stdout
    assert "'devicebench[report]'" in _words(report)
