"""Attributes checked against their op's spec: a bool a bool, a size a positive integer within
bounds, a float finite and in its range, a choice one of its values. A value that is not is one
problem naming the node and the attribute; every value the ops take is still accepted."""

from __future__ import annotations

from typing import Any

import pytest

from aicf_induct.errors import IRError
from aicf_induct.ir import fingerprint, from_dict, from_json, to_dict, to_json
from aicf_induct.ir.builder import GraphBuilder
from aicf_induct.ir.canonical import problems_in
from aicf_induct.ir.graph import Graph, Node
from aicf_induct.ir.ops import OPS
from aicf_induct.ir.validate import problems
from tests.graphs import all_ops, mlp

NAN, INF = float("nan"), float("inf")
BOOLS = [("linear", "bias"), ("conv2d", "bias"), ("numeric_tokenizer", "bias"),
         ("attention", "bias"), ("layernorm", "affine"), ("batchnorm", "affine"),
         ("mean", "keepdims"), ("sum", "keepdims")]
SIZES = [("linear", "out_features"), ("conv2d", "out_channels"),
         ("embedding", "num_embeddings"), ("embedding", "embedding_dim"),
         ("numeric_tokenizer", "d_token"), ("attention", "heads")]
# (op, attr, a least value refused, a greatest value refused): None where unbounded
FLOATS = [("layernorm", "eps", 0.0, None), ("batchnorm", "eps", 0.0, None),
          ("batchnorm", "momentum", None, 1.0), ("dropout", "p", None, 1.0),
          ("attention", "dropout", None, 1.0), ("cross_entropy", "label_smoothing", None, 1.0)]
PAIRS = [("conv2d", "kernel_size", 1), ("conv2d", "stride", 1), ("conv2d", "padding", 0),
         ("pool", "kernel_size", 1), ("pool", "stride", 1), ("pool", "padding", 0)]
AXES = [("mean", "axis"), ("sum", "axis"), ("concat", "axis"), ("softmax", "axis")]


def attr_problems(op: str, attrs: dict[str, Any]) -> list[str]:
    """The attribute problems `problems` reports for node 'n' (op `op`, attrs `attrs`, fed by
    an input)."""
    arity = OPS[op].arity
    n = Node("n", op, ("x",) * (2 if arity is None else arity), attrs)
    graph = Graph([Node("x", "input", (), {"shape": [None, 4]}), n], {}, ["n"])
    return [str(e) for e in problems(graph) if f"node 'n': {op} attribute '" in str(e)]


def refused(op: str, attr: str, value: Any) -> str:
    found = attr_problems(op, {attr: value})
    assert len(found) == 1, (op, attr, value, found)
    assert found[0].startswith(f"invalid IR: node 'n': {op} attribute '{attr}' must be ")
    return found[0]


def accepted(op: str, attr: str, value: Any) -> None:
    assert attr_problems(op, {attr: value}) == [], (op, attr, value)


@pytest.mark.parametrize(("op", "attr"), [(op, a) for op in sorted(OPS) for a in OPS[op].attrs])
def test_every_attribute_of_every_op_is_checked(op: str, attr: str) -> None:
    """No attribute takes a JSON object: one given one is refused, whichever op it is of (an
    attribute without a spec would let it through)."""
    refused(op, attr, {"x": 1})
    default = OPS[op].attrs[attr]
    if default is not None:  # an op's own default passes its own check
        accepted(op, attr, default)


@pytest.mark.parametrize(("op", "attr"), BOOLS)
def test_bools_are_bools(op: str, attr: str) -> None:
    """`"bias": "zz"` (or NaN, or 0) gave a linear layer a bias, as a truthy value."""
    for bad in ("zz", NAN, 0, 1, None, [True]):
        refused(op, attr, bad)
    assert "must be true or false, got 'zz'" in refused(op, attr, "zz")
    accepted(op, attr, True)
    accepted(op, attr, False)


@pytest.mark.parametrize(("op", "attr"), SIZES)
def test_sizes_are_positive_integers_within_bounds(op: str, attr: str) -> None:
    """`"out_features": 10**12` was accepted (its parameter would be terabytes)."""
    for bad in (0, -1, 10**12, 2**24 + 1, True, 1.5, 4.0, NAN, INF, "4"):
        refused(op, attr, bad)
    assert "got 1000000000000" in refused(op, attr, 10**12)
    for good in (1, 4, 2**24):
        accepted(op, attr, good)


@pytest.mark.parametrize(("op", "attr", "least", "most"), FLOATS)
def test_floats_are_finite_and_in_range(op: str, attr: str, least: float | None,
                                        most: float | None) -> None:
    """`"eps": Infinity` was accepted (a layernorm then outputs zeros)."""
    for bad in (NAN, INF, -INF, "0.1", True, None, [0.1]):
        refused(op, attr, bad)
    if least is not None:  # the least refused, as a value just below it
        refused(op, attr, least)
        refused(op, attr, least - 1.0)
        accepted(op, attr, least + 1e-12)
    if most is not None:
        refused(op, attr, most + 0.5)
        accepted(op, attr, most - 0.5)
    assert "finite" in refused(op, attr, NAN)


