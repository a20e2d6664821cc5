"""The package's Python API (`aicf_induct.induction`): each name is its module's object, loaded
on first use, and the type checkers' list is the same list."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import aicf_induct.induction as induction


def test_every_name_is_the_object_its_module_defines() -> None:
    for name in induction.__all__:
        home = importlib.import_module(f"aicf_induct.induction.{induction._HOME[name]}")
        assert getattr(induction, name) is getattr(home, name), name
    assert set(induction.__all__) <= set(dir(induction))


def test_the_type_checkers_imports_name_the_same_list() -> None:
    tree = ast.parse(Path(induction.__file__).read_text())
    guarded = next(n for n in tree.body if isinstance(n, ast.If)
                   and ast.unparse(n.test) == "TYPE_CHECKING")
    imported = {(imp.module, a.name) for imp in guarded.body
                if isinstance(imp, ast.ImportFrom) for a in imp.names}
    assert imported == {(f"aicf_induct.induction.{home}", name)
                        for name, home in induction._HOME.items()}


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'propose'"):
        induction.propose  # noqa: B018  (the lookup is the test)


def test_importing_the_package_loads_no_module_of_it() -> None:
    """What the CLI relies on: `import aicf_induct.induction.space` runs the package's
    `__init__`, which must not pull in scikit-learn and every module."""
    code = ("import sys, aicf_induct.induction; "
            "print(sorted(m for m in sys.modules if m.startswith(('sklearn', "
            "'aicf_induct.induction.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
