"""Canonical JSON round trips; the fingerprint sees structure, not names or values."""

from __future__ import annotations

import json

import numpy as np

from aicf_induct.ir import fingerprint, from_json, patterns, to_json, validate
from aicf_induct.ir.graph import Graph
from tests.graphs import all_ops, mlp


def _rename(graph: Graph, prefix: str) -> Graph:
    """Every node id and parameter name changed, structure kept."""
    g = graph.copy()
    ids = {n.id: f"{prefix}{k}" for k, n in enumerate(g.nodes)}
    names = {p: f"{prefix}p{k}" for k, p in enumerate(g.params)}
    for n in g.nodes:
        n.id = ids[n.id]
        n.inputs = tuple(ids[i] for i in n.inputs)
        n.params = {r: names[p] for r, p in n.params.items()}
    params = {}
    for old, spec in g.params.items():
        spec.name, spec.owner = names[old], ids[spec.owner]
        params[spec.name] = spec
    g.params = params
    g.outputs = [ids[o] for o in g.outputs]
    return g


def test_round_trip_is_exact_both_ways() -> None:
    for graph in (all_ops(), mlp(4, 3, norm="batchnorm"), all_ops(softmax_head=True)):
        text = to_json(graph)
        back = from_json(text)
        assert back == graph
        assert to_json(back) == text
        assert json.loads(text)["format"] == "aicf.ir/1"
        # the indented form parses to the same graph and re-serialises canonically
        assert to_json(from_json(to_json(graph, indent=2))) == text


def test_a_hand_made_graph_with_tuple_attributes_equals_its_round_trip() -> None:
    """JSON holds a tuple as a list: a `Graph` made by hand with a tuple attribute (the
    builder stores lists) is the graph its canonical JSON gives back, as its fingerprint
    already said; a different value is still a different graph."""
    g = mlp(4, 3)
    node = next(n for n in g.nodes if n.op == "input")
    node.attrs["shape"] = tuple(node.attrs["shape"])
    back = from_json(to_json(g))
    assert isinstance(back.node(node.id).attrs["shape"], list)
    assert back == g and g == back and fingerprint(back) == fingerprint(g)
    node.attrs["shape"] = (None, 5)
    assert back != g


def test_fingerprint_ignores_names_and_values_but_not_structure() -> None:
    g = all_ops()
    renamed = _rename(g, "zz")
    validate(renamed)
    assert fingerprint(renamed) == fingerprint(g)
    assert to_json(renamed) != to_json(g)
    # Initializer strings (how values start) are not structure either.
    g2 = g.copy()
    next(iter(g2.params.values())).init = "normal:0.02"
    assert fingerprint(g2) == fingerprint(g)


def test_fingerprint_changes_with_one_width_an_op_an_attr_or_the_wiring() -> None:
    base = fingerprint(mlp(4, 3, width=16))
    assert fingerprint(mlp(4, 3, width=17)) != base
    assert fingerprint(mlp(4, 3, width=16, act="gelu")) != base
    assert fingerprint(mlp(4, 3, width=16, depth=3)) != base
    assert fingerprint(mlp(5, 3, width=16)) != base
    g = all_ops()
    g2 = g.copy()
    drop = next(n for n in g2.nodes if n.op == "dropout")
    drop.attrs = {"p": 0.1}
    assert fingerprint(g2) != fingerprint(g)
    g3 = g.copy()
    cat = next(n for n in g3.nodes if n.op == "concat")
    cat.inputs = (cat.inputs[1], cat.inputs[0], cat.inputs[2])  # same shapes? no: order matters
    assert fingerprint(g3) != fingerprint(g)


def test_fingerprint_independent_of_listing_order_of_independent_nodes() -> None:
    from aicf_induct.ir import GraphBuilder

    def build(first: str) -> Graph:
        b = GraphBuilder()
        x = b.input([None, 4])
        branches = {}
        for name in (first, "b" if first == "a" else "a"):
            width = 3 if name == "a" else 5
            branches[name] = b.add("linear", [x], {"out_features": width}, id=name)
        return b.output(b.add("concat", [branches["a"], branches["b"]]))

    assert fingerprint(build("a")) == fingerprint(build("b"))


def test_patterns_describe_the_structure() -> None:
    p = patterns(mlp(4, 3, depth=3, width=32, act="gelu", norm="layernorm"))
    assert p["depth"] == 4 and p["hidden_layers"] == 3
    assert p["width.min"] == p["width.max"] == 32 and p["width.constant"] == 1
    assert p["act.gelu"] == 3 and p["norm.layernorm"] == 3
    assert p["norm.placement.pre_act"] == 3 and p["norm.placement.post_act"] == 0
    assert p["params.count"] == 4 * 32 + 32 + 2 * (32 * 32 + 32) + 3 * 64 + 32 * 3 + 3
    assert p["motif.linear>layernorm>gelu"] == 3
    assert p["residual.count"] == 0 and p["dropout.count"] == 0
    q = patterns(all_ops())
    assert q["residual.count"] == 1 and q["concat.count"] == 1
    assert q["norm.batchnorm"] == 1 and q["dropout.count"] == 1
    assert all(isinstance(v, float) and np.isfinite(v) for v in q.values())


def test_width_profiles() -> None:
    from aicf_induct.ir import GraphBuilder

    def widths(ws: list[int]) -> dict[str, float]:
        b = GraphBuilder()
        h = b.input([None, 4])
        for w in ws:
            h = b.add("relu", [b.add("linear", [h], {"out_features": w})])
        return patterns(b.output(b.add("linear", [h], {"out_features": 2})))

    assert widths([64, 32, 16])["width.funnel"] == 1
    assert widths([16, 32, 64])["width.expand"] == 1
    assert widths([64, 8, 64])["width.bottleneck"] == 1
    assert widths([64, 8, 64])["width.ratio"] == 8
