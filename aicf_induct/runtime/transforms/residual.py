"""Add a residual branch around a hidden block, zero-initialised.

Site: a hidden linear layer L. Its block runs from L's input x to the block's end e (L,
then the per-unit ops and layer norms that follow it, each the single reader of the one
before). The transform adds a skip path y = e + P x, where P is a new bias-free linear
layer x-width -> e-width with P = 0, and makes e's readers read y. With P = 0 the function
is unchanged exactly; unlike a parameter-free identity skip this works whatever the two
widths are, and P's gradient (the x-weighted upstream gradient) is non-zero from the first
step, so the branch starts learning at once.

Optimizer state: P is new: zero slots and step 0. Nothing else changes.
"""

from __future__ import annotations

import numpy as np

from aicf_induct.ir.graph import Graph, Node
from aicf_induct.runtime.model_state import ModelState
from aicf_induct.runtime.transforms.base import Transform
from aicf_induct.runtime.transforms.reading import consumers_of
from aicf_induct.runtime.transforms.surgery import (
    block_end,
    feature_width,
    fresh_id,
    hidden_linears,
    insert_after,
    redeclare,
    site_node,
)


class ResidualBranch(Transform):
    """Zero-initialised skip projection around the block a linear layer starts."""

    name = "residual"

    @property
    def function_preserving(self) -> bool:
        return True

    def candidates(self, graph: Graph) -> list[str]:
        return hidden_linears(graph)

    def applicable(self, graph: Graph, site: str) -> str | None:
        node = site_node(graph, site, ("linear",), "a linear layer")
        if isinstance(node, str):
            return node
        end = block_end(graph, site)
        if end in graph.outputs:
            return f"the block of '{site}' ends at the graph output"
        if any(u.op == "add" for u in consumers_of(graph)[end]):
            return f"the block of '{site}' already ends in a residual join"
        if feature_width(graph, node.inputs[0]) is None or feature_width(graph, end) is None:
            return f"the block of '{site}' is not over (batch, features) values"
        return None

    def _apply(self, state: ModelState, site: str, rng: np.random.Generator) -> None:
        graph = state.graph
        x = graph.node(site).inputs[0]
        end = block_end(graph, site)
        d_in, d_out = feature_width(graph, x), feature_width(graph, end)
        assert d_in is not None and d_out is not None
        stem = fresh_id(graph, f"{site}.skip")
        proj = Node(f"{stem}.proj", "linear", (x,), {"out_features": d_out, "bias": False})
        join = Node(f"{stem}.add", "add", (end, proj.id))
        insert_after(graph, end, [proj, join], join.id)
        redeclare(graph, [proj.id])
        state.values[proj.params["weight"]] = np.zeros((d_out, d_in))
        state.drop_opt(proj.params["weight"])
