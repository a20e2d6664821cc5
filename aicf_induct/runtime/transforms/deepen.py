"""Deepen: insert an identity-initialised block after an activation.

Site: an activation node A (output h, width d). Two constructions, both exactly
function-preserving:

- A idempotent (relu: f(f(x)) = f(x), the op table's `idempotent` flag): insert
  `linear(d -> d)` with W = I, b = 0, then the same activation. Its input is A's output,
  already in f's image, so f(I h + 0) = f(h) = h.
- otherwise (gelu, tanh, silu, sigmoid: f(f(x)) != f(x)): insert the residual block
  y = h + W2 f(W1 h + b1) + b2 with W1 = I, b1 = 0 and W2 = 0, b2 = 0, so y = h. W2's
  gradient is non-zero from the first step (it is f(h)-weighted), W1's follows once W2
  has moved.

Readers of A (and the graph output, if A is one) read the block's output instead.

Optimizer state (`state=`):

- "fresh" (default): the block's parameters are new: zero slots and step 0 (Adam's bias
  correction then treats them as fresh while every other parameter keeps its count). Their
  first Adam step moves every entry by about the learning rate (m/sqrt(v) = sign(g)).
- "borrow": each new parameter takes the step count of the linear layer that feeds the
  site (its weight's for a weight, its bias's for a bias), zero first moments, and as
  second moments the mean of that parameter's (`MOMENT_POWER` 2 slots: Adam's v). Its
  steps are then sized like the layer below's from the first one. Without that layer (or
  its state), fresh.

Nothing else changes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aicf_induct.ir.graph import Graph, Node
from aicf_induct.ir.ops import ACTIVATIONS
from aicf_induct.runtime.model_state import MOMENT_POWER, ModelState
from aicf_induct.runtime.transforms.base import RewriteError, Transform
from aicf_induct.runtime.transforms.surgery import (
    feature_width,
    fresh_id,
    hidden_linears,
    insert_after,
    redeclare,
    site_node,
    unit_activations,
)


def idempotent(op: str) -> bool:
    return op in ACTIVATIONS and ACTIVATIONS[op].idempotent


class Deepen(Transform):
    """Insert an identity block after an activation (site: the activation node's id)."""

    name = "deepen"

    STATES = ("fresh", "borrow")

    def __init__(self, residual: bool = False, state: str = "fresh") -> None:
        if state not in self.STATES:
            # a bad option (a ValueError before): the rewrite is not made, the run goes on
            raise RewriteError(f"deepen state must be one of {', '.join(self.STATES)}, "
                               f"got {state!r}")
        self.residual = residual  # True: the residual form even after an idempotent act
        self.state = state  # the new parameters' optimizer state, see the module doc

    @property
    def function_preserving(self) -> bool:
        return True

    def options(self) -> dict[str, Any]:
        return {"residual": self.residual, "state": self.state}

    def candidates(self, graph: Graph) -> list[str]:
        return unit_activations(graph)

    def applicable(self, graph: Graph, site: str) -> str | None:
        node = site_node(graph, site, ACTIVATIONS, "an activation")
        if isinstance(node, str):
            return node
        if feature_width(graph, site) is None:
            return f"'{site}' is not a (batch, features) value"
        return None

    def depth_after(self, graph: Graph, site: str) -> int:
        """The hidden linear layers once the block is in at `site`: one more, or two for the
        residual block (a depth ceiling is checked against this, not the depth before)."""
        return len(hidden_linears(graph)) + (2 if self._residual(graph.node(site).op) else 1)

    def _residual(self, op: str) -> bool:
        """Whether the block after activation `op` is the residual form (two linears)."""
        return self.residual or not idempotent(op)

    def _apply(self, state: ModelState, site: str, rng: np.random.Generator) -> None:
        graph, values = state.graph, state.values
        act = graph.node(site)
        d = feature_width(graph, site)
        assert d is not None
        stem = fresh_id(graph, f"{site}.deep")
        lin1 = Node(f"{stem}.linear", "linear", (site,), {"out_features": d})
        act2 = Node(f"{stem}.act", act.op, (lin1.id,), dict(act.attrs))
        if not self._residual(act.op):
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
        source = feeding_linear(graph, site) if self.state == "borrow" else None
        for n in nodes:
            for kind, p in n.params.items():
                state.drop_opt(p)  # new: zero moments, step 0 ...
                donor = source.params.get(kind) if source is not None else None
                if donor is not None and state.has_opt(donor):
                    borrow_opt(state, p, donor, values[p].shape)  # ... or the layer below's


def feeding_linear(graph: Graph, site: str) -> Node | None:
    """The linear layer whose output reaches activation `site` through single-input nodes
    (a norm, a dropout), if any."""
    nodes = graph.node_map()
    node: Node | None = nodes[site]
    while node is not None and node.inputs and (node.id == site or node.op != "linear"):
        node = nodes.get(node.inputs[0]) if len(node.inputs) == 1 else None
    return node if node is not None and node.op == "linear" else None


def borrow_opt(state: ModelState, name: str, donor: str, shape: tuple[int, ...]) -> None:
    """`name` gets `donor`'s step count, zero first moments and the mean of its second
    moments (see the module doc)."""
    assert state.optimizer is not None
    slots = state.opt_slots(donor)
    state.optimizer["slots"][name] = {
        slot: np.full(shape, float(np.mean(arr)) if MOMENT_POWER.get(slot, 1) == 2 else 0.0,
                      dtype=arr.dtype)
        for slot, arr in slots.items()}
    state.optimizer["steps"][name] = int(state.optimizer["steps"][donor])
