"""Gradient value names never meet node ids: autodiff named z's gradient `d:z`, and a node
could be called `d:z` too; both values then shared one buffer, and the gradients came out
45 % off the interpreter's with no error (a node `a#1` beside a fanned-out `a` took its
shape instead). Gradient names now start with '#', which node ids may not hold."""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.compiler.autodiff import grad_name, grad_of
from aicf_induct.errors import IRError
from aicf_induct.ir.builder import GraphBuilder
from aicf_induct.ir.graph import Graph
from aicf_induct.ir.validate import validate
from aicf_induct.runtime.executor import Executor, store_for
from aicf_induct.runtime.interpreter import interpret


def _graph(first: str, fan: str) -> Graph:
    b = GraphBuilder("ids")
    x = b.input([None, 5])
    h = b.add("linear", [x], {"out_features": 4}, id=first)
    r = b.add("gelu", [h], id="r")
    z = b.add("linear", [r], {"out_features": 4}, id=fan)
    t, s = b.add("tanh", [z], id=f"{fan}~1"), b.add("sigmoid", [z], id="d:z~1")
    return b.output(b.add("linear", [b.add("add", [t, s])], {"out_features": 3}, id="out"))


@pytest.mark.parametrize("fuse", [False, True])
@pytest.mark.parametrize("first", ["h", "d:z", "d:z~1x", "z~1"])
def test_node_ids_shaped_like_gradient_names_get_the_interpreter_s_gradients(
        first: str, fuse: bool) -> None:
    g = _graph(first, "z")
    validate(g)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(6, 5)), rng.integers(0, 3, 6)
    store = store_for(g, None, seed=0)
    values = {k: v.copy() for k, v in store.params.items()}
    ex = Executor(g, store, loss="cross_entropy", fuse=fuse, seed=0)
    loss = ex.train_step(x, y, 0)
    tg = ex.training_graph
    ref = interpret(tg.graph, values, {ex.input_id: x, tg.labels: y}, training=True,
                    loss=tg.loss, seed=0, step=0)
    assert loss == pytest.approx(float(ref.values[tg.loss]), rel=1e-12)
    for name, want in ref.grads.items():
        np.testing.assert_allclose(store.grads[name], want, rtol=1e-9, atol=1e-12,
                                   err_msg=name)


def test_a_node_id_holding_a_hash_is_refused_by_name() -> None:
    b = GraphBuilder("ids")
    x = b.input([None, 5])
    g = b.output(b.add("linear", [x], {"out_features": 2}, id="a#1"))
    with pytest.raises(IRError, match=r"node 'a#1'.*may not hold '#'|may not hold '#'.*a#1"):
        validate(g)


@pytest.mark.parametrize("node", ["z", "d:z", "a~1", "x.y"])
def test_every_gradient_name_leads_back_to_its_node(node: str) -> None:
    for name in (grad_name(node), grad_name(node, "3"), grad_name(node, "~2")):
        assert grad_of(name) == node
    assert grad_of(node) is None


@pytest.mark.parametrize(("node", "said"), [
    ("a\nerror: b", r"node 'a\\nerror: b': a node id may not hold a control character"),
    ("tab\there", "control character"),
    ("x\ud800", r"node 'x\\ud800': a node id must be text")])
def test_a_node_id_that_would_break_its_one_line_error_is_refused(node: str,
                                                                  said: str) -> None:
    """A newline in an id split its errors over lines (and could fake an `error:` line); a
    lone surrogate passed `ir validate`, then `ir show` died printing it."""
    b = GraphBuilder("ids")
    x = b.input([None, 5])
    g = b.output(b.add("linear", [x], {"out_features": 2}, id=node))
    with pytest.raises(IRError, match=said) as err:
        validate(g)
    assert "\n" not in str(err.value)
    str(err.value).encode("utf-8")
