"""Train-time IR transforms, by name: each applies to a running model between two steps
and carries parameters and optimizer state across (see base.py and docs/rewrites.md).

| name       | class          | function-preserving                      |
|------------|----------------|------------------------------------------|
| widen      | Widen          | yes with noise=0 (Net2Net split)         |
| deepen     | Deepen         | yes (identity block / zero residual)     |
| residual   | ResidualBranch | yes (zero-initialised skip projection)   |
| normalize  | InsertNorm     | no                                       |
| activation | SwapActivation | no                                       |
| prune      | Prune          | no                                       |
| dropout    | ChangeDropout  | yes (eval mode; training noise changes)  |
| add_block  | AddBlock       | yes (residual block, zero output layer)  |
| add_heads  | AddHeads       | yes (parallel heads, zero output proj.)  |
| widen_tokens | WidenTokens  | yes (eval mode; token channels copied)   |
"""

from __future__ import annotations

from typing import Any

from aicf_induct.runtime.transforms.activation import SwapActivation
from aicf_induct.runtime.transforms.base import RewriteError, Transform
from aicf_induct.runtime.transforms.blocks import AddBlock
from aicf_induct.runtime.transforms.deepen import Deepen
from aicf_induct.runtime.transforms.dropout import ChangeDropout
from aicf_induct.runtime.transforms.heads import AddHeads
from aicf_induct.runtime.transforms.normalize import InsertNorm
from aicf_induct.runtime.transforms.prune import Prune
from aicf_induct.runtime.transforms.residual import ResidualBranch
from aicf_induct.runtime.transforms.tokens import WidenTokens
from aicf_induct.runtime.transforms.widen import Widen

TRANSFORMS: dict[str, type[Transform]] = {
    t.name: t for t in (Widen, Deepen, ResidualBranch, InsertNorm, SwapActivation, Prune,
                        ChangeDropout, AddBlock, AddHeads, WidenTokens)
}


def make_transform(name: str, **options: Any) -> Transform:
    """A transform by registry name with its keyword options."""
    if name not in TRANSFORMS:
        raise RewriteError(f"unknown transform '{name}' (known: {', '.join(TRANSFORMS)})")
    try:
        return TRANSFORMS[name](**options)
    except TypeError as err:
        raise RewriteError(f"bad options for transform '{name}': {err}") from None


__all__ = [
    "TRANSFORMS", "AddBlock", "AddHeads", "ChangeDropout", "Deepen", "InsertNorm", "Prune",
    "ResidualBranch", "RewriteError", "SwapActivation", "Transform", "Widen", "WidenTokens",
    "make_transform",
]
