"""Compiled plans against the reference interpreter and PyTorch: values, gradients, state."""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.compiler.autodiff import backward_program, forward_program
from aicf_induct.compiler.memory import lifetimes
from aicf_induct.runtime.executor import Executor, store_for
from aicf_induct.runtime.interpreter import interpret
from tests.compiler.graphs import ftt
from tests.graphs import all_ops, mlp
from tests.oracle import assert_rel_close, torch_graph


def _batch(rng: np.random.Generator, n: int, n_in: int, n_out: int, loss: str):
    x = rng.normal(size=(n, n_in))
    y = rng.integers(0, n_out, size=n) if loss == "cross_entropy" else rng.normal(size=(n, n_out))
    return x, y


def _values(store) -> dict[str, np.ndarray]:
    return {**{k: v.copy() for k, v in store.params.items()},
            **{k: v.copy() for k, v in store.buffers.items()}}


@pytest.mark.parametrize("graph_fn,loss", [
    (lambda: all_ops(), "cross_entropy"),
    (lambda: all_ops(softmax_head=True), "mse"),
    (lambda: mlp(5, 4, depth=3, act="gelu", norm="layernorm"), "cross_entropy"),
    (lambda: mlp(5, 1, depth=2, act="tanh", norm="batchnorm"), "mse"),
    (lambda: ftt(5, 3, d_token=4, heads=2), "cross_entropy"),
    (lambda: ftt(5, 2, d_token=6, heads=3, blocks=2), "mse"),
])
def test_plan_matches_interpreter_and_torch(graph_fn, loss: str) -> None:
    pytest.importorskip("torch")
    graph = graph_fn()
    n_out = graph.params["head.weight"].shape[0]
    rng = np.random.default_rng(0)
    store = store_for(graph, seed=1)
    ex = Executor(graph, store, loss=loss)
    tg = ex.training_graph
    for step in range(2):  # the second step reuses the cached plan and its buffers
        x, y = _batch(rng, 12, graph.inputs[0].attrs["shape"][1], n_out, loss)
        if loss == "mse" and n_out == 1:
            y = y[:, 0]
        before = _values(store)
        got = ex.train_step(x, y, step)
        feeds = {"x": x, "labels": y}
        ref = interpret(tg.graph, before, feeds, training=True, loss=tg.loss, step=step)
        tvals, tgrads = torch_graph(tg.graph, before, feeds, tg.loss, training=True)
        assert_rel_close(got, float(ref.values[tg.loss]), rtol=1e-12, what="loss vs interpreter")
        assert_rel_close(got, float(tvals[tg.loss]), what="loss vs torch")
        for name, g in store.grads.items():
            assert_rel_close(g, ref.grads[name], rtol=1e-10, atol=1e-13, what=name)
            assert_rel_close(g, tgrads[name], atol=1e-10, what=f"{name} vs torch")
        for name, new in ref.state.items():  # batchnorm running statistics
            assert_rel_close(store.buffers[name], new, rtol=1e-12, what=name)
        store.data -= 0.1 * store.grad  # move, so step 2 sees other parameters


def test_eval_and_predict_use_running_statistics() -> None:
    graph = mlp(4, 3, norm="batchnorm")
    store = store_for(graph, seed=0)
    rng = np.random.default_rng(1)
    for k in store.buffers:
        store.buffers[k][...] = rng.uniform(0.5, 2.0, size=store.buffers[k].shape)
    ex = Executor(graph, store)
    x, y = _batch(rng, 9, 4, 3, "cross_entropy")
    ref = interpret(graph, _values(store), {"x": x}, training=False)
    assert_rel_close(ex.predict(x), ref.values["head"], rtol=1e-12)
    loss, pred = ex.evaluate(x, y)
    assert_rel_close(pred, ref.values["head"], rtol=1e-12)
    assert np.isfinite(loss)
    # Eval must not touch the running statistics.
    before = _values(store)
    ex.evaluate(x, y)
    for k in store.buffers:
        assert np.array_equal(store.buffers[k], before[k])


