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


def prune_at_warmup(obs):  # type: ignore[no-untyped-def]
    """A proposer that cuts 7 of 8 units at the warm-up trigger: on a trained model, harm."""
    from aicf_induct.runtime.policies import Proposal

    if obs.fired.trigger == "warmup":
        return [Proposal("prune", "blocks.0.linear", {"units": 7}, 1.0, "test")]
    return []


def until_the_control_arm_wins(problem: Problem, config: TrainConfig, **adapt: object):  # type: ignore[no-untyped-def]
    """(run, plain, recorder): a run whose harmful prune lost to its counterfactual guard's
    control arm, stopped there, and a run that never rewrote stepped to the same step."""
    from aicf_induct.records import MemoryRecorder
    from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun
    from aicf_induct.runtime.guard import GuardConfig
    from aicf_induct.runtime.policies import ProposalPolicy

    cf = AdaptConfig(**{"steps": 150, "warmup_steps": 60, "plateau_patience": 2,  # type: ignore[arg-type]
                        "plateau_min_delta": 0.02,
                        "guard": GuardConfig(steps=12, counterfactual=True), **adapt})
    rec = MemoryRecorder()
    run = AdaptiveRun(problem, toy_graph(problem), config, cf, ProposalPolicy(prune_at_warmup),
                      recorder=rec)
    plain = AdaptiveRun(problem, toy_graph(problem), config, cf, ProposalPolicy(lambda obs: []),
                        recorder=MemoryRecorder())  # `plain.logged.inner`: its steps
    run.start()
    plain.start()
    while not any(e.kind == "rollback" for e in rec.events):
        run.step()
    while plain.trainer.step_count < run.trainer.step_count:
        plain.step()
    return run, plain, rec
