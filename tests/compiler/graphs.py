"""Graphs beyond MLPs, built with the IR builder: a tiny FT-Transformer, a tiny CNN, and one
graph that walks the remaining new ops (embedding, matmul, transpose, reshape, sum, concat)."""

from __future__ import annotations

from aicf_induct.ir import Graph, GraphBuilder


def ftt(n_features: int, n_out: int, d_token: int = 8, heads: int = 2, blocks: int = 1,
        dropout: float = 0.0) -> Graph:
    """tokenizer -> [attention + residual -> layernorm -> FFN + residual -> layernorm] * blocks
    -> mean over tokens -> linear head (post-norm, as the original Transformer)."""
    b = GraphBuilder("ftt")
    x = b.input([None, n_features])
    h = b.add("numeric_tokenizer", [x], {"d_token": d_token})
    for _ in range(blocks):
        a = b.add("attention", [h], {"heads": heads, "dropout": dropout})
        h = b.add("layernorm", [b.add("add", [h, a])])
        f = b.add("linear", [h], {"out_features": 2 * d_token})
        f = b.add("linear", [b.add("relu", [f])], {"out_features": d_token})
        h = b.add("layernorm", [b.add("add", [h, f])])
    pooled = b.add("mean", [h], {"axis": 1})
    return b.output(b.add("linear", [pooled], {"out_features": n_out}, id="head"))


def cnn(n_out: int, side: int = 8, channels: int = 4, flat_input: bool = False) -> Graph:
    """(N, 1, side, side) -> conv 3x3 pad 1 -> relu -> max pool 2 -> conv 3x3 -> relu ->
    avg pool 2 -> flatten -> linear head. `flat_input`: the input is (N, side * side), as a
    tabular problem's rows (digits), reshaped to an image first."""
    b = GraphBuilder("cnn")
    x = b.input([None, side * side] if flat_input else [None, 1, side, side])
    if flat_input:
        x = b.add("reshape", [x], {"shape": [1, side, side]})
    h = b.add("conv2d", [x], {"out_channels": channels, "kernel_size": [3, 3],
                              "padding": [1, 1]})
    h = b.add("pool", [b.add("relu", [h])], {"mode": "max", "kernel_size": [2, 2],
                                             "stride": [2, 2]})
    h = b.add("conv2d", [h], {"out_channels": 2 * channels, "kernel_size": [3, 3]})
    h = b.add("pool", [b.add("relu", [h])], {"mode": "avg", "kernel_size": [2, 2],
                                             "stride": [1, 1]})
    flat = b.add("reshape", [h], {"shape": [-1]})
    return b.output(b.add("linear", [flat], {"out_features": n_out}, id="head"))


def tokens(vocab: int, n_tokens: int, n_out: int, d: int = 4) -> Graph:
    """int64 ids (N, T) -> embedding -> self-similarity matmul with a transpose -> sum ->
    concat with the mean embedding -> reshape -> head: every remaining new op once."""
    b = GraphBuilder("tokens")
    ids = b.input([None, n_tokens], "int64")
    e = b.add("embedding", [ids], {"num_embeddings": vocab, "embedding_dim": d})
    e = b.add("linear", [e], {"out_features": d})
    sim = b.add("matmul", [e, b.add("transpose", [e], {"perm": [0, 2, 1]})])  # (N, T, T)
    ctx = b.add("matmul", [sim, e])  # (N, T, d)
    summed = b.add("sum", [ctx], {"axis": 1, "keepdims": True})  # (N, 1, d)
    both = b.add("concat", [summed, b.add("mean", [e], {"axis": 1, "keepdims": True})],
                 {"axis": 1})  # (N, 2, d)
    flat = b.add("tanh", [b.add("reshape", [both], {"shape": [2 * d]})])
    return b.output(b.add("linear", [flat], {"out_features": n_out}, id="head"))
