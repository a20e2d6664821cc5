"""Normalisation: layernorm over the feature axis, batchnorm over the batch axis."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aicf_induct.ir.graph import TensorType
from aicf_induct.ir.ops.base import (
    Array,
    Attrs,
    Grads,
    OpContext,
    OpDef,
    ParamInfo,
    boolean,
    feature_dim,
    real,
    register,
    require,
    same_as_input,
)


def _affine_params(ins: Sequence[TensorType], attrs: Attrs) -> dict[str, ParamInfo]:
    d = feature_dim(ins[0])
    if not attrs.get("affine", True):
        return {}
    return {"weight": ParamInfo((d,), "ones"), "bias": ParamInfo((d,), "zeros")}


def _norm_backward(xp: object, xhat: Array, rstd: Array, g: Array, params: Mapping[str, Array],
                   axis: int, needs: Sequence[bool]) -> Grads:
    """Shared VJP of y = xhat * w + b with xhat normalised along `axis` (statistics from x)."""
    grads: dict[str, Array] = {}
    gxhat = g
    if "weight" in params:
        red = tuple(i for i in range(g.ndim) if i != g.ndim - 1)
        grads["weight"] = (g * xhat).sum(axis=red)
        grads["bias"] = g.sum(axis=red)
        gxhat = g * params["weight"]
    if not needs[0]:
        return [None], grads
    m1 = gxhat.mean(axis=axis, keepdims=True)
    m2 = (gxhat * xhat).mean(axis=axis, keepdims=True)
    return [rstd * (gxhat - m1 - xhat * m2)], grads


def _ln_stats(xp: object, x: Array, eps: float) -> tuple[Array, Array]:
    mu = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    rstd = 1.0 / xp.sqrt(var + eps)  # type: ignore[attr-defined]
    return (x - mu) * rstd, rstd


def _ln_forward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                attrs: Attrs) -> Array:
    xhat, _ = _ln_stats(ctx.xp, ins[0], attrs["eps"])
    return xhat * params["weight"] + params["bias"] if "weight" in params else xhat


def _ln_backward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array], out: Array,
                 gout: Array, attrs: Attrs,
                 needs: Sequence[bool]) -> Grads:
    xhat, rstd = _ln_stats(ctx.xp, ins[0], attrs["eps"])
    return _norm_backward(ctx.xp, xhat, rstd, gout, params, -1, needs)


def _eps_infer(ins: Sequence[TensorType], attrs: Attrs) -> TensorType:
    eps = attrs.get("eps")
    require(isinstance(eps, float) and eps > 0, f"attr 'eps' must be a float > 0, got {eps!r}")
    return same_as_input(ins, attrs)


register(OpDef(
    name="layernorm", kind="norm", arity=1, attrs={"eps": 1e-5, "affine": True},
    checks={"eps": real(0.0, lo_open=True), "affine": boolean},
    infer=_eps_infer, forward=_ln_forward, backward=_ln_backward, params=_affine_params,
    doc="normalise over the last axis; weight, bias (d,)",
))


def _bn_params(ins: Sequence[TensorType], attrs: Attrs) -> dict[str, ParamInfo]:
    d = feature_dim(ins[0])
    out = _affine_params(ins, attrs)
    out["running_mean"] = ParamInfo((d,), "zeros", trainable=False)
    out["running_var"] = ParamInfo((d,), "ones", trainable=False)
    return out


def _bn_infer(ins: Sequence[TensorType], attrs: Attrs) -> TensorType:
    require(len(ins[0].shape) == 2, f"batchnorm expects (batch, features), got {ins[0]}")
    m = attrs.get("momentum")
    require(isinstance(m, float) and 0.0 <= m <= 1.0,
            f"batchnorm attr 'momentum' must be in [0, 1], got {m!r}")
    return _eps_infer(ins, attrs)


def _bn_batch_stats(xp: object, x: Array, eps: float) -> tuple[Array, Array, Array, Array]:
    mu = x.mean(axis=0)
    var = x.var(axis=0)
    rstd = 1.0 / xp.sqrt(var + eps)  # type: ignore[attr-defined]
    return (x - mu) * rstd, rstd, mu, var


def _bn_forward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                attrs: Attrs) -> Array:
    x, eps = ins[0], attrs["eps"]
    if ctx.training:
        xhat, _, mu, var = _bn_batch_stats(ctx.xp, x, eps)
        n, m = x.shape[0], attrs["momentum"]
        unbiased = var * (n / max(n - 1, 1))  # PyTorch tracks the unbiased variance
        ctx.state_updates["running_mean"] = (1 - m) * params["running_mean"] + m * mu
        ctx.state_updates["running_var"] = (1 - m) * params["running_var"] + m * unbiased
    else:
        xhat = (x - params["running_mean"]) / ctx.xp.sqrt(params["running_var"] + eps)
    return xhat * params["weight"] + params["bias"] if "weight" in params else xhat


def _bn_backward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array], out: Array,
                 gout: Array, attrs: Attrs,
                 needs: Sequence[bool]) -> Grads:
    x, eps = ins[0], attrs["eps"]
    if ctx.training:
        xhat, rstd, _, _ = _bn_batch_stats(ctx.xp, x, eps)
        return _norm_backward(ctx.xp, xhat, rstd, gout, params, 0, needs)
    # Eval mode: a fixed affine map per feature.
    rstd = 1.0 / ctx.xp.sqrt(params["running_var"] + eps)
    xhat = (x - params["running_mean"]) * rstd
    grads: dict[str, Array] = {}
    scale = rstd
    if "weight" in params:
        grads = {"weight": (gout * xhat).sum(axis=0), "bias": gout.sum(axis=0)}
        scale = rstd * params["weight"]
    return [gout * scale if needs[0] else None], grads


register(OpDef(
    name="batchnorm", kind="norm", arity=1, attrs={"eps": 1e-5, "momentum": 0.1, "affine": True},
    checks={"eps": real(0.0, lo_open=True), "momentum": real(0.0, 1.0), "affine": boolean},
    infer=_bn_infer, forward=_bn_forward, backward=_bn_backward, params=_bn_params,
    doc="normalise over the batch axis; running statistics are non-trainable state",
))
