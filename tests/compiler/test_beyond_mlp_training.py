"""Graphs with attention, convolution, embeddings and the shape ops through the whole compiler
(shape inference, autodiff, memory plan, the executable plan) and a few SGD steps on NumPy:
losses equal PyTorch's for the same initial weights and batches."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from aicf_induct.ir import Graph
from aicf_induct.kernels import REGISTRY, KernelQuery
from aicf_induct.problems import load_problem
from aicf_induct.runtime.executor import Executor, store_for
from aicf_induct.runtime.optimizers import make_optimizer
from tests.compiler.graphs import cnn, ftt, tokens
from tests.oracle import assert_rel_close, torch_forward

torch = pytest.importorskip("torch")

LR, STEPS, BATCH = 0.1, 4, 16


def _digits_batches(shape: tuple[int, ...]) -> list[tuple[np.ndarray, np.ndarray]]:
    p = load_problem("digits", seed=0)
    x, y = p.train.X, p.train.y
    return [(x[k * BATCH:(k + 1) * BATCH].reshape(BATCH, *shape),
             y[k * BATCH:(k + 1) * BATCH]) for k in range(STEPS)]


def _iris_batches() -> list[tuple[np.ndarray, np.ndarray]]:
    p = load_problem("iris", seed=0)
    return [(p.train.X[k * BATCH:(k + 1) * BATCH], p.train.y[k * BATCH:(k + 1) * BATCH])
            for k in range(STEPS)]


def _token_batches() -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(5)
    out = []
    for _ in range(STEPS):
        ids = rng.integers(0, 7, size=(BATCH, 5))
        out.append((ids, (ids[:, 0] + ids[:, -1]) % 3))  # a label the tokens decide
    return out


CASES: dict[str, tuple[Callable[[], Graph], Callable[[], list]]] = {
    "ftt_iris": (lambda: ftt(4, 3, d_token=8, heads=2), _iris_batches),
    "cnn_digits_8x8": (lambda: cnn(10), lambda: _digits_batches((1, 8, 8))),
    "embedding_matmul_concat": (lambda: tokens(7, 5, 3), _token_batches),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_sgd_steps_match_pytorch(name: str) -> None:
    make_graph, make_batches = CASES[name]
    graph = make_graph()
    store = store_for(graph, seed=2)
    ex = Executor(graph, store, loss="cross_entropy")
    opt = make_optimizer("sgd", lr=LR)
    tg = ex.training_graph
    tensors = {k: torch.tensor(v.copy(), requires_grad=True) for k, v in store.params.items()}
    batches = make_batches()
    first = ex.evaluate(*batches[0])[0]
    ours, theirs = [], []
    for step, (x, y) in enumerate(batches):
        ours.append(ex.train_step(x, y, step))
        opt.step(store, LR)
        loss = torch_forward(tg.graph, tensors, {"x": x, "labels": y}, training=True)["loss"]
        theirs.append(float(loss.detach()))
        loss.backward()
        with torch.no_grad():
            for t in tensors.values():
                t -= LR * t.grad
                t.grad = None
    assert_rel_close(ours, theirs, rtol=1e-9, what="loss curve")
    assert ex.evaluate(*batches[0])[0] < first  # it learns
    for k, t in tensors.items():  # and the weights after the last update agree too
        assert_rel_close(store.params[k], t.detach().numpy(), rtol=1e-8, atol=1e-12, what=k)


@pytest.mark.parametrize("name", sorted(CASES))
def test_memory_plan_reuses_buffers_and_every_op_has_a_kernel(name: str) -> None:
    graph = CASES[name][0]()
    ex = Executor(graph, store_for(graph), loss="cross_entropy")
    plan = ex.plan("train", BATCH)
    assert plan.memory.arena_bytes < plan.memory.naive_bytes
    assert len(plan.kernel_names) == len(plan.program)
    for n in graph.nodes:
        if n.op != "input":
            for direction in ("fwd", "vjp"):
                k = REGISTRY.select(KernelQuery(n.op, direction, "cpu", "float64", ((BATCH,),)))
                assert k.op == n.op  # the guaranteed fallback at least
