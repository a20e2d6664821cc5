"""The IR's data structures: `Graph`, `Node`, `ParamSpec`, `TensorType`.

A graph is a list of nodes in topological order. Graph inputs are nodes with op `input`;
`outputs` names the nodes whose values the graph returns. A node owns its parameters by
role (`{"weight": "layers.0.weight"}`); each parameter's `ParamSpec` names its owner. Analyses
write to `node.meta`, which is never serialised and never part of the fingerprint.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

Dim = int | None  # None: the batch dimension, unknown until compile time


@dataclass(frozen=True, slots=True)
class TensorType:
    shape: tuple[Dim, ...]
    dtype: str = "float64"

    def with_batch(self, batch: int) -> TensorType:
        return TensorType(tuple(batch if d is None else d for d in self.shape), self.dtype)

    def __str__(self) -> str:
        dims = ", ".join("N" if d is None else str(d) for d in self.shape)
        return f"{self.dtype}[{dims}]"


@dataclass(slots=True)
class Node:
    """One operation. `inputs` are ids of earlier nodes; `params` maps role -> parameter name."""

    id: str
    op: str
    inputs: tuple[str, ...] = ()
    attrs: dict[str, Any] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ParamSpec:
    """A parameter (trainable) or a state buffer (trainable=False, e.g. running statistics)."""

    name: str
    owner: str  # id of the node that owns it
    role: str  # the role under which the owner uses it ("weight", "bias", "running_mean", ...)
    shape: tuple[int, ...]
    dtype: str = "float64"
    init: str = "zeros"  # initializer, see aicf_induct.ir.init
    trainable: bool = True

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass
class Graph:
    nodes: list[Node]
    params: dict[str, ParamSpec]
    outputs: list[str]
    name: str = ""

    # -- lookups ---------------------------------------------------------------------------
    def node(self, node_id: str) -> Node:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    def node_map(self) -> dict[str, Node]:
        return {n.id: n for n in self.nodes}

    @property
    def inputs(self) -> list[Node]:
        return [n for n in self.nodes if n.op == "input"]

    def consumers(self) -> dict[str, list[Node]]:
        users: dict[str, list[Node]] = {n.id: [] for n in self.nodes}
        for n in self.nodes:
            for i in n.inputs:
                users.setdefault(i, []).append(n)
        return users

    def trainable_params(self) -> list[ParamSpec]:
        return [p for p in self.params.values() if p.trainable]

    def param_count(self) -> int:
        """Number of trainable scalars."""
        return sum(p.numel for p in self.params.values() if p.trainable)

    # -- copies ----------------------------------------------------------------------------
    def copy(self) -> Graph:
        """A deep copy without analysis metadata."""
        nodes = [Node(n.id, n.op, tuple(n.inputs), copy.deepcopy(n.attrs), dict(n.params))
                 for n in self.nodes]
        params = {k: ParamSpec(p.name, p.owner, p.role, tuple(p.shape), p.dtype, p.init,
                               p.trainable) for k, p in self.params.items()}
        return Graph(nodes, params, list(self.outputs), self.name)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Graph):
            return NotImplemented
        strip = lambda g: ([(n.id, n.op, tuple(n.inputs), _as_lists(n.attrs), n.params)  # noqa: E731
                            for n in g.nodes], g.params, list(g.outputs), g.name)
        return strip(self) == strip(other)


def _as_lists(value: Any) -> Any:
    """`value` with its tuples as lists, at any depth: canonical JSON holds a tuple as a list,
    so a hand-made graph's tuple attribute equals its round trip's list."""
    if isinstance(value, dict):
        return {k: _as_lists(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_as_lists(v) for v in value]
    return value
