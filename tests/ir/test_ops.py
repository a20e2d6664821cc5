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
    ids: int = 0  # >0: the first input is int64 ids in [0, ids) (embedding)

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
    # beyond MLPs (issue 19)
    Case("concat", [(4, 2, 3), (4, 1, 3)], {"axis": 1}),
    Case("concat", [(2, 3, 2, 2), (2, 3, 1, 2)], {"axis": -2}),
    Case("reshape", [(3, 4, 6)], {"shape": [2, -1, 3]}),
    Case("transpose", [(3, 4, 5, 2)], {"perm": [0, 2, 3, 1]}),
    Case("mean", [(3, 4, 5)], {"axis": 1}),
    Case("mean", [(3, 4, 5)], {"axis": -1, "keepdims": True}),
    Case("sum", [(3, 4, 5)], {"axis": 2}),
    Case("sum", [(3, 4)], {"axis": 1, "keepdims": True}),
    Case("matmul", [(3, 4, 5), (3, 5, 2)]),
    Case("matmul", [(3, 1, 4, 5), (2, 5, 3)]),  # broadcast leading axes both ways
    Case("matmul", [(3, 4, 5), (5, 2)]),
    Case("embedding", [(5, 3)], {"num_embeddings": 4, "embedding_dim": 3},
         {"weight": (4, 3)}, ids=4),
    Case("numeric_tokenizer", [(5, 3)], {"d_token": 4}, {"weight": (3, 4), "bias": (3, 4)}),
    Case("numeric_tokenizer", [(5, 3)], {"d_token": 4, "bias": False}, {"weight": (3, 4)}),
    Case("attention", [(2, 5, 6)], {"heads": 2},
         {"in_weight": (18, 6), "in_bias": (18,), "out_weight": (6, 6), "out_bias": (6,)}),
    Case("attention", [(3, 4, 4)], {"heads": 1, "bias": False},
         {"in_weight": (12, 4), "out_weight": (4, 4)}),
    Case("attention", [(2, 3, 4)], {"heads": 4, "dropout": 0.3},  # eval: no dropout
         {"in_weight": (12, 4), "in_bias": (12,), "out_weight": (4, 4), "out_bias": (4,)},
         training=False),
    Case("conv2d", [(2, 3, 6, 5)], {"out_channels": 4, "kernel_size": [3, 2]},
         {"weight": (4, 3, 3, 2), "bias": (4,)}),
    Case("conv2d", [(2, 2, 7, 7)], {"out_channels": 3, "kernel_size": [3, 3], "stride": [2, 2],
                                    "padding": [1, 1], "bias": False},
         {"weight": (3, 2, 3, 3)}),
    Case("pool", [(2, 3, 6, 6)], {"mode": "max", "kernel_size": [2, 2], "stride": [2, 2]}),
    Case("pool", [(2, 2, 7, 7)], {"mode": "max", "kernel_size": [3, 3], "stride": [2, 2],
                                  "padding": [1, 1]}),
    Case("pool", [(2, 3, 6, 6)], {"mode": "avg", "kernel_size": [2, 2], "stride": [2, 2]}),
    Case("pool", [(2, 2, 7, 5)], {"mode": "avg", "kernel_size": [3, 3], "stride": [2, 1],
                                  "padding": [1, 1]}),
]


def _make(case: Case, rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    ins = [rng.integers(0, case.ids, size=s) if case.ids and k == 0 else rng.normal(size=s)
           for k, s in enumerate(case.shapes)]
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


def test_attention_dropout_backward_matches_finite_differences_of_its_own_mask() -> None:
    """Training-mode attention dropout: the mask is regenerated from the node's RNG key, so the
    backward is exact for the same key (PyTorch cannot draw our mask: FD is the oracle)."""
    rng = np.random.default_rng(4)
    op = OPS["attention"]
    attrs = op.full_attrs({"heads": 2, "dropout": 0.4})
    x = rng.normal(size=(2, 4, 4))
    params = {"in_weight": rng.normal(size=(12, 4)), "in_bias": rng.normal(size=12),
              "out_weight": rng.normal(size=(4, 4)), "out_bias": rng.normal(size=4)}

    def ctx() -> OpContext:
        return OpContext(training=True, seed=3, step=5, node_id="attn")

    out = op.forward(ctx(), [x], params, attrs)
    assert not np.allclose(out, op.forward(OpContext(training=False), [x], params, attrs))
    gout = rng.normal(size=out.shape)

    def objective() -> float:
        return float((op.forward(ctx(), [x], params, attrs) * gout).sum())

    assert op.backward is not None
    (gx,), gps = op.backward(ctx(), [x], params, out, gout, attrs, [True])
    assert_rel_close(gx, finite_difference(objective, x), rtol=1e-5, atol=1e-7)
    for r, g in gps.items():
        assert_rel_close(g, finite_difference(objective, params[r]), rtol=1e-5, atol=1e-7, what=r)


def test_embedding_refuses_ids_out_of_range() -> None:
    op = OPS["embedding"]
    with pytest.raises(IndexError, match=r"\[0, 4\)"):
        op.forward(OpContext(), [np.array([[0, 4]])], {"weight": np.zeros((4, 2))},
                   op.full_attrs({"num_embeddings": 4, "embedding_dim": 2}))


def test_tanh_s_gradient_keeps_its_digits_near_saturation() -> None:
    """The gradient is read from the output y: 1 - y*y loses what y*y rounds away near
    saturation (7e-10 relative at x = 9), (1 - y)(1 + y) keeps it, as the
    kernels compute it (they had disagreed with this reference at 4e-12 in float64)."""
    from fractions import Fraction

    x = np.array([[5.0, 9.0, 12.0, -15.0, 0.5]])
    y = np.tanh(x)
    (got,), _ = OPS["tanh"].backward(OpContext(), [x], {}, y, np.ones_like(x), {}, (True,))
    exact = [float(1 - Fraction(v) ** 2) for v in y.ravel()]  # for this y, exactly
    np.testing.assert_allclose(got.ravel(), exact, rtol=4e-16)
