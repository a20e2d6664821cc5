"""Insert a normalisation layer after a hidden linear layer (before its activation).

Site: a hidden linear layer L whose single reader is not already a norm. The new norm
(`kind` layernorm or batchnorm) sits between L and its readers.

- layernorm: weight 1, bias 0. It normalises every row over the units, which no
  per-unit affine map undoes: the function changes. Not function-preserving.
- batchnorm: running mean 0, running variance 1, weight sqrt(1 + eps), bias 0, so in eval
  mode it is the identity exactly. In training mode it normalises by the batch's own
  statistics, so from the very next step it trains a different function, and the running
  statistics move toward the data's. Not marked function-preserving either: the flag
  promises nothing it cannot keep.

Optimizer state: the norm's weight and bias are new: zero slots and step 0. Nothing else
changes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from aicf_induct.ir.graph import Graph, Node
from aicf_induct.ir.ops import OPS
from aicf_induct.runtime.model_state import ModelState
from aicf_induct.runtime.transforms.base import RewriteError, Transform
from aicf_induct.runtime.transforms.reading import consumers_of
from aicf_induct.runtime.transforms.surgery import (
    feature_width,
    fresh_id,
    hidden_linears,
    insert_after,
    redeclare,
    site_node,
)

NORM_KINDS = ("layernorm", "batchnorm")


class InsertNorm(Transform):
    """A layernorm or batchnorm right after a hidden linear layer."""

    name = "normalize"

    def __init__(self, kind: str = "layernorm") -> None:
        if kind not in NORM_KINDS:
            raise RewriteError(f"normalize kind must be one of {NORM_KINDS}, got {kind!r}")
        self.kind = kind

    @property
    def function_preserving(self) -> bool:
        return False

    def options(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def candidates(self, graph: Graph) -> list[str]:
        return hidden_linears(graph)

    def applicable(self, graph: Graph, site: str) -> str | None:
        node = site_node(graph, site, ("linear",), "a linear layer")
        if isinstance(node, str):
            return node
        readers = consumers_of(graph)[site]
        if any(OPS[u.op].kind == "norm" for u in readers):
            return f"'{site}' is already followed by a norm"
        if feature_width(graph, site) is None:
            return f"'{site}' is not a (batch, features) value"
        return None

    def _apply(self, state: ModelState, site: str, rng: np.random.Generator) -> None:
        graph = state.graph
        d = feature_width(graph, site)
        assert d is not None
        norm = Node(fresh_id(graph, f"{site}.norm"), self.kind, (site,))
        insert_after(graph, site, [norm], norm.id)
        redeclare(graph, [norm.id])
        values = state.values
        eps = OPS[self.kind].attrs["eps"]
        values[norm.params["weight"]] = np.full(d, math.sqrt(1.0 + eps)
                                                if self.kind == "batchnorm" else 1.0)
        values[norm.params["bias"]] = np.zeros(d)
        if self.kind == "batchnorm":
            values[norm.params["running_mean"]] = np.zeros(d)
            values[norm.params["running_var"]] = np.ones(d)
        for p in norm.params.values():
            state.drop_opt(p)
