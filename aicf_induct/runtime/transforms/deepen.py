"""Deepen: insert an identity-initialised block after an activation.

Site: an activation node A (output h, width d). Two constructions, both exactly
function-preserving:

- A idempotent (relu: f(f(x)) = f(x), the `ACTIVATIONS` table's flag): insert
  `linear(d -> d)` with W = I, b = 0, then the same activation. Its input is A's output,
  already in f's image, so f(I h + 0) = f(h) = h.
- otherwise (gelu, tanh, silu, sigmoid: f(f(x)) != f(x)): insert the residual block
  y = h + W2 f(W1 h + b1) + b2 with W1 = I, b1 = 0 and W2 = 0, b2 = 0, so y = h. W2's
  gradient is non-zero from the first step (it is f(h)-weighted), W1's follows once W2
  has moved.

Readers of A (and the graph output, if A is one) read the block's output instead.

Optimizer state: the block's parameters are new: zero slots and step 0 (Adam's bias
correction then treats them as fresh while every other parameter keeps its count).
Nothing else changes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aicf_induct.ir.graph import Graph, Node
from aicf_induct.ir.ops import ACTIVATIONS
from aicf_induct.runtime.model_state import ModelState
from aicf_induct.runtime.transforms.base import Transform
from aicf_induct.runtime.transforms.surgery import (
    feature_width,
    fresh_id,
    insert_after,
    redeclare,
    site_node,
    unit_activations,
)


def idempotent(op: str) -> bool:
    return op in ACTIVATIONS and ACTIVATIONS[op][3]


class Deepen(Transform):
    """Insert an identity block after an activation (site: the activation node's id)."""

    name = "deepen"

    def __init__(self, residual: bool = False) -> None:
        self.residual = residual  # True: the residual form even after an idempotent act

    @property
    def function_preserving(self) -> bool:
        return True

    def options(self) -> dict[str, Any]:
        return {"residual": self.residual}

    def candidates(self, graph: Graph) -> list[str]:
        return unit_activations(graph)

    def applicable(self, graph: Graph, site: str) -> str | None:
        node = site_node(graph, site, ACTIVATIONS, "an activation")
        if isinstance(node, str):
            return node
        if feature_width(graph, site) is None:
            return f"'{site}' is not a (batch, features) value"
        return None

    def _apply(self, state: ModelState, site: str, rng: np.random.Generator) -> None:
        graph, values = state.graph, state.values
        act = graph.node(site)
        d = feature_width(graph, site)
        assert d is not None
        stem = fresh_id(graph, f"{site}.deep")
        lin1 = Node(f"{stem}.linear", "linear", (site,), {"out_features": d})
        act2 = Node(f"{stem}.act", act.op, (lin1.id,), dict(act.attrs))
        if idempotent(act.op) and not self.residual:
            nodes, out = [lin1, act2], act2.id
        else:
            lin2 = Node(f"{stem}.out", "linear", (act2.id,), {"out_features": d})
            join = Node(f"{stem}.add", "add", (site, lin2.id))
            nodes, out = [lin1, act2, lin2, join], join.id
        insert_after(graph, site, nodes, out)
        redeclare(graph, [n.id for n in nodes if n.op == "linear"])
        values[lin1.params["weight"]] = np.eye(d)
        values[lin1.params["bias"]] = np.zeros(d)
        if len(nodes) == 4:
            lin2 = nodes[2]
            values[lin2.params["weight"]] = np.zeros((d, d))
            values[lin2.params["bias"]] = np.zeros(d)
        for n in nodes:
            for p in n.params.values():
                state.drop_opt(p)  # new: zero moments, step 0
