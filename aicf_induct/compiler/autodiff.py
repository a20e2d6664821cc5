"""Reverse-mode autodiff on the IR: the forward program plus its backward program.

The result is a flat list of `Instr`s: one `fwd` per forward node, then, walking the nodes in
reverse, one `vjp` per node that lies between a trainable parameter and the loss, and an
`acc` wherever a value feeds several consumers (their gradient contributions are summed).
Value ids: forward values are node ids; `#d:<id>` is the gradient of node `<id>`'s output,
`#d:<id>#k` its k-th contribution and `#d:<id>#~k` a partial sum of them. Node ids hold no
'#' (`ir.validate`), so no gradient name is a node id or another node's gradient name.
Parameter gradients go straight to the parameter store (`params` of a vjp names them), so
they are not values here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aicf_induct.ir.graph import Graph
from aicf_induct.ir.ops import OPS


@dataclass
class Instr:
    kind: str  # "fwd" | "vjp" | "acc" | "seed"
    op: str  # the IR op ("acc": "add"; "seed": "ones")
    node_id: str  # the IR node this came from: errors name it
    ins: list[str]
    outs: list[str | None]
    attrs: dict[str, Any] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)  # role -> parameter name (all roles;
    # a vjp writes the gradients of the trainable ones)
    needs: tuple[bool, ...] = ()  # vjp: which inputs get a gradient


GRAD = "#d:"  # the prefix of every gradient value's name


def grad_name(node_id: str, part: str = "") -> str:
    """The name of the gradient of node `node_id`'s output, or (`part`) of one of its
    contributions or partial sums."""
    return f"{GRAD}{node_id}#{part}" if part else f"{GRAD}{node_id}"


def grad_of(value: str) -> str | None:
    """The node id whose gradient (or part of it) `value` names; None for a forward value."""
    return value[len(GRAD):].split("#")[0] if value.startswith(GRAD) else None


def requires_grad(graph: Graph) -> dict[str, bool]:
    """Whether each node's output depends on a trainable parameter."""
    req: dict[str, bool] = {}
    for n in graph.nodes:
        own = any(graph.params[p].trainable for p in n.params.values())
        req[n.id] = own or any(req[i] for i in n.inputs)
    return req


def live_forward(graph: Graph, roots: list[str]) -> list[str]:
    """Ids of nodes the roots depend on, in graph order (dead-code elimination)."""
    by_id = graph.node_map()
    keep: set[str] = set()
    stack = list(roots)
    while stack:
        v = stack.pop()
        if v not in keep:
            keep.add(v)
            stack.extend(by_id[v].inputs)
    return [n.id for n in graph.nodes if n.id in keep]


def forward_program(graph: Graph, roots: list[str]) -> list[Instr]:
    by_id = graph.node_map()
    return [Instr("fwd", by_id[i].op, i, list(by_id[i].inputs), [i], dict(by_id[i].attrs),
                  dict(by_id[i].params))
            for i in live_forward(graph, roots) if by_id[i].op != "input"]


def backward_program(graph: Graph, loss: str) -> list[Instr]:
    """VJP and accumulation instructions for d loss / d parameters."""
    by_id = graph.node_map()
    req = requires_grad(graph)
    live = set(live_forward(graph, [loss]))
    contributions: dict[str, list[str]] = {}
    prog: list[Instr] = [Instr("seed", "ones", loss, [], [grad_name(loss)])]
    contributions[loss] = [grad_name(loss)]
    for nid in reversed([n.id for n in graph.nodes if n.id in live]):
        node = by_id[nid]
        parts = contributions.get(nid)
        if not parts or not req[nid] or node.op == "input":
            continue
        grad = parts[0]
        if len(parts) > 1:  # several consumers: sum their contributions
            grad = grad_name(nid)
            acc = parts[0]
            for k, p in enumerate(parts[1:], start=1):
                out = grad if k == len(parts) - 1 else grad_name(nid, f"~{k}")
                prog.append(Instr("acc", "add", nid, [acc, p], [out]))
                acc = out
        op = OPS[node.op]
        diff = op.differentiable_inputs
        needs = tuple(req[i] and (diff is None or k in diff) for k, i in enumerate(node.inputs))
        outs: list[str | None] = []
        for k, i in enumerate(node.inputs):
            if needs[k]:
                name = grad_name(i, str(len(contributions.setdefault(i, []))))
                contributions[i].append(name)
                outs.append(name)
            else:
                outs.append(None)
        prog.append(Instr("vjp", node.op, nid, [*node.inputs, nid, grad], outs,
                          dict(node.attrs), dict(node.params), needs))
    return prog
