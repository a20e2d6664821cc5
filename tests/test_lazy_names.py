"""The packages whose public names load lazily (`aicf_induct.lazy_names`): each name is its
home module's, and the imports type checkers read name the same list."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from types import ModuleType

import pytest

import aicf_induct.induction
import aicf_induct.problems
import aicf_induct.runtime

PACKAGES = [aicf_induct.runtime, aicf_induct.induction, aicf_induct.problems]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_the_type_checkers_imports_name_the_same_list(package: ModuleType) -> None:
    tree = ast.parse(Path(str(package.__file__)).read_text())
    guarded = next(n for n in tree.body if isinstance(n, ast.If)
                   and ast.unparse(n.test) == "TYPE_CHECKING")
    imported = {(imp.module, a.name) for imp in guarded.body
                if isinstance(imp, ast.ImportFrom) for a in imp.names}
    assert imported == {(f"{package.__name__}.{home}", name)
                        for name, home in package._HOME.items()}


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_every_public_name_is_its_home_modules(package: ModuleType) -> None:
    for name in package.__all__:
        home = importlib.import_module(f"{package.__name__}.{package._HOME[name]}")
        assert getattr(package, name) is getattr(home, name), name
    assert set(package.__all__) <= set(dir(package))
    with pytest.raises(AttributeError, match=f"module '{package.__name__}' has no attribute"):
        package.no_such_name  # noqa: B018  (the lookup is the test)
