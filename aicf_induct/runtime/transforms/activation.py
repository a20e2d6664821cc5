"""Swap an activation for another (relu -> gelu, tanh -> silu, ...).

Site: an activation node whose op differs from the target. The node's op changes and its
attributes become the new op's defaults. Different activations compute different
functions: not function-preserving (the closest pairs, relu/gelu and silu/gelu, differ
most near 0, where most pre-activations sit after standardised inputs).

Optimizer state: an activation owns no parameters; every slot and step count is kept.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aicf_induct.ir.graph import Graph
from aicf_induct.ir.ops import ACTIVATIONS
from aicf_induct.runtime.model_state import ModelState
from aicf_induct.runtime.transforms.base import RewriteError, Transform
from aicf_induct.runtime.transforms.surgery import site_node, unit_activations


class SwapActivation(Transform):
    name = "activation"

    def __init__(self, to: str = "gelu") -> None:
        if to not in ACTIVATIONS:
            raise RewriteError(f"activation 'to' must be one of {sorted(ACTIVATIONS)}, "
                               f"got {to!r}")
        self.to = to

    @property
    def function_preserving(self) -> bool:
        return False

    def options(self) -> dict[str, Any]:
        return {"to": self.to}

    def candidates(self, graph: Graph) -> list[str]:
        return unit_activations(graph)

    def applicable(self, graph: Graph, site: str) -> str | None:
        node = site_node(graph, site, ACTIVATIONS, "an activation")
        if isinstance(node, str):
            return node
        if node.op == self.to:
            return f"'{site}' is already {self.to}"
        return None

    def _apply(self, state: ModelState, site: str, rng: np.random.Generator) -> None:
        node = state.graph.node(site)
        node.op = self.to
        node.attrs = {}
