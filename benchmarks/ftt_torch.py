"""The PyTorch side of `benchmarks/ftt_vs_torch.py`: the FT-Transformer that the runtime's
`ftt` family builds (aicf_induct/frontend/families.py), written as a plain nn.Module under
the runtime's parameter names; its training loop, with the runtime's early stopping; and
step timers (eager, and the whole step captured as one CUDA graph).

The architecture is Gorishniy et al. 2021's FT-Transformer as the runtime has it: a numeric
tokenizer (one weight and one bias token per feature, U(±1/sqrt(d_token))), `depth`
pre-norm blocks x + attn(ln(x)), x + ffn(ln(x)) (every block keeps its first layernorm),
a final layernorm, then the mean over tokens where the paper reads a [CLS] token (the
runtime's IR has no parameter-only token), the activation and a linear head.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from aicf_induct.frontend.families import FTTSpec
from aicf_induct.problems.problem import Problem, Split
from aicf_induct.runtime.metrics import score

EVAL_CHUNK = 4096  # rows per evaluation batch, as the runtime's trainer

_ACTS: dict[str, Callable[[], nn.Module]] = {
    "relu": nn.ReLU, "gelu": nn.GELU, "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
    "tanh": nn.Tanh, "silu": nn.SiLU, "sigmoid": nn.Sigmoid,
}


class NumericTokenizer(nn.Module):
    """x (N, F) -> (N, F, d): one learned token per feature, scaled by its value, plus a bias."""

    def __init__(self, n_features: int, d: int) -> None:
        super().__init__()
        bound = d ** -0.5
        self.weight = nn.Parameter(torch.empty(n_features, d).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(n_features, d).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[..., None] * self.weight + self.bias


class Block(nn.Module):
    """Pre-norm: x + attn(ln(x)), then x + ffn(ln(x))."""

    def __init__(self, spec: FTTSpec) -> None:
        super().__init__()
        d = spec.d_token
        self.attn_norm = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, spec.heads, dropout=spec.attention_dropout,
                                          batch_first=True)
        self.ffn_norm = nn.LayerNorm(d)
        self.ffn = nn.Sequential(nn.Linear(d, spec.ffn_mult * d), _ACTS[spec.act](),
                                 nn.Linear(spec.ffn_mult * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.attn_norm(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.ffn(self.ffn_norm(x))


class FTTransformer(nn.Module):
    def __init__(self, spec: FTTSpec, n_features: int, n_outputs: int) -> None:
        super().__init__()
        self.tokenizer = NumericTokenizer(n_features, spec.d_token)
        self.blocks = nn.Sequential(*[Block(spec) for _ in range(spec.depth)])
        self.norm = nn.LayerNorm(spec.d_token)
        self.act = _ACTS[spec.act]()
        self.head = nn.Linear(spec.d_token, n_outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(self.blocks(self.tokenizer(x)))  # (N, F, d)
        return self.head(self.act(h.mean(1)))


@dataclass(frozen=True)
class Recipe:
    """What both sides train with: AdamW at a constant rate, early stopping on val loss."""

    epochs: int = 100  # at most
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 1e-5
    patience: int = 10  # epochs without a better val loss; 0: off


@dataclass
class Fit:
    test_score: float
    val_score: float
    steps: int
    epochs: int
    best_epoch: int
    status: str  # completed | early_stopped
    wall_s: float


def loss_fn(task: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    if task == "classification":
        return F.cross_entropy
    return lambda out, y: F.mse_loss(out, y.reshape(out.shape))


def make_model(spec: FTTSpec, problem: Problem, dtype: torch.dtype, device: torch.device,
               init: dict[str, np.ndarray] | None, seed: int) -> FTTransformer:
    """The model, from `init` (the runtime's initial values, by name) or else from its own
    initializers under torch.manual_seed(seed)."""
    torch.manual_seed(seed)
    model = FTTransformer(spec, problem.n_features, problem.n_outputs).to(device=device,
                                                                         dtype=dtype)
    if init is not None:  # copied in the model's dtype: float64 values stay exact
        state = {k: torch.from_numpy(np.asarray(v)) for k, v in init.items()}
        model.load_state_dict(state, strict=True)
    return model


def _tensors(split: Split, task: str, dtype: torch.dtype,
             device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.as_tensor(split.X, dtype=dtype, device=device)
    ydt = torch.int64 if task == "classification" else dtype
    return x, torch.as_tensor(split.y, dtype=ydt, device=device)


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, task: str,
             truth: np.ndarray) -> tuple[float, float]:
    """(mean loss, score) in eval mode, as the runtime's trainer computes them."""
    model.eval()
    lf, total, preds = loss_fn(task), 0.0, []
    for s in range(0, len(x), EVAL_CHUNK):
        out = model(x[s:s + EVAL_CHUNK])
        total += float(lf(out, y[s:s + EVAL_CHUNK])) * len(out)
        preds.append(out.float().cpu().numpy())
    model.train()
    return total / max(len(x), 1), score(task, np.concatenate(preds), truth)


def fit(model: nn.Module, problem: Problem, recipe: Recipe,
        batches: Callable[[int], Iterator[np.ndarray]], dtype: torch.dtype,
        device: torch.device) -> Fit:
    """Train with AdamW on `batches(epoch)` (row indices), evaluate on val after every
    epoch, keep the state with the best val loss, stop after `patience` epochs without a
    better one, and score the best state on test: the runtime trainer's loop."""
    t0 = time.perf_counter()
    task = problem.task
    xtr, ytr = _tensors(problem.train, task, dtype, device)
    xva, yva = _tensors(problem.val, task, dtype, device)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    lf = loss_fn(task)
    best: tuple[float, int, dict[str, torch.Tensor]] = (np.inf, -1, {})
    steps, status, epoch = 0, "completed", -1
    model.train()
    for epoch in range(recipe.epochs):
        for idx in batches(epoch):
            i = torch.tensor(idx, device=device)  # a copy: the batch is a read-only view
            opt.zero_grad(set_to_none=True)
            lf(model(xtr[i]), ytr[i]).backward()
            opt.step()
            steps += 1
        val_loss, _ = evaluate(model, xva, yva, task, problem.val.y)
        if val_loss < best[0]:
            best = (val_loss, epoch, copy.deepcopy(model.state_dict()))
        if recipe.patience and epoch - best[1] >= recipe.patience:
            status = "early_stopped"
            break
    if best[1] >= 0:
        model.load_state_dict(best[2])
    xte, yte = _tensors(problem.test, task, dtype, device)
    _, val_score = evaluate(model, xva, yva, task, problem.val.y)
    _, test_score = evaluate(model, xte, yte, task, problem.test.y)
    return Fit(test_score, val_score, steps, epoch + 1, best[1], status,
               time.perf_counter() - t0)


def torch_batches(n_rows: int, batch_size: int, seed: int) -> Callable[[int], Iterator[np.ndarray]]:
    """PyTorch's own batch order: a permutation per epoch from a generator seeded once."""
    gen = torch.Generator().manual_seed(seed)

    def epoch(_: int) -> Iterator[np.ndarray]:
        idx = torch.randperm(n_rows, generator=gen).numpy()
        for s in range(0, n_rows, batch_size):
            yield idx[s:s + batch_size]

    return epoch


def median_ms(step: Callable[[], float], warmup: int, steps: int) -> float:
    """Median wall time of one step in ms; every step ends with its loss on the host (as a
    training loop that logs the loss does), so no device work is left outside the timing."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def eager_step(model: nn.Module, task: str, x: np.ndarray, y: np.ndarray, lr: float,
               weight_decay: float, device: torch.device) -> Callable[[], float]:
    """One eager AdamW step on the host batch (x, y), copied to the device each time."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    lf, dtype = loss_fn(task), next(model.parameters()).dtype
    model.train()

    def step() -> float:
        xb = torch.from_numpy(x).to(device=device, dtype=dtype)
        yb = torch.from_numpy(y).to(device=device)
        opt.zero_grad(set_to_none=True)
        loss = lf(model(xb), yb)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def graph_step(model: nn.Module, task: str, x: np.ndarray, y: np.ndarray, lr: float,
               weight_decay: float, device: torch.device) -> Callable[[], float]:
    """The whole step (forward, loss, backward, capturable AdamW) captured once as a CUDA
    graph (torch.cuda.graphs) and replayed; the host batch is copied into its static inputs."""
    opt_kw: dict[str, Any] = {"lr": lr, "weight_decay": weight_decay, "capturable": True}
    try:
        opt = torch.optim.AdamW(model.parameters(), fused=True, **opt_kw)
    except (RuntimeError, TypeError):
        opt = torch.optim.AdamW(model.parameters(), foreach=True, **opt_kw)
    lf, dtype = loss_fn(task), next(model.parameters()).dtype
    sx = torch.from_numpy(x).to(device=device, dtype=dtype)
    sy = torch.from_numpy(y).to(device=device)
    model.train()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as capture requires
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            lf(model(sx), sy).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_loss = lf(model(sx), sy)
        static_loss.backward()
        opt.step()
    hx, hy = torch.from_numpy(x).to(dtype=dtype), torch.from_numpy(y)

    def step() -> float:
        sx.copy_(hx)
        sy.copy_(hy)
        graph.replay()
        return static_loss.item()

    return step
