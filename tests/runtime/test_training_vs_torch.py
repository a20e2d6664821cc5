"""The same model trained natively and in PyTorch, from the same initial weights on the same
batches: loss curves agree to 1e-5 relative (float64). MLPs over 100 steps and five
recipes; a small FT-Transformer (2 blocks, 2 heads, d_token 16) over 50 steps, on a
classification and a regression problem."""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.frontend.families import parse_spec, spec_graph
from aicf_induct.ir.graph import Graph
from aicf_induct.problems import load_problem
from aicf_induct.problems.problem import Problem
from aicf_induct.runtime.trainer import TrainConfig, Trainer
from tests.graphs import mlp
from tests.oracle import torch_forward

torch = pytest.importorskip("torch")

RECIPES = {
    "sgd_momentum": TrainConfig(optimizer="sgd", lr=0.05, momentum=0.9, batch_size=32),
    "sgd_nesterov_wd": TrainConfig(optimizer="sgd", lr=0.05, momentum=0.9, nesterov=True,
                                   weight_decay=1e-3, batch_size=32),
    "adam": TrainConfig(optimizer="adam", lr=3e-3, batch_size=32),
    "adamw": TrainConfig(optimizer="adamw", lr=3e-3, weight_decay=0.05, batch_size=32),
    "adam_cosine_warmup_clip": TrainConfig(optimizer="adam", lr=3e-3, schedule="cosine",
                                           warmup_steps=10, clip_norm=0.5, batch_size=32),
}


def _torch_optimizer(cfg: TrainConfig, params: list) -> object:
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.nesterov,
                               weight_decay=cfg.weight_decay)
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)


def _train_both(problem: Problem, graph: Graph, cfg: TrainConfig,
                steps: int) -> tuple[list[float], list[float], Trainer, dict]:
    """`steps` steps of our trainer and of PyTorch (our graph as torch ops, same initial
    weights, same batches, same learning rates): (our losses, theirs, trainer, torch tensors)."""
    trainer = Trainer(problem, graph, cfg)
    tg = trainer.executor.training_graph
    tensors = {k: torch.tensor(v.copy(), requires_grad=True)
               for k, v in trainer.store.params.items()}
    opt = _torch_optimizer(cfg, list(tensors.values()))
    ours: list[float] = []
    theirs: list[float] = []
    epoch = 0
    while len(ours) < steps:
        for idx in trainer.stream.epoch(epoch):
            if len(ours) == steps:
                break
            x, y = problem.train.X[idx], problem.train.y[idx]
            lr = trainer.schedule.lr(trainer.step_count)
            ours.append(trainer.train_step(x, y, epoch).loss)
            for group in opt.param_groups:
                group["lr"] = lr
            opt.zero_grad()
            loss = torch_forward(tg.graph, tensors, {"x": x, "labels": y}, training=True)["loss"]
            loss.backward()
            if cfg.clip_norm:
                torch.nn.utils.clip_grad_norm_(list(tensors.values()), cfg.clip_norm)
            opt.step()
            theirs.append(loss.item())
        epoch += 1
    return ours, theirs, trainer, tensors


def _assert_same_training(ours: list[float], theirs: list[float], trainer: Trainer,
                          tensors: dict, learned: float) -> None:
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    assert ours[-1] < learned * ours[0]  # it did learn
    for k, t in tensors.items():
        np.testing.assert_allclose(trainer.store.params[k], t.detach().numpy(), rtol=1e-5,
                                   atol=1e-8, err_msg=k)


@pytest.mark.parametrize("recipe", sorted(RECIPES))
@pytest.mark.parametrize("model", ["relu", "gelu_layernorm"])
def test_loss_curve_matches_pytorch(recipe: str, model: str) -> None:
    cfg = RECIPES[recipe]
    problem = load_problem("digits", seed=0)
    act, norm = ("relu", None) if model == "relu" else ("gelu", "layernorm")
    graph = mlp(problem.n_features, problem.n_outputs, depth=2, width=32, act=act, norm=norm)
    ours, theirs, trainer, tensors = _train_both(problem, graph, cfg, steps=100)
    _assert_same_training(ours, theirs, trainer, tensors, learned=0.5)


FTT_CASES = {  # problem -> recipe: AdamW with decay on a classification, Adam with a
    # cosine schedule, warm-up and clipping on a regression
    "wine": RECIPES["adamw"],
    "diabetes": RECIPES["adam_cosine_warmup_clip"],
}


@pytest.mark.parametrize("name", sorted(FTT_CASES))
def test_ftt_loss_curve_matches_pytorch(name: str) -> None:
    """Attention, the numeric tokenizer, layernorms and the mean over tokens train as PyTorch
    trains them (attention dropout 0: the masks are not shared)."""
    problem = load_problem(name, seed=0)
    spec = parse_spec("ftt:depth=2,d_token=16,heads=2,attention_dropout=0,act=gelu")
    graph = spec_graph(spec, problem.n_features, problem.n_outputs)
    ours, theirs, trainer, tensors = _train_both(problem, graph, FTT_CASES[name], steps=50)
    _assert_same_training(ours, theirs, trainer, tensors, learned=0.7)