def test_plans_are_cached_per_batch_size_and_a_short_batch_works() -> None:
    graph = mlp(4, 3)
    ex = Executor(graph, store_for(graph))
    rng = np.random.default_rng(0)
    for n in (8, 8, 3):
        x, y = _batch(rng, n, 4, 3, "cross_entropy")
        ex.train_step(x, y, 0)
    assert sorted(k for k in ex._plans) == [("train", 3), ("train", 8)]
    assert ex.plan("train", 8) is ex.plan("train", 8)
    assert ex.cached_plan("train", 8) is ex.plan("train", 8)
    assert ex.cached_plan("train", 5) is None and ("train", 5) not in ex._plans  # no compile


def test_memory_plan_reuses_buffers_and_never_overlaps_live_values() -> None:
    graph = mlp(32, 10, depth=6, width=64)
    ex = Executor(graph, store_for(graph))
    plan = ex.plan("train", 64)
    assert plan.memory.arena_bytes < 0.6 * plan.memory.naive_bytes
    life = lifetimes([(i.ins, i.outs) for i in plan.program], list(plan.inputs),
                     [ex.training_graph.loss, ex.training_graph.prediction])
    ranges = {v: (plan.memory.offsets[v], plan.memory.offsets[v] + plan.values[v].nbytes)
              for v in plan.memory.offsets}
    names = sorted(ranges)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            (fa, la), (fb, lb) = life[a], life[b]
            live_together = not (la < fb or lb < fa)
            disjoint = ranges[a][1] <= ranges[b][0] or ranges[b][1] <= ranges[a][0]
            assert disjoint or not live_together, f"{a} and {b} share memory while both live"


def test_dead_code_is_eliminated_and_frozen_inputs_get_no_gradient() -> None:
    from aicf_induct.ir import GraphBuilder

    b = GraphBuilder()
    x = b.input([None, 4])
    h = b.add("relu", [b.add("linear", [x], {"out_features": 5})])
    b.add("tanh", [b.add("linear", [x], {"out_features": 7}, id="unused")])  # feeds no output
    graph = b.output(b.add("linear", [h], {"out_features": 2}, id="head"))
    fwd = forward_program(graph, ["head"])
    assert "unused" not in {i.node_id for i in fwd}
    ex = Executor(graph, store_for(graph))
    bwd = backward_program(ex.training_graph.graph, "loss")
    first = next(i for i in bwd if i.kind == "vjp" and i.node_id == "linear")
    assert first.needs == (False,) and first.outs == [None]  # no gradient for the data
    rng = np.random.default_rng(0)
    ex.store.grads["unused.weight"][...] = 5.0  # stale: a step must zero it
    ex.train_step(rng.normal(size=(6, 4)), rng.integers(0, 2, 6), 0)
    assert not ex.store.grads["unused.weight"].any()


def test_a_failing_kernel_names_its_node() -> None:
    from aicf_induct.errors import ExecutionError

    graph = mlp(4, 3)
    ex = Executor(graph, store_for(graph))
    plan = ex.plan("train", 5)  # fed directly: the executor refuses the label before this
    with pytest.raises(ExecutionError, match="node 'loss'"):
        plan.run({"x": np.zeros((5, 4)), "labels": np.array([0, 1, 2, 3, 9])})  # out of range


def test_whole_graph_gradients_match_finite_differences() -> None:
    graph = all_ops()
    store = store_for(graph, seed=2)
    ex = Executor(graph, store)
    rng = np.random.default_rng(3)
    x, y = _batch(rng, 7, 6, 3, "cross_entropy")
    ex.train_step(x, y, 0)
    grads = {k: v.copy() for k, v in store.grads.items()}
    buffers = {k: v.copy() for k, v in store.buffers.items()}

    def loss() -> float:
        for k, v in buffers.items():  # batchnorm statistics must not drift between probes
            store.buffers[k][...] = v
        return ex.train_step(x, y, 0)

    from tests.oracle import finite_difference

    for name in ("linear.weight", "layernorm.bias", "batchnorm.weight", "head.bias"):
        fd = finite_difference(loss, store.params[name])
        assert_rel_close(grads[name], fd, rtol=1e-5, atol=1e-8, what=name)
