"""Shared helpers for the rewrite, snapshot and adaptive-loop tests (no tests here): small
in-memory problems and models, and a trainer stepped by hand."""

from __future__ import annotations

import numpy as np
from sklearn.datasets import make_classification, make_regression

from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
from aicf_induct.ir.graph import Graph
from aicf_induct.problems.problem import Problem, Split
from aicf_induct.runtime.trainer import TrainConfig, Trainer


def toy_problem(task: str = "classification", n: int = 400, features: int = 8,
                classes: int = 3, seed: int = 0) -> Problem:
    """Standardised synthetic data, split 60/20/20."""
    if task == "classification":
        X, y = make_classification(n_samples=n, n_features=features, n_informative=features // 2,
                                   n_classes=classes, n_clusters_per_class=2, random_state=seed)
        y = y.astype(np.int64)
    else:
        X, y = make_regression(n_samples=n, n_features=features, noise=5.0, random_state=seed)
        y = np.tanh(y / y.std()) * 2  # a little non-linearity
        y = (y - y.mean()) / y.std()
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    a, b = int(0.6 * n), int(0.8 * n)
    return Problem(problem_id=f"toy-{task}-{seed}", name=f"toy_{task}", source="synthetic",
                   task=task, target="y", feature_names=tuple(f"x{i}" for i in range(features)),
                   n_classes=classes if task == "classification" else 0,
                   train=Split(X[:a], y[:a]), val=Split(X[a:b], y[a:b]),
                   test=Split(X[b:], y[b:]))


def toy_graph(problem: Problem, spec: str = "mlp:depth=2,width=8") -> Graph:
    return mlp_graph(parse_model_spec(spec), problem.n_features, problem.n_outputs)


def run_steps(trainer: Trainer, n: int) -> list[float]:
    """Train `n` more steps in batch order from the trainer's current step; return losses."""
    p, bpe = trainer.problem, trainer.stream.batches_per_epoch()
    out = []
    for _ in range(n):
        epoch, batch = divmod(trainer.step_count, bpe)
        idx = next(trainer.stream.epoch(epoch, batch))
        out.append(trainer.train_step(p.train.X[idx], p.train.y[idx], epoch).loss)
    return out


def make_trainer(problem: Problem, graph: Graph, **config: object) -> Trainer:
    cfg = TrainConfig(**{"lr": 3e-3, "batch_size": 32, **config})  # type: ignore[arg-type]
    return Trainer(problem, graph, cfg)
