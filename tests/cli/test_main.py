"""The top-level command line: each command's module is the one that registers it, and a
command line imports only the module it needs (so `propose` answers fast)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from aicf_induct.cli.main import COMMAND_MODULES, Parser, main, modules_for

REPO = Path(__file__).resolve().parents[2]


def test_each_module_registers_exactly_the_commands_listed_for_it() -> None:
    for module, names in COMMAND_MODULES.items():
        sub = Parser(prog="t").add_subparsers(dest="command")
        importlib.import_module(module).register(sub)
        assert tuple(sub.choices) == names, module


def test_a_command_line_needs_its_module_only_or_all_for_help() -> None:
    assert modules_for(["propose", "--dataset", "wine"]) == ["aicf_induct.cli.induce"]
    assert modules_for(["runs", "--limit", "3"]) == ["aicf_induct.cli.warehouse_cmds"]
    assert modules_for([]) == list(COMMAND_MODULES)
    assert modules_for(["--help"]) == list(COMMAND_MODULES)
    assert modules_for(["frobnicate"]) == list(COMMAND_MODULES)


def test_help_lists_every_command(capsys) -> None:
    with pytest.raises(SystemExit, match="0"):
        main(["--help"])
    out = capsys.readouterr().out
    for names in COMMAND_MODULES.values():
        for name in names:
            assert f"    {name}" in out, name


def test_unknown_command_names_it_with_the_full_list(capsys) -> None:
    assert main(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'frobnicate'" in err and "propose" in err


def test_propose_does_not_import_the_warehouse_or_the_trainer() -> None:
    probe = ("import contextlib, io, sys\n"
             "from aicf_induct.cli.main import main\n"
             "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
             "    main(['propose', '--help'])\n"
             "print(sorted(m for m in ('warehouse', 'duckdb', 'aicf_induct.runtime.trainer',"
             " 'aicf_induct.cli.from_proposal') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
