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
from aicf_induct.runtime.trainer import TrainConfig, Trainer
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


@pytest.mark.parametrize("name", sorted(CASES))
def test_fusion_pass_leaves_the_new_ops_step_unchanged(name: str) -> None:
    """The fusion pass fuses only (batch, features) linears; a step with it equals one
    without, gradients included (token-wise linears keep their plain kernels)."""
    graph = CASES[name][0]()
    x, y = CASES[name][1]()[0]
    grads = []
    for fuse in (False, True):
        store = store_for(graph, seed=3)
        loss = Executor(graph, store, fuse=fuse).train_step(x, y, 0)
        grads.append((loss, store.grad.copy()))
    assert_rel_close(grads[1][0], grads[0][0], rtol=1e-12)
    assert_rel_close(grads[1][1], grads[0][1], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("problem_name,make_graph", [
    ("digits", lambda p: cnn(p.n_outputs, flat_input=True)),
    ("iris", lambda p: ftt(p.n_features, p.n_outputs, d_token=8, heads=2)),
])
def test_trainer_fits_the_new_families(problem_name: str, make_graph: Callable) -> None:
    """The Trainer runs them end to end (batches, schedule, evaluation) on real problems."""
    problem = load_problem(problem_name, seed=0)
    cfg = TrainConfig(epochs=10, max_steps=60, optimizer="adam", lr=1e-2, batch_size=32,
                      backend="numpy")
    trainer = Trainer(problem, make_graph(problem), cfg)
    before, _ = trainer.evaluate(problem.val)
    result = trainer.fit()
    assert result.status == "completed" and result.steps == trainer.total_steps > 0
    after, acc = trainer.evaluate(problem.val)
    assert after < 0.8 * before and acc > 0.5


def test_attention_dropout_in_a_plan_has_exact_gradients() -> None:
    """The compiled step's forward and backward draw one dropout mask per (seed, step, node):
    its gradients equal finite differences of its own loss at the same step."""
    graph = ftt(4, 3, d_token=4, heads=2, dropout=0.3)
    store = store_for(graph, seed=4)
    ex = Executor(graph, store, seed=9)
    x, y = _iris_batches()[0]
    ex.train_step(x, y, step=7)
    grad = {k: v.copy() for k, v in store.grads.items()}
    rng = np.random.default_rng(0)
    for name in ("attention.in_weight", "attention.out_weight", "numeric_tokenizer.weight"):
        flat = store.params[name].reshape(-1)
        for i in rng.choice(flat.size, size=3, replace=False):
            old = flat[i]
            flat[i] = old + 1e-6
            hi = ex.train_step(x, y, step=7)
            flat[i] = old - 1e-6
            lo = ex.train_step(x, y, step=7)
            flat[i] = old
            assert_rel_close(grad[name].reshape(-1)[i], (hi - lo) / 2e-6, rtol=1e-5,
                             atol=1e-8, what=f"{name}[{i}]")
    assert ex.train_step(x, y, step=7) != ex.train_step(x, y, step=8)  # a new mask per step
