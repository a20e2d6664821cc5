"""The MLP-chain matcher: which fused programs the one-kernel step may run, and why not."""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.compiler.chain import MlpChain, match_mlp_chain
from aicf_induct.ir import GraphBuilder
from aicf_induct.runtime.executor import Executor, store_for
from tests.graphs import all_ops, mlp


def _program(graph, loss="cross_entropy", batch=8, eps=0.0):
    ex = Executor(graph, store_for(graph, seed=0), loss=loss, label_smoothing=eps, fuse=True)
    plan = ex.plan("train", batch)
    return plan.program, plan.inputs, ex


@pytest.mark.parametrize("act,depth", [("relu", 2), ("gelu", 3), ("tanh", 1), ("silu", 0)])
def test_an_mlp_is_a_chain_with_its_widths_and_parameters(act: str, depth: int) -> None:
    graph = mlp(5, 3, depth=depth, width=7, act=act)
    program, inputs, ex = _program(graph, batch=11, eps=0.1)
    chain = match_mlp_chain(program, inputs)
    assert isinstance(chain, MlpChain), chain
    assert chain.batch == 11 and chain.label_smoothing == 0.1
    assert [(ly.in_features, ly.out_features) for ly in chain.layers] == (
        [(5, 7)] + [(7, 7)] * (depth - 1) + [(7, 3)] if depth else [(5, 3)])
    assert chain.act == (act if depth else None)
    assert sorted(chain.params) == sorted(ex.store.names)
    assert chain.input_id == ex.input_id and chain.labels_id == ex.training_graph.labels


def test_the_key_tells_apart_what_changes_the_work() -> None:
    keys = set()
    for graph, batch, eps in [(mlp(5, 3, width=7), 8, 0.0), (mlp(5, 3, width=8), 8, 0.0),
                              (mlp(5, 3, width=7), 9, 0.0), (mlp(5, 3, width=7), 8, 0.1),
                              (mlp(5, 3, width=7, act="gelu"), 8, 0.0)]:
        chain = match_mlp_chain(*_program(graph, batch=batch, eps=eps)[:2])
        assert isinstance(chain, MlpChain)
        keys.add(chain.key())
    assert len(keys) == 5


def test_a_layer_without_bias_is_still_a_chain() -> None:
    b = GraphBuilder("nobias")
    h = b.add("relu", [b.add("linear", [b.input([None, 4])], {"out_features": 6,
                                                              "bias": False})])
    graph = b.output(b.add("linear", [h], {"out_features": 2}, id="head"))
    chain = match_mlp_chain(*_program(graph)[:2])
    assert isinstance(chain, MlpChain)
    assert chain.layers[0].bias is None and chain.layers[1].bias is not None


def _mixed_acts():
    b = GraphBuilder("mixed")
    h = b.add("relu", [b.add("linear", [b.input([None, 4])], {"out_features": 6})])
    h = b.add("tanh", [b.add("linear", [h], {"out_features": 6})])
    return b.output(b.add("linear", [h], {"out_features": 2}, id="head"))


@pytest.mark.parametrize("make,loss,why", [
    (lambda: mlp(4, 2, norm="layernorm"), "cross_entropy", "not linear_act"),
    (lambda: all_ops(), "cross_entropy", "not linear_act"),
    (lambda: mlp(4, 2), "mse", "not softmax cross-entropy"),
    (_mixed_acts, "cross_entropy", "one hidden activation"),
])
def test_other_programs_are_refused_with_the_reason(make, loss, why) -> None:
    got = match_mlp_chain(*_program(make(), loss=loss)[:2])
    assert isinstance(got, str) and why in got, got


def test_an_unfused_program_is_not_a_chain() -> None:
    graph = mlp(4, 2)
    ex = Executor(graph, store_for(graph, seed=0), fuse=False)
    plan = ex.plan("train", 4)
    got = match_mlp_chain(plan.program, plan.inputs)
    assert isinstance(got, str)
    assert np.all([ins.kind != "fused" for ins in plan.program])
