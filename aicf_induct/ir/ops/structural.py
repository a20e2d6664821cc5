"""Structure: residual `add`, `concat` (any non-batch axis), `dropout` (seeded, train/eval)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aicf_induct.ir.graph import TensorType
from aicf_induct.ir.ops.base import (
    AXIS,
    Array,
    Attrs,
    Grads,
    OpContext,
    OpDef,
    real,
    register,
    require,
    require_float,
    same_as_input,
)
from aicf_induct.ir.ops.shape import norm_axis


def _add_infer(ins: Sequence[TensorType], attrs: Attrs) -> TensorType:
    a, b = ins
    require_float(a)
    require(a == b, f"add needs equal shapes and dtypes, got {a} and {b}")
    return a


def _add_forward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                 attrs: Attrs) -> Array:
    return ins[0] + ins[1]


def _add_backward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array], out: Array,
                  gout: Array, attrs: Attrs,
                  needs: Sequence[bool]) -> Grads:
    return [gout if n else None for n in needs], {}


register(OpDef(name="add", kind="merge", arity=2, attrs={}, checks={}, infer=_add_infer,
               forward=_add_forward, backward=_add_backward, doc="a + b (residual joins)"))


def _concat_infer(ins: Sequence[TensorType], attrs: Attrs) -> TensorType:
    first = ins[0]
    a = norm_axis(first, attrs.get("axis"), "concat")
    total = 0
    for t in ins:
        require_float(t)
        same = len(t.shape) == len(first.shape) and all(
            u == v for k, (u, v) in enumerate(zip(t.shape, first.shape, strict=True)) if k != a)
        require(t.dtype == first.dtype and same,
                f"concat inputs must agree except on axis {attrs['axis']}, got {first} and {t}")
        require(t.shape[a] is not None, f"concat needs known sizes on its axis, got {t}")
        total += t.shape[a] or 0
    shape = list(first.shape)
    shape[a] = total
    return TensorType(tuple(shape), first.dtype)


def _concat_forward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                    attrs: Attrs) -> Array:
    return ctx.xp.concatenate(list(ins), axis=attrs["axis"])


def _concat_backward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                     out: Array, gout: Array, attrs: Attrs,
                     needs: Sequence[bool]) -> Grads:
    grads: list[Array | None] = []
    a = attrs["axis"] % gout.ndim
    start = 0
    for x, need in zip(ins, needs, strict=True):
        stop = start + x.shape[a]
        index = (slice(None),) * a + (slice(start, stop),)
        grads.append(gout[index].copy() if need else None)
        start = stop
    return grads, {}


register(OpDef(name="concat", kind="merge", arity=None, attrs={"axis": -1},
               checks={"axis": AXIS}, infer=_concat_infer,
               forward=_concat_forward, backward=_concat_backward,
               doc="concatenate along attr axis (any but the batch axis)"))


def _dropout_infer(ins: Sequence[TensorType], attrs: Attrs) -> TensorType:
    p = attrs.get("p")
    require(isinstance(p, float) and 0.0 <= p < 1.0,
            f"dropout attr 'p' must be in [0, 1), got {p!r}")
    return same_as_input(ins, attrs)


def dropout_mask(ctx: OpContext, shape: tuple[int, ...], p: float) -> Array:
    """Keep-mask scaled by 1/(1-p); regenerated identically in backward from the RNG key."""
    keep = ctx.rng().random(shape) >= p
    mask = keep / (1.0 - p)
    return ctx.xp.asarray(mask)


def _dropout_forward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                     attrs: Attrs) -> Array:
    p = attrs["p"]
    if not ctx.training or p == 0.0:
        return ins[0].copy()
    return ins[0] * dropout_mask(ctx, ins[0].shape, p).astype(ins[0].dtype, copy=False)


def _dropout_backward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                      out: Array, gout: Array, attrs: Attrs,
                      needs: Sequence[bool]) -> Grads:
    if not needs[0]:
        return [None], {}
    p = attrs["p"]
    if not ctx.training or p == 0.0:
        return [gout], {}
    return [gout * dropout_mask(ctx, gout.shape, p).astype(gout.dtype, copy=False)], {}


register(OpDef(name="dropout", kind="regularizer", arity=1, attrs={"p": 0.5},
               checks={"p": real(0.0, 1.0, hi_open=True)},
               infer=_dropout_infer, forward=_dropout_forward, backward=_dropout_backward,
               doc="inverted dropout; identity in eval mode"))
