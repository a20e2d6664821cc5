"""Structural fingerprint: a hash of what a graph computes, not of how its parts are named.

Each node hashes its op, its attributes (defaults filled in), its parameters' roles, shapes and
dtypes (not names, values or initializers) and the hashes of its inputs, in order; graph inputs
hash by their type and position. The graph's fingerprint hashes its outputs' hashes. Renaming
nodes or parameters, or listing independent nodes in another valid order, leaves it unchanged;
any change of op, attribute, width or wiring changes it.
"""

from __future__ import annotations

import hashlib
import json

from aicf_induct.ir.graph import Graph
from aicf_induct.ir.ops import OPS


def node_hashes(graph: Graph) -> dict[str, str]:
    hashes: dict[str, str] = {}
    input_pos = 0
    for n in graph.nodes:
        op = OPS[n.op]
        params = sorted((role, list(graph.params[p].shape), graph.params[p].dtype,
                         graph.params[p].trainable) for role, p in n.params.items())
        item: list[object] = [n.op, op.full_attrs(n.attrs), params,
                              [hashes[i] for i in n.inputs]]
        if n.op == "input":
            item.append(input_pos)
            input_pos += 1
        blob = json.dumps(item, sort_keys=True, separators=(",", ":"))
        hashes[n.id] = hashlib.sha256(blob.encode()).hexdigest()
    return hashes


def fingerprint(graph: Graph) -> str:
    """A 64-hex-digit structural hash."""
    hashes = node_hashes(graph)
    blob = "|".join(hashes[o] for o in graph.outputs)
    return hashlib.sha256(("aicf.ir/1|" + blob).encode()).hexdigest()
