"""Add attention heads beside an attention node, their output projection zero-initialised.

Site: an `attention` node A reading x (N, T, d). Multi-head attention is a sum over heads
of each head's output through its slice of the output projection; the IR's attention node
ties its q/k/v width to d (in_weight (3d, d)), so new heads cannot be added inside it
without changing every head's width. They come as a second attention node B over the same
x with `heads` heads (head width d / heads) and y = A(x) + B(x): together, A's heads and
B's. B's output projection (weight and bias) is zero, so y = A(x) exactly; its q/k/v
projection starts as PyTorch draws it (xavier uniform, zero bias), so the output
projection's gradient is non-zero from the first step. B takes A's attention dropout.

Optimizer state: B's parameters are fresh (zero slots, step 0); nothing else changes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aicf_induct.ir.graph import Graph, Node
from aicf_induct.ir.init import init_array
from aicf_induct.ir.ops import OPS
from aicf_induct.runtime.model_state import ModelState
from aicf_induct.runtime.transforms.base import Transform, int_option
from aicf_induct.runtime.transforms.reading import types_of
from aicf_induct.runtime.transforms.surgery import fresh_id, insert_after, redeclare, site_node


class AddHeads(Transform):
    """A zero-output attention node with `heads` heads beside an attention node."""

    name = "add_heads"

    def __init__(self, heads: int = 1) -> None:
        self.heads = int_option("heads", heads, 1)  # the new node's heads; d / heads is their width

    @property
    def function_preserving(self) -> bool:
        return True

    def options(self) -> dict[str, Any]:
        return {"heads": self.heads}

    def candidates(self, graph: Graph) -> list[str]:
        return [n.id for n in graph.nodes if n.op == "attention"]

    def applicable(self, graph: Graph, site: str) -> str | None:
        node = site_node(graph, site, ("attention",), "an attention node")
        if isinstance(node, str):
            return node
        d = types_of(graph)[site].shape[-1]
        if d is None or d % self.heads:
            return f"heads={self.heads} does not divide the token width d={d} of '{site}'"
        return None

    def _apply(self, state: ModelState, site: str, rng: np.random.Generator) -> None:
        graph = state.graph
        a = graph.node(site)
        attrs = OPS["attention"].full_attrs(a.attrs)
        stem = fresh_id(graph, f"{site}.heads")
        extra = Node(stem, "attention", a.inputs, {"heads": self.heads,
                                                   "dropout": attrs["dropout"],
                                                   "bias": attrs["bias"]})
        join = Node(f"{stem}.add", "add", (site, stem))
        insert_after(graph, site, [extra, join], join.id)
        redeclare(graph, [extra.id])
        for role, pname in extra.params.items():
            spec = graph.params[pname]
            value = init_array(spec.init, spec.shape, rng, spec.dtype)
            if role in ("out_weight", "out_bias"):
                value = np.zeros(spec.shape, dtype=spec.dtype)
            state.values[pname] = value
            state.drop_opt(pname)
