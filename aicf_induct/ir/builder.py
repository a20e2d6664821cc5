"""Programmatic graph construction: add nodes, get their parameters declared from the op table.

The frontend's tracer and the structure space build graphs through this; rewrites use it to
add nodes. Node ids are given or made unique from the op name; parameter names default to
`<node id>.<role>`.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from aicf_induct.errors import IRError
from aicf_induct.ir.graph import Graph, Node, ParamSpec, TensorType
from aicf_induct.ir.ops import OPS
from aicf_induct.ir.validate import node_problems


def jsonable(value: Any) -> Any:
    """Attribute values as canonical JSON holds them (tuples become lists, NumPy numbers
    Python's: a user's `X.shape[1]`)."""
    return json.loads(json.dumps(value, default=_plain))


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise IRError(f"attribute value {value!r} of type {type(value).__name__} is not a "
                  "number, string, bool, null or list of them")


class GraphBuilder:
    def __init__(self, name: str = "") -> None:
        self.graph = Graph(nodes=[], params={}, outputs=[], name=name)
        self.types: dict[str, TensorType] = {}
        self._counts: dict[str, int] = {}

    def fresh_id(self, stem: str) -> str:
        while True:
            k = self._counts.get(stem, 0)
            self._counts[stem] = k + 1
            cand = stem if k == 0 and stem not in self.types else f"{stem}_{k}"
            if cand not in self.types:
                return cand

    def input(self, shape: list[int | None] | tuple[int | None, ...], dtype: str = "float64",
              id: str | None = None) -> str:
        return self.add("input", [], {"shape": list(shape), "dtype": dtype}, id=id or "x")

    def add(self, op: str, inputs: list[str], attrs: dict[str, Any] | None = None,
            id: str | None = None, param_names: dict[str, str] | None = None) -> str:
        """Append a node; declare its parameters (named `<id>.<role>` unless given)."""
        if op not in OPS:
            raise IRError(f"unknown op '{op}'", id)
        opdef = OPS[op]
        node_id = id if id is not None and id not in self.types else self.fresh_id(id or op)
        try:
            attrs = opdef.floats_read(jsonable(attrs or {}))
        except IRError as err:
            raise IRError(err.problem, node_id) from None
        # what validate would refuse, refused here, where the caller's mistake is
        for problem in node_problems(op, len(inputs), attrs):
            raise IRError(problem, node_id)
        unknown = [i for i in inputs if i not in self.types]
        if unknown:
            raise IRError(f"input '{unknown[0]}' is no node of the graph", node_id)
        full = opdef.full_attrs(attrs)
        ins = [self.types[i] for i in inputs]
        try:
            t = opdef.infer(ins, full)
            roles = opdef.params(ins, full)
        except IRError as err:
            raise type(err)(err.problem, node_id) from None
        node = Node(node_id, op, tuple(inputs), attrs, {})
        for role, info in roles.items():
            pname = (param_names or {}).get(role, f"{node_id}.{role}")
            if pname in self.graph.params:
                raise IRError(f"parameter name '{pname}' already used", node_id)
            node.params[role] = pname
            self.graph.params[pname] = ParamSpec(pname, node_id, role, info.shape, t.dtype
                                                 if t.dtype != "int64" else "float64",
                                                 info.init, info.trainable)
        self.graph.nodes.append(node)
        self.types[node_id] = t
        return node_id

    def output(self, *ids: str) -> Graph:
        self.graph.outputs = list(ids)
        return self.graph
