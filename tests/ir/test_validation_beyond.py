"""The new ops' shape and attribute rules: each bad graph fails with one IRError that names
the node and says what is wrong; canonical JSON round-trips the new ops."""

from __future__ import annotations

from typing import Any

import pytest

from aicf_induct.errors import IRError
from aicf_induct.ir import GraphBuilder, fingerprint, from_json, to_json, validate
from tests.compiler.graphs import cnn, ftt, tokens

BAD: list[tuple[list[Any], str, str, dict[str, Any], str]] = [
    # (input shape, input dtype, op, attrs, message)
    ([None, 3, 4], "float64", "attention", {"heads": 3}, "must divide d=4"),
    ([None, 4], "float64", "attention", {"heads": 1}, r"expects \(batch, tokens, d\)"),
    ([None, 3, 4], "float64", "attention", {"heads": 2, "dropout": 1.0}, "dropout"),
    ([None, 3], "float64", "embedding", {"num_embeddings": 5, "embedding_dim": 2},
     "ids must be int64"),
    ([None, 3], "int64", "embedding", {"num_embeddings": 0, "embedding_dim": 2},
     "num_embeddings"),
    ([None, 3, 2], "float64", "numeric_tokenizer", {"d_token": 4}, r"\(batch, features\)"),
    ([None, 2, 5, 5], "float64", "conv2d", {"out_channels": 3, "kernel_size": [7, 7]},
     "does not fit"),
    ([None, 2, 5, 5], "float64", "conv2d", {"out_channels": 3, "kernel_size": 3},
     r"'kernel_size' must be 2 integers from 1 to"),  # the attribute check's, at add too
    ([None, 5, 5], "float64", "conv2d", {"out_channels": 3, "kernel_size": [3, 3]},
     r"\(batch, channels, height, width\)"),
    ([None, 2, 5, 5], "float64", "pool", {"mode": "min", "kernel_size": [2, 2],
                                          "stride": [2, 2]}, "'max' or 'avg'"),
    ([None, 2, 5, 5], "float64", "pool", {"kernel_size": [2, 2], "stride": [2, 2],
                                          "padding": [2, 2]}, "at most half"),
    ([None, 2, 6], "float64", "reshape", {"shape": [5, -1]}, "cannot become"),
    ([None, 2, 6], "float64", "reshape", {"shape": [-1, -1]}, "at most one -1"),
    ([None, 2, 6], "float64", "transpose", {"perm": [1, 0, 2]}, "batch axis first"),
    ([None, 2, 6], "float64", "transpose", {"perm": [0, 1]}, "permutation"),
    ([None, 2, 6], "float64", "mean", {"axis": 0}, "batch axis"),
    ([None, 2, 6], "float64", "sum", {"axis": 3}, r"axis' must be an int in \[-3, 3\)"),
]


@pytest.mark.parametrize("shape,dtype,op,attrs,message", BAD, ids=lambda v: str(v)[:20])
def test_bad_node_is_named(shape: list[Any], dtype: str, op: str, attrs: dict[str, Any],
                           message: str) -> None:
    b = GraphBuilder()
    x = b.input(shape, dtype)
    with pytest.raises(IRError, match=message) as err:
        b.add(op, [x], attrs, id="bad")
    assert err.value.node == "bad"


def test_matmul_and_concat_mismatches_are_named() -> None:
    b = GraphBuilder()
    a = b.input([None, 3, 4], id="a")
    c = b.input([None, 5, 2], id="c")
    with pytest.raises(IRError, match="inner sizes differ") as err:
        b.add("matmul", [a, c], id="mm")
    assert err.value.node == "mm"
    with pytest.raises(IRError, match="agree except on axis 1") as err:
        b.add("concat", [a, c], {"axis": 1}, id="cat")
    assert err.value.node == "cat"
    with pytest.raises(IRError, match="batch axis"):
        b.add("concat", [a, a], {"axis": 0}, id="cat0")


@pytest.mark.parametrize("graph_fn", [lambda: ftt(5, 3, blocks=2, dropout=0.1),
                                      lambda: cnn(10), lambda: tokens(7, 5, 3)])
def test_new_ops_round_trip_canonical_json(graph_fn: Any) -> None:
    g = graph_fn()
    back = from_json(to_json(g))
    validate(back)
    assert to_json(back) == to_json(g) and fingerprint(back) == fingerprint(g)
