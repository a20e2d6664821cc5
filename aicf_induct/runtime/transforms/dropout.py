"""Change dropout: set the rate of a dropout node, insert one after an activation, or
remove one (p = 0).

Site: a dropout node (its rate becomes `p`; p = 0 removes the node), or an activation
node with no dropout reader (a dropout of rate `p` is inserted after it). Dropout is the
identity in eval mode, so eval-mode outputs are unchanged exactly: function-preserving in
the sense of `Transform`. What changes is the training-time noise, which is the point;
inverted dropout keeps each unit's expected value, so the expected training-mode input of
the next layer is unchanged too. Masks come from the counter-based RNG keyed by (seed,
step, node id), so a new node gets its own stream.

Optimizer state: dropout owns no parameters; every slot and step count is kept.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aicf_induct.ir.graph import Graph, Node
from aicf_induct.ir.ops import ACTIVATIONS, OPS
from aicf_induct.runtime.model_state import ModelState
from aicf_induct.runtime.transforms.base import RewriteError, Transform
from aicf_induct.runtime.transforms.reading import consumers_of
from aicf_induct.runtime.transforms.surgery import (
    fresh_id,
    insert_after,
    remove_node,
    site_node,
)


class ChangeDropout(Transform):
    name = "dropout"

    def __init__(self, p: float = 0.1) -> None:
        if not 0.0 <= p < 1.0:
            raise RewriteError(f"dropout p must be in [0, 1), got {p}")
        self.p = float(p)

    @property
    def function_preserving(self) -> bool:
        return True

    def options(self) -> dict[str, Any]:
        return {"p": self.p}

    def candidates(self, graph: Graph) -> list[str]:
        return [n.id for n in graph.nodes if n.op == "dropout" or n.op in ACTIVATIONS]

    def applicable(self, graph: Graph, site: str) -> str | None:
        node = site_node(graph, site)
        if isinstance(node, str):
            return node
        if node.op == "dropout":
            rate = OPS["dropout"].full_attrs(node.attrs)["p"]
            return f"'{site}' already has rate {self.p}" if rate == self.p else None
        if node.op not in ACTIVATIONS:
            return f"'{site}' is a {node.op}, neither dropout nor an activation"
        if any(u.op == "dropout" for u in consumers_of(graph)[site]):
            return f"'{site}' is already followed by dropout (change that node instead)"
        if self.p == 0.0:
            return "p = 0 inserts nothing"
        return None

    def _apply(self, state: ModelState, site: str, rng: np.random.Generator) -> None:
        graph = state.graph
        node = graph.node(site)
        if node.op == "dropout":
            if self.p == 0.0:
                remove_node(graph, site)
            else:
                node.attrs["p"] = self.p
            return
        drop = Node(fresh_id(graph, f"{site}.dropout"), "dropout", (site,), {"p": self.p})
        insert_after(graph, site, [drop], drop.id)
