"""The reference interpreter: runs the IR node by node with the op table's reference
forward and backward rules, unfused, allocating freely. It defines what the compiled plan
must compute, and it is the tool for debugging a graph."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from aicf_induct.compiler.autodiff import requires_grad
from aicf_induct.errors import AicfError, ExecutionError
from aicf_induct.ir.graph import Graph
from aicf_induct.ir.ops import OPS, OpContext
from aicf_induct.runtime.plan import check_feed


@dataclass
class Interpretation:
    values: dict[str, Any]  # node id -> output
    grads: dict[str, Any] = field(default_factory=dict)  # trainable parameter name -> gradient
    state: dict[str, Any] = field(default_factory=dict)  # buffer name -> updated value


def _params_of(node_params: Mapping[str, str], values: Mapping[str, Any]) -> dict[str, Any]:
    return {role: values[p] for role, p in node_params.items()}


def interpret(graph: Graph, params: Mapping[str, Any], feeds: Mapping[str, Any], *,
              training: bool = False, loss: str | None = None, seed: int = 0, step: int = 0,
              xp: ModuleType = np) -> Interpretation:
    """Evaluate every node; with `loss`, also d loss / d (trainable parameters).

    `params` holds parameters and buffers by name; `feeds` the input nodes' values.
    """
    ctx = OpContext(xp=xp, training=training, seed=seed, step=step)
    result = Interpretation(values={})
    vals = result.values
    batch: int | None = None  # the first input's rows; every other input has as many
    for n in graph.nodes:
        if n.op == "input":
            if n.id not in feeds:
                raise ExecutionError(f"input '{n.id}' was not fed")
            # a wrong shape is named here, not as a kernel's broadcasting error downstream
            vals[n.id] = check_feed(f"input '{n.id}'", feeds[n.id], n.attrs["shape"],
                                    n.attrs.get("dtype", "float64"), batch)
            if batch is None and vals[n.id].ndim:
                batch = int(vals[n.id].shape[0])
            continue
        ctx.node_id = n.id
        try:
            vals[n.id] = OPS[n.op].forward(ctx, [vals[i] for i in n.inputs],
                                           _params_of(n.params, params),
                                           OPS[n.op].full_attrs(n.attrs))
        except AicfError:
            raise
        except Exception as err:
            raise ExecutionError(f"forward of node '{n.id}' ({n.op}) failed: "
                                 f"{type(err).__name__}: {err}") from err
        for role, new in ctx.state_updates.items():
            result.state[n.params[role]] = new
        ctx.state_updates.clear()
    if loss is not None:
        result.grads = _backward(graph, params, vals, loss, ctx)
    return result


def _backward(graph: Graph, params: Mapping[str, Any], vals: Mapping[str, Any], loss: str,
              ctx: OpContext) -> dict[str, Any]:
    req = requires_grad(graph)
    grads: dict[str, Any] = {loss: ctx.xp.ones_like(vals[loss])}
    pgrads: dict[str, Any] = {}
    for n in reversed(graph.nodes):
        if n.id not in grads or n.op == "input" or not req[n.id]:
            continue
        op = OPS[n.op]
        diff = op.differentiable_inputs
        needs = [req[i] and (diff is None or k in diff) for k, i in enumerate(n.inputs)]
        ctx.node_id = n.id
        assert op.backward is not None
        gins, gps = op.backward(ctx, [vals[i] for i in n.inputs], _params_of(n.params, params),
                                vals[n.id], grads[n.id], op.full_attrs(n.attrs), needs)
        ctx.state_updates.clear()
        for i, g in zip(n.inputs, gins, strict=True):
            if g is not None:
                grads[i] = grads[i] + g if i in grads else g
        for role, g in gps.items():
            if graph.params[n.params[role]].trainable:
                pgrads[n.params[role]] = g
    for p in graph.trainable_params():
        pgrads.setdefault(p.name, ctx.xp.zeros(p.shape))
    return pgrads
