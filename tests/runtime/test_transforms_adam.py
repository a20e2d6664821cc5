"""With Adam state remapped, a function-preserving rewrite at step T leaves the next 50
steps' loss within noise of a control run that was not rewritten.

Loss here is the full training split's loss after each step (smooth, so differences are
the rewrite's and not batch noise). Two noise levels are measured in the same test:
- seed-to-seed: control runs with other seeds (init and batch order), over the same steps;
- data order: the control's own state at T continued on a different batch order.
The rewritten run must stay closer to the control than another seed does (two-sided),
and must not be worse than the control by more than a different data order makes it
(one-sided: a rewrite may learn faster, never slower beyond noise). Resetting the optimizer
state instead of remapping it must do worse than remapping (so the remapping matters).
"""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.runtime.data import BatchStream
from aicf_induct.runtime.model_state import capture, install
from aicf_induct.runtime.trainer import Trainer
from aicf_induct.runtime.transforms import Deepen, Widen
from tests.runtime.test_adaptive_fixtures import make_trainer, run_steps, toy_graph, toy_problem

T, K = 60, 50
SPEC = "mlp:depth=2,width=16"


def _curve(tr: Trainer, stream: BatchStream) -> np.ndarray:
    p, bpe, out = tr.problem, stream.batches_per_epoch(), []
    for _ in range(K):
        epoch, batch = divmod(tr.step_count, bpe)
        idx = next(stream.epoch(epoch, batch))
        tr.train_step(p.train.X[idx], p.train.y[idx], epoch)
        out.append(tr.evaluate(p.train)[0])
    return np.array(out)


@pytest.fixture(scope="module")
def runs() -> dict[str, np.ndarray]:
    problem = toy_problem("classification", n=600, seed=1)

    def at_t(seed: int = 0) -> Trainer:
        tr = make_trainer(problem, toy_graph(problem, SPEC), seed=seed, lr=3e-3)
        run_steps(tr, T)
        return tr

    out: dict[str, np.ndarray] = {}
    tr = at_t()
    out["control"] = _curve(tr, tr.stream)
    for seed in (1, 2):
        tr = at_t(seed)
        out[f"seed{seed}"] = _curve(tr, tr.stream)
    tr = at_t()
    out["order"] = _curve(tr, BatchStream(len(problem.train), 32, seed=100))
    for name in ("widen", "widen_reset", "deepen"):
        tr = at_t()
        state = capture(tr)
        if name.startswith("widen"):
            for site in ("blocks.0.linear", "blocks.1.linear"):
                state = Widen(factor=2.0).apply(state, site, np.random.default_rng(0))
            if name == "widen_reset":
                state.optimizer = {**state.optimizer, "slots": {}, "steps": {}}
        else:
            state = Deepen().apply(state, "blocks.1.act", np.random.default_rng(0))
        install(tr, state)
        out[name] = _curve(tr, tr.stream)
    return out


def _rel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a - b) / b


@pytest.mark.parametrize("rewrite", ["widen", "deepen"])
def test_next_50_steps_stay_within_noise_of_the_control(runs, rewrite: str) -> None:
    control = runs["control"]
    seed_noise = np.mean([np.abs(_rel(runs[s], control)).mean() for s in ("seed1", "seed2")])
    order_noise = np.abs(_rel(runs["order"], control)).mean()
    diff = _rel(runs[rewrite], control)
    print(f"{rewrite}: mean |rel diff| {np.abs(diff).mean():.4f}, signed {diff.mean():+.4f}; "
          f"seed-to-seed {seed_noise:.4f}, data order {order_noise:.4f}")
    assert np.abs(diff).mean() < seed_noise
    assert diff.mean() < order_noise
    assert np.all(np.isfinite(runs[rewrite]))


def test_remapped_adam_state_beats_a_reset_one(runs) -> None:
    control = runs["control"]
    remapped = np.abs(_rel(runs["widen"], control)).mean()
    reset = np.abs(_rel(runs["widen_reset"], control)).mean()
    assert remapped < reset
