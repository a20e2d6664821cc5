"""The package's Python API (`aicf_induct.induction`): each name is its module's object, loaded
on first use, and the type checkers' list is the same list."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import aicf_induct.induction as induction


def test_every_name_is_the_object_its_module_defines() -> None:
    for name in induction.__all__:
        home = importlib.import_module(f"aicf_induct.induction.{induction._HOME[name]}")
        assert getattr(induction, name) is getattr(home, name), name
    assert set(induction.__all__) <= set(dir(induction))


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
