"""`attention`: multi-head scaled dot-product self-attention with its projections, as
PyTorch's `nn.MultiheadAttention(d, heads, batch_first=True)` called as attn(x, x, x).

One node owns the packed q/k/v projection (`in_weight` (3d, d), `in_bias` (3d,)) and the
output projection (`out_weight` (d, d), `out_bias` (d,)), so a transformer block's structure
is one node the patterns can see (heads, token width) rather than a dozen generic ones.
Attention dropout acts on the attention probabilities; its mask comes from the node's
counter-based RNG, regenerated in backward as dropout does.
"""

from __future__ import annotations

import math
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
    integer,
    is_int,
    real,
    register,
    require,
    require_float,
)
from aicf_induct.ir.ops.structural import dropout_mask


def _attn_infer(ins: Sequence[TensorType], attrs: Attrs) -> TensorType:
    t = ins[0]
    require_float(t)
    require(len(t.shape) == 3 and t.shape[2] is not None,
            f"attention expects (batch, tokens, d), got {t}")
    h, p = attrs.get("heads"), attrs.get("dropout")
    require(is_int(h) and h > 0 and (t.shape[2] or 0) % h == 0,
            f"attention attr 'heads' must divide d={t.shape[2]}, got {h!r}")
    require(isinstance(p, float) and 0.0 <= p < 1.0,
            f"attention attr 'dropout' must be in [0, 1), got {p!r}")
    return t


def _attn_params(ins: Sequence[TensorType], attrs: Attrs) -> dict[str, ParamInfo]:
    d = int(ins[0].shape[2] or 0)
    out = {"in_weight": ParamInfo((3 * d, d), "xavier_uniform"),
           "out_weight": ParamInfo((d, d), f"uniform:{1.0 / math.sqrt(d)!r}")}
    if attrs.get("bias", True):
        out["in_bias"] = ParamInfo((3 * d,), "zeros")
        out["out_bias"] = ParamInfo((d,), "zeros")
    return out  # PyTorch's nn.MultiheadAttention initialisation


def _heads(x: Array, h: int) -> Array:
    b, t, d = x.shape  # (B, T, d) -> (B, h, T, d/h)
    return x.reshape(b, t, h, d // h).transpose(0, 2, 1, 3)


def _merge(x: Array) -> Array:
    b, h, t, dh = x.shape  # (B, h, T, dh) -> (B, T, h*dh)
    return x.transpose(0, 2, 1, 3).reshape(b, t, h * dh)


def _forward_parts(ctx: OpContext, x: Array, params: Mapping[str, Array],
                   attrs: Attrs) -> tuple[Array, Array, Array, Array, Array | None, Array]:
    """q, k, v (B, h, T, dh), the probabilities p (B, h, T, T), the dropout mask, and the
    merged head outputs (B, T, d) before the output projection."""
    d, h = x.shape[-1], attrs["heads"]
    qkv = x @ params["in_weight"].T
    if "in_bias" in params:
        qkv = qkv + params["in_bias"]
    q, k, v = (_heads(qkv[..., i * d:(i + 1) * d], h) for i in range(3))
    s = (q @ k.swapaxes(-1, -2)) / math.sqrt(d // h)
    s = s - s.max(axis=-1, keepdims=True)
    p = ctx.xp.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    mask = None
    if ctx.training and attrs["dropout"] > 0.0:
        mask = dropout_mask(ctx, p.shape, attrs["dropout"]).astype(p.dtype, copy=False)
    o = _merge((p * mask if mask is not None else p) @ v)
    return q, k, v, p, mask, o


def _attn_forward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                  attrs: Attrs) -> Array:
    o = _forward_parts(ctx, ins[0], params, attrs)[-1]
    y = o @ params["out_weight"].T
    return y + params["out_bias"] if "out_bias" in params else y


def _attn_backward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                   out: Array, gout: Array, attrs: Attrs, needs: Sequence[bool]) -> Grads:
    x, h = ins[0], attrs["heads"]
    d = x.shape[-1]
    q, k, v, p, mask, o = _forward_parts(ctx, x, params, attrs)
    g2 = gout.reshape(-1, d)
    grads = {"out_weight": g2.T @ o.reshape(-1, d)}
    if "out_bias" in params:
        grads["out_bias"] = g2.sum(axis=0)
    go = _heads(gout @ params["out_weight"], h)  # (B, h, T, dh)
    pd = p * mask if mask is not None else p
    gv = pd.swapaxes(-1, -2) @ go
    gp = go @ v.swapaxes(-1, -2)
    if mask is not None:
        gp = gp * mask
    gs = p * (gp - (gp * p).sum(axis=-1, keepdims=True)) / math.sqrt(d // h)
    gq, gk = gs @ k, gs.swapaxes(-1, -2) @ q
    gqkv = ctx.xp.concatenate([_merge(gq), _merge(gk), _merge(gv)], axis=-1)  # (B, T, 3d)
    gqkv2 = gqkv.reshape(-1, 3 * d)
    grads["in_weight"] = gqkv2.T @ x.reshape(-1, d)
    if "in_bias" in params:
        grads["in_bias"] = gqkv2.sum(axis=0)
    return [gqkv @ params["in_weight"] if needs[0] else None], grads


register(OpDef(
    name="attention", kind="attention", arity=1, attrs={"heads": 1, "dropout": 0.0, "bias": True},
    checks={"heads": integer(), "dropout": real(0.0, 1.0, hi_open=True), "bias": boolean},
    infer=_attn_infer, forward=_attn_forward, backward=_attn_backward, params=_attn_params,
    doc="multi-head self-attention of x (B, T, d); in_weight (3d, d), out_weight (d, d)",
))
