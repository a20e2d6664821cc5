"""Where the CUDA sources are and what each is compiled with.

The device code lives in this folder as package data: a `.cu` file per kernel family, the
code several families share in `.cuh` headers (`activations.cuh`, `reduce.cuh`, `ce_row.cuh`,
`mlp_tile.cuh`), found through NVRTC's include path (-I this folder), as CuPy finds its own.
A constant that both a launcher and its source use is defined once, in Python, and passed as
-D NAME=value (`Family.defines`, plus every activation's id from the op table); no source
defines one itself, and each states with static_assert what its code assumes of them.
`compile.function` builds a family on first use, one template instantiation at a time.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from aicf_induct.ir.ops.activations import ACTIVATION_TABLE, CUDA_NONE

KERNEL_DIR = Path(__file__).resolve().parent
_INCLUDE = re.compile(r'^#include "([\w.]+)"', re.MULTILINE)


@dataclass(frozen=True, eq=False)  # a module constant of its launcher: hashed by identity
class Family:
    """One `.cu` file of this folder and how it is compiled."""

    file: str
    options: tuple[str, ...] = ()  # further NVRTC options
    defines: Mapping[str, int] = field(default_factory=dict)  # constants shared with Python
    toolkit: bool = False  # needs the CUDA toolkit's headers (<mma.h>: compile.toolkit_includes)


def act_defines() -> dict[str, int]:
    """Every activation's CUDA id by the macro activations.cuh names it by, ACT_NONE too."""
    return {"ACT_NONE": CUDA_NONE} | {a.cuda_name: a.cuda_id for a in ACTIVATION_TABLE.values()}


def headers(file: str) -> list[str]:
    """The headers of this folder that `file` includes, directly or not, in include order."""
    seen: list[str] = []

    def walk(name: str) -> None:
        for h in _INCLUDE.findall((KERNEL_DIR / name).read_text()):
            if h not in seen:
                seen.append(h)
                walk(h)

    walk(file)
    return seen


def code(family: Family) -> str:
    """The text of `family`'s .cu file."""
    return (KERNEL_DIR / family.file).read_text()


def defines(family: Family) -> dict[str, int]:
    """Every -D NAME=value `family` is compiled with."""
    return act_defines() | dict(family.defines)


def options(family: Family) -> tuple[str, ...]:
    """NVRTC options for `family`: the include path, a digest of the headers it includes
    (CuPy's kernel cache keys on the code and options, not on included files: an edited
    header must still rebuild), the shared constants, its own options."""
    digest = hashlib.sha256()
    for h in headers(family.file):
        digest.update((KERNEL_DIR / h).read_bytes())
    return (f"-I{KERNEL_DIR}", f"-DAICF_HEADERS={digest.hexdigest()[:16]}",
            *(f"-D{k}={v}" for k, v in defines(family).items()), *family.options)
