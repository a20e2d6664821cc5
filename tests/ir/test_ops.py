"""Every op's reference forward and backward against PyTorch autograd (float64) and finite
differences."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from aicf_induct.ir.ops import OPS, OpContext
from tests.oracle import assert_rel_close, finite_difference, torch_op

torch = pytest.importorskip("torch")


@dataclass
class Case:
    op: str
    shapes: list[tuple[int, ...]]
    attrs: dict[str, Any] = field(default_factory=dict)
    params: dict[str, tuple[int, ...]] = field(default_factory=dict)
    training: bool = True
    labels: int = 0  # >0: second input is int64 labels with this many classes
    positive: tuple[str, ...] = ()  # params that must be > 0 (variances)

    @property
    def name(self) -> str:
        return f"{self.op}-{self.attrs}-{'train' if self.training else 'eval'}"


CASES = [
    Case("linear", [(5, 4)], {"out_features": 3}, {"weight": (3, 4), "bias": (3,)}),
    Case("linear", [(5, 4)], {"out_features": 3, "bias": False}, {"weight": (3, 4)}),
    Case("relu", [(6, 5)]),
    Case("gelu", [(6, 5)], {"approximate": "none"}),
    Case("gelu", [(6, 5)], {"approximate": "tanh"}),
    Case("tanh", [(6, 5)]),
    Case("silu", [(6, 5)]),
    Case("sigmoid", [(6, 5)]),
    Case("softmax", [(6, 5)]),
    Case("layernorm", [(6, 5)], {}, {"weight": (5,), "bias": (5,)}),
    Case("layernorm", [(6, 5)], {"affine": False}),
    Case("batchnorm", [(8, 5)], {}, {"weight": (5,), "bias": (5,), "running_mean": (5,),
                                     "running_var": (5,)}, positive=("running_var",)),
    Case("batchnorm", [(8, 5)], {}, {"weight": (5,), "bias": (5,), "running_mean": (5,),
                                     "running_var": (5,)}, training=False,
         positive=("running_var",)),
    Case("add", [(4, 3), (4, 3)]),
    Case("concat", [(4, 3), (4, 2), (4, 1)]),
    Case("cross_entropy", [(7, 4)], labels=4),
    Case("cross_entropy", [(7, 4)], {"label_smoothing": 0.1}, labels=4),
    Case("mse", [(6, 2), (6, 2)]),
    Case("mse", [(6, 1), (6,)]),
]


def _make(case: Case, rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    ins = [rng.normal(size=s) for s in case.shapes]
    if case.labels:
        ins.append(rng.integers(0, case.labels, size=case.shapes[0][0]))
    params = {r: (rng.uniform(0.5, 2.0, size=s) if r in case.positive else rng.normal(size=s))
              for r, s in case.params.items()}
    return ins, params


def _grads(case: Case, ins: list[np.ndarray], params: dict[str, np.ndarray], gout: np.ndarray):
    op = OPS[case.op]
    attrs = op.full_attrs(case.attrs)
    ctx = OpContext(training=case.training)
    out = op.forward(ctx, ins, params, attrs)
    diff = op.differentiable_inputs
    needs = [x.dtype != np.int64 and (diff is None or k in diff) for k, x in enumerate(ins)]
    assert op.backward is not None
    gins, gps = op.backward(OpContext(training=case.training), ins, params, out, gout, attrs,
                            needs)
    return out, gins, gps


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_op_matches_torch(case: Case) -> None:
    rng = np.random.default_rng(0)
    ins, params = _make(case, rng)
    op = OPS[case.op]
    out_shape = op.forward(OpContext(training=case.training), ins, params,
                           op.full_attrs(case.attrs)).shape
    gout = rng.normal(size=out_shape)
    out, gins, gps = _grads(case, ins, params, gout)

    t_ins = [torch.tensor(x) if x.dtype == np.int64 else torch.tensor(x, requires_grad=True)
             for x in ins]
    trainable = {r for r in params if not r.startswith("running")}
    t_params = {r: torch.tensor(v, requires_grad=r in trainable) for r, v in params.items()}
    t_out = torch_op(case.op, t_ins, t_params, case.attrs, case.training)
    assert_rel_close(out, t_out.detach().numpy(), what="forward")
    (t_out * torch.tensor(gout)).sum().backward()
    diff = op.differentiable_inputs
    for k, (g, t) in enumerate(zip(gins, t_ins, strict=True)):
        if t.dtype == torch.int64 or (diff is not None and k not in diff):
            assert g is None
            continue
        assert_rel_close(g, t.grad.numpy(), what=f"grad of input {k}")
    for r in trainable:
        assert_rel_close(gps[r], t_params[r].grad.numpy(), what=f"grad of {r}")
    assert set(gps) == trainable


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_op_matches_finite_differences(case: Case) -> None:
    rng = np.random.default_rng(1)
    ins, params = _make(case, rng)
    op = OPS[case.op]
    attrs = op.full_attrs(case.attrs)
    out0 = op.forward(OpContext(training=case.training), ins, params, attrs)
    gout = rng.normal(size=out0.shape)

    def objective() -> float:
        return float((op.forward(OpContext(training=case.training), ins, params, attrs)
                      * gout).sum())

    _, gins, gps = _grads(case, ins, params, gout)
    for k, x in enumerate(ins):
        if gins[k] is not None:
            assert_rel_close(gins[k], finite_difference(objective, x), rtol=1e-5, atol=1e-7,
                             what=f"input {k}")
    for r, g in gps.items():
        assert_rel_close(g, finite_difference(objective, params[r]), rtol=1e-5, atol=1e-7,
                         what=r)


def test_dropout_train_masks_and_rescales_and_is_reproducible() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(200, 50))
    op = OPS["dropout"]
    attrs = {"p": 0.3}
    ctx = OpContext(training=True, seed=7, step=3, node_id="drop")
    y = op.forward(ctx, [x], {}, attrs)
    kept = y != 0
    assert abs(kept.mean() - 0.7) < 0.02
    assert_rel_close(y[kept], x[kept] / 0.7)
    # Same key, same mask; another step, another mask.
    assert np.array_equal(op.forward(OpContext(training=True, seed=7, step=3, node_id="drop"),
                                     [x], {}, attrs), y)
    other = op.forward(OpContext(training=True, seed=7, step=4, node_id="drop"), [x], {}, attrs)
    assert not np.array_equal(other, y)
    # Backward regenerates the same mask.
    g = rng.normal(size=x.shape)
    (gx,), _ = op.backward(OpContext(training=True, seed=7, step=3, node_id="drop"), [x], {},
                           y, g, attrs, [True])
    assert_rel_close(gx, g * kept / 0.7)
    # Eval mode is the identity.
    assert np.array_equal(op.forward(OpContext(training=False), [x], {}, attrs), x)


def test_batchnorm_updates_running_statistics_like_torch() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(2.0, 3.0, size=(16, 4))
    params = {"weight": np.ones(4), "bias": np.zeros(4), "running_mean": np.zeros(4),
              "running_var": np.ones(4)}
    ctx = OpContext(training=True)
    OPS["batchnorm"].forward(ctx, [x], params, OPS["batchnorm"].full_attrs({}))
    rm, rv = torch.zeros(4, dtype=torch.float64), torch.ones(4, dtype=torch.float64)
    torch.nn.functional.batch_norm(torch.tensor(x), rm, rv, training=True, momentum=0.1)
    assert_rel_close(ctx.state_updates["running_mean"], rm.numpy())
    assert_rel_close(ctx.state_updates["running_var"], rv.numpy())
