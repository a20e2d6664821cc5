"""NumPy kernels for the hot ops of an MLP step: they compute what the op table's reference
computes, writing into preplanned buffers instead of allocating. Tests check each against
its reference."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aicf_induct.ir.ops import OpContext
from aicf_induct.kernels.registry import REGISTRY, Kernel, KernelFn, KernelQuery

A = np.ndarray


def linear_fwd(ctx: OpContext, ins: Sequence[A], params: dict[str, A], attrs: dict[str, Any],
               out: A) -> None:
    np.matmul(ins[0], params["weight"].T, out=out)
    if "bias" in params:
        out += params["bias"]


def linear_vjp(ctx: OpContext, ins: Sequence[A], params: dict[str, A], y: A, gy: A,
               attrs: dict[str, Any], needs: Sequence[bool], gins: Sequence[A | None],
               gparams: dict[str, A]) -> None:
    x = ins[0]
    np.matmul(gy.T, x, out=gparams["weight"])
    if "bias" in gparams:
        np.sum(gy, axis=0, out=gparams["bias"])
    if gins[0] is not None:
        np.matmul(gy, params["weight"], out=gins[0])


def relu_fwd(ctx: OpContext, ins: Sequence[A], params: dict[str, A], attrs: dict[str, Any],
             out: A) -> None:
    np.maximum(ins[0], 0.0, out=out)


def relu_vjp(ctx: OpContext, ins: Sequence[A], params: dict[str, A], y: A, gy: A,
             attrs: dict[str, Any], needs: Sequence[bool], gins: Sequence[A | None],
             gparams: dict[str, A]) -> None:
    if gins[0] is not None:
        np.multiply(gy, y > 0, out=gins[0])  # y > 0 exactly where x > 0


def tanh_fwd(ctx: OpContext, ins: Sequence[A], params: dict[str, A], attrs: dict[str, Any],
             out: A) -> None:
    np.tanh(ins[0], out=out)


def tanh_vjp(ctx: OpContext, ins: Sequence[A], params: dict[str, A], y: A, gy: A,
             attrs: dict[str, Any], needs: Sequence[bool], gins: Sequence[A | None],
             gparams: dict[str, A]) -> None:
    g = gins[0]
    if g is not None:
        np.multiply(y, y, out=g)
        np.subtract(1.0, g, out=g)
        g *= gy


def sigmoid_fwd(ctx: OpContext, ins: Sequence[A], params: dict[str, A], attrs: dict[str, Any],
                out: A) -> None:
    from scipy import special  # here: a command's `--help` need not load scipy

    special.expit(ins[0], out=out)


def add_fwd(ctx: OpContext, ins: Sequence[A], params: dict[str, A], attrs: dict[str, Any],
            out: A) -> None:
    np.add(ins[0], ins[1], out=out)


def add_vjp(ctx: OpContext, ins: Sequence[A], params: dict[str, A], y: A, gy: A,
            attrs: dict[str, Any], needs: Sequence[bool], gins: Sequence[A | None],
            gparams: dict[str, A]) -> None:
    for g in gins:
        if g is not None:
            np.copyto(g, gy)


def _softmax_into(logits: A, out: A) -> None:
    np.subtract(logits, logits.max(axis=1, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=1, keepdims=True)


def cross_entropy_fwd(ctx: OpContext, ins: Sequence[A], params: dict[str, A],
                      attrs: dict[str, Any], out: A) -> None:
    logits, labels = ins
    n = logits.shape[0]
    z = logits - logits.max(axis=1, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=1))
    eps = attrs.get("label_smoothing", 0.0)
    nll = lse - z[np.arange(n), labels]
    loss = nll.mean()
    if eps:
        smooth = (lse - z.mean(axis=1)).mean()
        loss = (1.0 - eps) * loss + eps * smooth
    out[...] = loss


def cross_entropy_vjp(ctx: OpContext, ins: Sequence[A], params: dict[str, A], y: A, gy: A,
                      attrs: dict[str, Any], needs: Sequence[bool], gins: Sequence[A | None],
                      gparams: dict[str, A]) -> None:
    g = gins[0]
    if g is None:
        return
    logits, labels = ins
    n, c = logits.shape
    eps = attrs.get("label_smoothing", 0.0)
    _softmax_into(logits, g)
    g[np.arange(n), labels] -= 1.0 - eps
    if eps:
        g -= eps / c
    g *= gy / n


def mse_fwd(ctx: OpContext, ins: Sequence[A], params: dict[str, A], attrs: dict[str, Any],
            out: A) -> None:
    d = ins[0] - ins[1].reshape(ins[0].shape)
    out[...] = np.vdot(d, d) / d.size


def mse_vjp(ctx: OpContext, ins: Sequence[A], params: dict[str, A], y: A, gy: A,
            attrs: dict[str, Any], needs: Sequence[bool], gins: Sequence[A | None],
            gparams: dict[str, A]) -> None:
    g = gins[0]
    if g is not None:
        np.subtract(ins[0], ins[1].reshape(ins[0].shape), out=g)
        g *= 2.0 * gy / g.size


def _plain_2d(q: KernelQuery) -> bool:
    """These kernels assume float operands of rank <= 2 (batch, features)."""
    return q.dtype in ("float32", "float64") and all(len(s) <= 2 for s in q.shapes)


def _register() -> None:
    table: dict[tuple[str, str], KernelFn] = {
        ("linear", "fwd"): linear_fwd, ("linear", "vjp"): linear_vjp,
        ("relu", "fwd"): relu_fwd, ("relu", "vjp"): relu_vjp,
        ("tanh", "fwd"): tanh_fwd, ("tanh", "vjp"): tanh_vjp,
        ("sigmoid", "fwd"): sigmoid_fwd,
        ("add", "fwd"): add_fwd, ("add", "vjp"): add_vjp,
        ("cross_entropy", "fwd"): cross_entropy_fwd, ("cross_entropy", "vjp"): cross_entropy_vjp,
        ("mse", "fwd"): mse_fwd, ("mse", "vjp"): mse_vjp,
    }
    for (op, direction), fn in table.items():
        REGISTRY.register(Kernel(f"{op}.{direction}.numpy", op, direction, "cpu", fn, priority=1,
                                 applies=_plain_2d))


_register()