@pytest.mark.parametrize(("op", "attr", "least"), PAIRS)
def test_pairs_are_two_integers_within_bounds(op: str, attr: str, least: int) -> None:
    for bad in ([1], [1, 2, 3], [least - 1, 1], [2**30, 1], "33", [True, 1], [1.0, 1], NAN):
        refused(op, attr, bad)
    accepted(op, attr, [least, least + 2])


@pytest.mark.parametrize(("op", "attr"), AXES)
def test_axes_are_integers(op: str, attr: str) -> None:
    for bad in (True, 1.5, "1", NAN, 10**12):
        refused(op, attr, bad)
    accepted(op, attr, -1)


def test_choices_shapes_and_permutations() -> None:
    for op, attr, bad in (("input", "dtype", "float16"), ("pool", "mode", "min"),
                          ("gelu", "approximate", "fast"), ("input", "shape", [None, 10**12]),
                          ("input", "shape", [None, 0]), ("input", "shape", [None, 4.0]),
                          ("input", "shape", []), ("reshape", "shape", [10**12]),
                          ("reshape", "shape", [-2]), ("transpose", "perm", ["0", 1])):
        refused(op, attr, bad)
    assert "'fast'" in refused("gelu", "approximate", "fast")


def test_a_document_with_a_bad_attribute_is_refused_naming_node_and_attribute() -> None:
    doc = to_dict(mlp(4, 3, depth=1, width=8))
    doc["nodes"][1]["attrs"]["bias"] = "zz"
    with pytest.raises(IRError) as exc:
        from_dict(doc)
    assert exc.value.node == doc["nodes"][1]["id"]
    assert str(exc.value) == (f"invalid IR: node '{exc.value.node}': linear attribute 'bias' "
                              "must be true or false, got 'zz'")


def test_graphs_the_library_builds_still_validate() -> None:
    for g in (mlp(4, 3, depth=2, width=8, norm="layernorm"),
              mlp(4, 3, depth=2, width=8, norm="batchnorm"), all_ops(), all_ops(softmax_head=True)):
        assert problems(g) == []
        assert from_dict(to_dict(g)) is not None


@pytest.mark.parametrize(("op", "attr", "least", "most"), FLOATS)
def test_an_integer_given_a_float_attribute_is_read_as_its_float(
        op: str, attr: str, least: float | None, most: float | None) -> None:
    """JavaScript writes 0.0 as 0: `"p": 0` was refused ("must be a finite float"), where a
    model spec's `dropout=0` meant 0.0. A document and `GraphBuilder.add` read it as 0.0, with
    0.0's fingerprint; the check itself still takes floats only, and true is no 1."""
    value = 1 if least == 0.0 else 0
    arity = OPS[op].arity
    b = GraphBuilder()
    x = b.add("input", [], {"shape": [None, 3, 4] if op == "attention" else [None, 4]}, id="x")
    if op == "cross_entropy":
        b.add("input", [], {"shape": [None], "dtype": "int64"}, id="y")
    ins = ["x", "y"] if op == "cross_entropy" else [x] * (2 if arity is None else arity)
    built = b.output(b.add(op, ins, {attr: value}, id="n"))
    node = built.nodes[-1]
    assert node.attrs[attr] == float(value) and type(node.attrs[attr]) is float
    text = to_json(built)
    assert f'"{attr}":{float(value)!r}' in text
    doc = from_json(text.replace(f'"{attr}":{float(value)!r}', f'"{attr}":{value}'))
    assert type(doc.nodes[-1].attrs[attr]) is float and to_json(doc) == text
    assert fingerprint(doc) == fingerprint(built)
    refused(op, attr, value)  # the check alone: a hand-made Graph holds what it was given
    with pytest.raises(IRError, match=f"attribute '{attr}' must be a finite float"):
        from_json(text.replace(f'"{attr}":{float(value)!r}', f'"{attr}":true'))


def test_a_key_given_twice_is_refused_by_name_and_place() -> None:
    """JSON parsers keep the last of a key given twice: `{"p": 0.0, "p": 0.5}` was a dropout
    of 0.5, whichever the writer meant."""
    b = GraphBuilder()
    b.add("dropout", [b.add("input", [], {"shape": [None, 4]})], {"p": 0.1}, id="drop")
    text = to_json(b.output("drop"))
    twice = text.replace('"p":0.1', '"p":0.1,"p":0.5')
    message = "invalid IR: node 'drop': key 'p' is given twice in nodes[1].attrs"
    with pytest.raises(IRError) as exc:
        from_json(twice)
    assert str(exc.value) == message and exc.value.node == "drop"
    assert [str(e) for e in problems_in(twice)] == [message]
    found = problems_in(text.replace('"outputs":', '"outputs":[],"outputs":'))
    assert [str(e) for e in found] == ["invalid IR: key 'outputs' is given twice in the document"]
