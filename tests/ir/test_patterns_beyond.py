"""Patterns of the new families (attention, tokens, convolution), and MLP patterns pinned to
the values they had before those families existed (the warehouse's history must not drift)."""

from __future__ import annotations

import hashlib
import json

from aicf_induct.ir.patterns import patterns
from tests.compiler.graphs import cnn, ftt, tokens
from tests.graphs import all_ops, mlp

# patterns(mlp(4, 3, depth=2, width=8, act="relu")) as computed before issue 19
PINNED_RELU = {
    "nodes": 5.0, "op.linear": 3.0, "op.relu": 2.0, "depth": 3.0, "hidden_layers": 2.0,
    "width.min": 8.0, "width.max": 8.0, "width.mean": 8.0, "width.first": 8.0,
    "width.last": 8.0, "width.ratio": 1.0, "width.constant": 1.0, "width.funnel": 0.0,
    "width.expand": 0.0, "width.bottleneck": 0.0, "params.count": 139.0,
    "params.log10": 2.143014800254095, "act.relu": 2.0, "act.kinds": 1.0, "norm.count": 0.0,
    "norm.placement.pre_act": 0.0, "norm.placement.post_act": 0.0, "residual.count": 0.0,
    "concat.count": 0.0, "dropout.count": 0.0, "dropout.rate_max": 0.0,
    "dropout.rate_mean": 0.0, "motif.linear>relu": 2.0, "motif.linear>relu>linear": 2.0,
    "motif.relu>linear": 2.0, "motif.relu>linear>relu": 1.0,
}
# patterns(mlp(6, 2, depth=3, width=16, act="gelu", norm="layernorm")), likewise
PINNED_GELU_LN = {
    "nodes": 10.0, "op.gelu": 3.0, "op.layernorm": 3.0, "op.linear": 4.0, "depth": 4.0,
    "hidden_layers": 3.0, "width.min": 16.0, "width.max": 16.0, "width.mean": 16.0,
    "width.first": 16.0, "width.last": 16.0, "width.ratio": 1.0, "width.constant": 1.0,
    "width.funnel": 0.0, "width.expand": 0.0, "width.bottleneck": 0.0, "params.count": 786.0,
    "params.log10": 2.895422546039408, "act.gelu": 3.0, "act.kinds": 1.0,
    "norm.layernorm": 3.0, "norm.count": 3.0, "norm.placement.pre_act": 3.0,
    "norm.placement.post_act": 0.0, "residual.count": 0.0, "concat.count": 0.0,
    "dropout.count": 0.0, "dropout.rate_max": 0.0, "dropout.rate_mean": 0.0,
    "motif.gelu>linear": 3.0, "motif.gelu>linear>layernorm": 2.0,
    "motif.layernorm>gelu": 3.0, "motif.layernorm>gelu>linear": 3.0,
    "motif.linear>layernorm": 3.0, "motif.linear>layernorm>gelu": 3.0,
}
# sha256 of json.dumps(patterns(all_ops()), sort_keys=True) before issue 19 (80 patterns)
PINNED_ALL_OPS = "03dd597914a77c684298cd5232cbac2ed2ed8de1649f1ba06ff3e1af41b1fe35"


def test_mlp_patterns_are_unchanged() -> None:
    assert patterns(mlp(4, 3, depth=2, width=8, act="relu")) == PINNED_RELU
    assert patterns(mlp(6, 2, depth=3, width=16, act="gelu", norm="layernorm")) == PINNED_GELU_LN
    p = patterns(all_ops())
    # all_ops holds a gelu and a gelu_tanh: one pattern each since the forty-third sitting,
    # both act.gelu before; folded back, the patterns are the pinned ones exactly
    assert len(p) == 81 and p["act.gelu"] == p["act.gelu_tanh"] == 1
    p["act.gelu"] += p.pop("act.gelu_tanh")
    p["act.kinds"] -= 1
    assert hashlib.sha256(json.dumps(p, sort_keys=True).encode()).hexdigest() == PINNED_ALL_OPS


def test_ft_transformer_patterns() -> None:
    p = patterns(ftt(5, 3, d_token=12, heads=3, blocks=2, dropout=0.1))
    assert p["attention.blocks"] == 2 and p["attention.heads"] == 3
    assert p["attention.head_dim"] == 4 and p["attention.dropout"] == 0.1
    assert p["token.width"] == 12 and p["token.embeddings"] == 1
    assert p["op.mean"] == 1 and p["motif.numeric_tokenizer>attention>add"] == 1
    assert not any(k.startswith(("conv.", "pool.")) for k in p)


def test_cnn_patterns() -> None:
    p = patterns(cnn(10, channels=4))
    assert p["conv.stages"] == 2 and p["conv.channels_max"] == 8
    assert p["conv.kernel_max"] == 3 and p["conv.stride_max"] == 1
    assert p["pool.max"] == 1 and p["pool.avg"] == 1
    assert p["motif.conv2d>relu>pool"] == 2
    assert not any(k.startswith(("attention.", "token.")) for k in p)


def test_embedding_patterns_without_attention() -> None:
    p = patterns(tokens(7, 5, 3, d=4))
    assert p["token.width"] == 4 and p["token.embeddings"] == 1
    assert "attention.blocks" not in p


def test_gelu_and_its_tanh_approximation_are_two_activations_in_the_patterns() -> None:
    """Both were `act.gelu`, so mined traits on it mixed two activations the model spec and
    the fingerprint keep apart."""
    from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
    from aicf_induct.ir.patterns import patterns

    exact = patterns(mlp_graph(parse_model_spec("mlp:act=gelu"), 4, 3))
    tanh = patterns(mlp_graph(parse_model_spec("mlp:act=gelu_tanh"), 4, 3))
    assert exact["act.gelu"] == tanh["act.gelu_tanh"] >= 1
    assert "act.gelu_tanh" not in exact and "act.gelu" not in tanh
    assert exact["act.kinds"] == tanh["act.kinds"] == 1


def test_an_activation_op_the_model_spec_does_not_name_is_counted_by_its_op() -> None:
    """softmax is an activation op with no model-spec name: naming activations as the spec
    does raised a KeyError on it, and a run of a model ending in softmax could not start."""
    from aicf_induct.ir.builder import GraphBuilder
    from aicf_induct.ir.patterns import patterns

    b = GraphBuilder()
    x = b.input([None, 4])
    g = b.output(b.add("softmax", [b.add("relu", [b.add("linear", [x], {"out_features": 3})])]))
    p = patterns(g)
    assert p["act.softmax"] == p["act.relu"] == 1 and p["act.kinds"] == 2
