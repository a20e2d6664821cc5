"""A tiny reference evaluator: walk the nodes calling each op's NumPy forward."""

from __future__ import annotations

import numpy as np

from aicf_induct.ir import Graph
from aicf_induct.ir.ops import OPS, OpContext


def evaluate(graph: Graph, values: dict[str, np.ndarray], x: np.ndarray,
             training: bool = False, **feeds: np.ndarray) -> list[np.ndarray]:
    env: dict[str, np.ndarray] = {}
    for n in graph.nodes:
        op = OPS[n.op]
        if n.op == "input":
            env[n.id] = x if n.id == "x" else feeds[n.id]
            continue
        params = {role: values[p] for role, p in n.params.items()}
        ctx = OpContext(training=training, node_id=n.id)
        env[n.id] = op.forward(ctx, [env[i] for i in n.inputs], params, op.full_attrs(n.attrs))
    return [env[o] for o in graph.outputs]
