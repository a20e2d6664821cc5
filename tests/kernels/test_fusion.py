"""The fusion pass on the CPU: fused programs compute what unfused ones do (NumPy
references of the fused ops), keep only the values something reads, and fail loudly."""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.compiler.autodiff import backward_program, forward_program
from aicf_induct.compiler.fusion import FusionError, check_program, fuse_program
from aicf_induct.errors import AicfError
from aicf_induct.ir import GraphBuilder
from aicf_induct.runtime.executor import Executor, store_for
from aicf_induct.runtime.plan import compile_plan
from tests.graphs import all_ops, mlp


def _dropout_mlp():
    b = GraphBuilder("drop")
    h = b.input([None, 6])
    h = b.add("relu", [b.add("linear", [h], {"out_features": 9})])
    h = b.add("dropout", [h], {"p": 0.3})
    h = b.add("tanh", [b.add("linear", [h], {"out_features": 7})])
    return b.output(b.add("linear", [h], {"out_features": 3}, id="head"))


GRAPHS = {
    "relu": (lambda: mlp(5, 4, depth=3, act="relu"), "cross_entropy", 0.0),
    "gelu": (lambda: mlp(5, 4, depth=2, act="gelu"), "cross_entropy", 0.1),
    "tanh": (lambda: mlp(5, 3, depth=2, act="tanh"), "mse", 0.0),
    "sigmoid": (lambda: mlp(5, 1, depth=2, act="sigmoid"), "mse", 0.0),
    "silu_ln": (lambda: mlp(5, 4, depth=2, act="silu", norm="layernorm"), "cross_entropy", 0.0),
    "all_ops": (lambda: all_ops(), "cross_entropy", 0.0),
    "all_ops_mse": (lambda: all_ops(softmax_head=True), "mse", 0.0),
    "dropout": (_dropout_mlp, "cross_entropy", 0.0),
}


def _batch(rng, graph, loss, n=12):
    n_in = graph.inputs[0].attrs["shape"][1]
    n_out = graph.params["head.weight"].shape[0]
    x = rng.normal(size=(n, n_in))
    if loss == "cross_entropy":
        return x, rng.integers(0, n_out, size=n)
    y = rng.normal(size=(n, n_out))
    return x, (y[:, 0] if n_out == 1 else y)


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_fused_plan_matches_unfused(name: str) -> None:
    make, loss, eps = GRAPHS[name]
    graph = make()
    plain, fused = store_for(graph, seed=1), store_for(graph, seed=1)
    ex_a = Executor(graph, plain, loss=loss, label_smoothing=eps)
    ex_b = Executor(graph, fused, loss=loss, label_smoothing=eps, fuse=True)
    rng = np.random.default_rng(0)
    for step in range(2):
        x, y = _batch(rng, graph, loss)
        la, lb = ex_a.train_step(x, y, step), ex_b.train_step(x, y, step)
        np.testing.assert_allclose(lb, la, rtol=1e-12)
        np.testing.assert_allclose(fused.grad, plain.grad, rtol=1e-10, atol=1e-14)
        for s in (plain, fused):
            s.data -= 0.1 * s.grad
        pa, pb = ex_a.predict(x), ex_b.predict(x)
        np.testing.assert_allclose(pb, pa, rtol=1e-12, atol=1e-14)
    assert any(n.startswith("linear_act") for n in ex_b.plan("train", 12).kernel_names)


def _program(graph, loss="cross_entropy", training=True):
    ex = Executor(graph, store_for(graph), loss=loss)
    tg = ex.training_graph
    prog = forward_program(tg.graph, [tg.loss, tg.prediction])
    if training:
        prog += backward_program(tg.graph, tg.loss)
    return tg, prog


def test_relu_mlp_fuses_into_few_instructions_without_pre_activations() -> None:
    tg, prog = _program(mlp(5, 4, depth=2, act="relu"))
    fused, modified = fuse_program(prog, tg.graph, keep=[tg.loss, tg.prediction])
    assert modified
    ops = [(i.kind, i.op) for i in fused]
    assert ops.count(("fused", "linear_act")) == 3
    assert ops.count(("fused", "act_linear_bwd")) == 3
    assert ops.count(("fused", "softmax_ce")) == 1
    assert not any(op in ("relu", "linear", "cross_entropy") for _, op in ops)
    for ins in fused:
        if ins.op == "linear_act":
            assert ins.outs[1] is None  # relu's derivative comes from its output
    check_program(fused, ["x", "labels"])


def test_gelu_keeps_its_input_for_the_backward() -> None:
    tg, prog = _program(mlp(5, 4, depth=2, act="gelu"))
    fused, _ = fuse_program(prog, tg.graph, keep=[tg.loss, tg.prediction])
    kept = [ins.outs[1] for ins in fused if ins.op == "linear_act" and ins.attrs["act"]]
    assert len(kept) == 2 and all(kept)
    bwd = [ins for ins in fused if ins.op == "act_linear_bwd" and ins.attrs["act"]]
    assert all(ins.ins[2] == ins.node_id.split("+")[0] for ins in bwd)


def test_eval_program_keeps_no_pre_activation() -> None:
    tg, prog = _program(mlp(5, 4, depth=2, act="gelu"), training=False)
    fused, _ = fuse_program(prog, tg.graph, keep=[tg.loss, tg.prediction])
    assert all(ins.outs[1] is None for ins in fused if ins.op == "linear_act")


def test_precision_is_recorded_and_checked() -> None:
    tg, prog = _program(mlp(5, 4, depth=1))
    fused, _ = fuse_program(prog, tg.graph, precision="tf32")
    assert {i.attrs["precision"] for i in fused if i.op.startswith(("linear", "act_"))} == {
        "tf32"}
    with pytest.raises(AicfError, match="precision"):
        fuse_program(prog, tg.graph, precision="fp8")


def test_check_program_names_the_node_that_reads_an_unwritten_value() -> None:
    tg, prog = _program(mlp(5, 4, depth=2))
    fused, _ = fuse_program(prog, tg.graph)
    with pytest.raises(FusionError, match="reads"):
        check_program(fused[1:], ["x", "labels"])


def test_compile_plan_with_fusion_uses_the_registry() -> None:
    graph = mlp(5, 4, depth=2)
    ex = Executor(graph, store_for(graph), fuse=True)
    tg = ex.training_graph
    plan = compile_plan(tg.graph, 8, store=ex.store, training=True, loss=tg.loss,
                        roots=[tg.loss, tg.prediction], fuse=True)
    assert "linear_act.fused.reference" in plan.kernel_names
    assert not plan.capturable  # the references allocate
