"""The import graph points down the layers that DESIGN.md draws.

`LAYERS` is the one place the allowed direction is written: a module may import its own
package and packages of strictly lower layers, never a sibling of its own layer nor anything
above. Imports inside functions and under TYPE_CHECKING count: a lazy import is still a
dependency.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("aicf_induct", "warehouse", "api")

# Lowest first. Each entry is a layer; names are packages (a subpackage of aicf_induct or a
# top-level package) or single modules.
LAYERS: list[set[str]] = [
    {"aicf_induct", "aicf_induct.errors"},  # the root package holds only the version
    {"aicf_induct.records"},  # record types and the recorder interface
    # datasets and storage know records, not the IR or training
    {"aicf_induct.problems", "warehouse"},
    {"aicf_induct.ir"},
    {"aicf_induct.compiler", "aicf_induct.kernels", "aicf_induct.frontend"},
    {"aicf_induct.runtime"},
    {"aicf_induct.induction"},
    {"aicf_induct.plots"},  # figures of what the warehouse holds, for the CLI
    # the service and the CLI: neither imports the other (`serve` starts the app by name)
    {"aicf_induct.cli", "api"},
    {"aicf_induct.demo", "aicf_induct.__main__"},  # entry points over the CLI
]


def unit_of(module: str) -> str:
    """The layer entry a dotted module name belongs to (longest matching name)."""
    names = sorted((n for layer in LAYERS for n in layer), key=len, reverse=True)
    for name in names:
        if module == name or module.startswith(name + "."):
            return name
    raise KeyError(f"module '{module}' is in no layer: add it to LAYERS in {__file__}")


def layer_of(unit: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if unit in layer)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, module: str) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every project import in the file, relative ones resolved."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                names = [".".join(base + ([node.module] if node.module else []))]
            else:
                names = [node.module or ""]
        else:
            continue
        for name in names:
            if name.split(".")[0] in PACKAGES:
                yield node.lineno, name


def violations(root: Path) -> list[str]:
    """Every import that points up a layer or sideways to a sibling, as readable lines."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            module = module_name(path, root)
            unit = unit_of(module)
            for line, target in imports_of(path, module):
                target_unit = unit_of(target)
                if target_unit == unit:
                    continue
                if layer_of(target_unit) >= layer_of(unit):
                    where = f"{path.relative_to(root)}:{line}"
                    found.append(f"{where}: {unit} (layer {layer_of(unit)}) imports {target} "
                                 f"({target_unit}, layer {layer_of(target_unit)})")
    return found


def test_imports_point_down_the_layers() -> None:
    bad = violations(ROOT)
    assert not bad, "imports against the layers:\n" + "\n".join(bad)


def test_every_package_module_is_in_a_layer() -> None:
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            unit_of(module_name(path, ROOT))  # raises for a module in no layer


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        f = tmp_path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    for package in PACKAGES:
        (tmp_path / package).mkdir(exist_ok=True)
    return tmp_path


@pytest.mark.parametrize("files, expected", [
    # a kernel importing the compiler: a sibling of its own layer
    ({"aicf_induct/kernels/x.py": "from aicf_induct.compiler.chain import MlpChain\n"},
     "aicf_induct.kernels (layer 4) imports aicf_induct.compiler.chain"),
    # problems importing the runtime, lazily inside a function: a higher layer
    ({"aicf_induct/problems/p.py": "def f():\n    import aicf_induct.runtime.trainer\n"},
     "aicf_induct.problems (layer 2) imports aicf_induct.runtime.trainer"),
    # the warehouse into the runtime, or into the kernels even for a type only
    ({"warehouse/w.py": "from aicf_induct.runtime import recorder\n"},
     "warehouse (layer 2) imports aicf_induct.runtime"),
    ({"warehouse/t.py": "if TYPE_CHECKING:\n    from aicf_induct.kernels import autotune\n"},
     "warehouse (layer 2) imports aicf_induct.kernels"),
    ({"aicf_induct/ir/g.py": "from ..errors import IRError\nfrom . import ops\n"}, None),
])
def test_the_checker_finds_what_points_up(tmp_path: Path, files: dict[str, str],
                                          expected: str | None) -> None:
    bad = violations(_tree(tmp_path, files))
    if expected is None:
        assert bad == []
    else:
        assert len(bad) == 1 and expected in bad[0], bad
