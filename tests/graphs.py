"""Graphs used across tests, built with the IR builder."""

from __future__ import annotations

from aicf_induct.ir import Graph, GraphBuilder


def mlp(n_in: int, n_out: int, depth: int = 2, width: int = 16, act: str = "relu",
        norm: str | None = None) -> Graph:
    b = GraphBuilder("mlp")
    h = b.input([None, n_in])
    for _ in range(depth):
        h = b.add("linear", [h], {"out_features": width})
        if norm:
            h = b.add(norm, [h])
        h = b.add(act, [h])
    return b.output(b.add("linear", [h], {"out_features": n_out}, id="head"))


def all_ops(n_in: int = 6, n_out: int = 3, softmax_head: bool = False) -> Graph:
    """Every op of the table except the losses, with a residual join, a concat, a fan-out
    (one value feeding three consumers) and both normalisations."""
    b = GraphBuilder("all_ops")
    x = b.input([None, n_in])
    a = b.add("gelu", [b.add("layernorm", [b.add("linear", [x], {"out_features": 8})])],
              {"approximate": "tanh"})
    bb = b.add("silu", [b.add("batchnorm", [b.add("linear", [a], {"out_features": 8})])])
    c = b.add("add", [a, bb])
    d = b.add("sigmoid", [b.add("linear", [c], {"out_features": 4})])
    e = b.add("concat", [c, d, a])
    f = b.add("tanh", [b.add("linear", [b.add("dropout", [e], {"p": 0.0})],
                                     {"out_features": 8})])
    g = b.add("relu", [f])
    g = b.add("gelu", [g])
    head = b.add("linear", [g], {"out_features": n_out}, id="head")
    if softmax_head:
        head = b.add("softmax", [head])
    return b.output(head)
