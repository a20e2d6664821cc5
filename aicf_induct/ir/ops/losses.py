"""softmax, and the losses: cross_entropy (integer labels, label smoothing) and mse."""

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


def log_softmax(xp: object, x: Array, axis: int = -1) -> Array:
    z = x - x.max(axis=axis, keepdims=True)
    return z - xp.log(xp.exp(z).sum(axis=axis, keepdims=True))  # type: ignore[attr-defined]


def _softmax_forward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                     attrs: Attrs) -> Array:
    return ctx.xp.exp(log_softmax(ctx.xp, ins[0], attrs["axis"]))


def _softmax_backward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                      out: Array, gout: Array, attrs: Attrs,
                      needs: Sequence[bool]) -> Grads:
    dot = (gout * out).sum(axis=attrs["axis"], keepdims=True)
    return [out * (gout - dot) if needs[0] else None], {}


def _softmax_infer(ins: Sequence[TensorType], attrs: Attrs) -> TensorType:
    require(attrs.get("axis") == -1, "softmax supports only axis -1")
    return same_as_input(ins, attrs)


register(OpDef(name="softmax", kind="activation", arity=1, attrs={"axis": -1},
               checks={"axis": AXIS},
               infer=_softmax_infer, forward=_softmax_forward, backward=_softmax_backward,
               doc="softmax over the last axis"))


def _ce_infer(ins: Sequence[TensorType], attrs: Attrs) -> TensorType:
    logits, labels = ins
    require_float(logits, "logits")
    require(len(logits.shape) == 2, f"cross_entropy logits must be (batch, classes), got {logits}")
    require(labels.dtype == "int64" and len(labels.shape) == 1,
            f"cross_entropy labels must be int64 (batch,), got {labels}")
    require(labels.shape[0] == logits.shape[0], f"batch sizes differ: {logits} vs {labels}")
    eps = attrs.get("label_smoothing")
    require(isinstance(eps, float) and 0.0 <= eps < 1.0,
            f"label_smoothing must be in [0, 1), got {eps!r}")
    return TensorType((), logits.dtype)


def _check_labels(labels: Array, c: int) -> None:
    """An IndexError (as the embedding op's for its ids) unless every label is an integer
    class index in [0, c): indexing would wrap -1 to the last class and fail on c with a
    bare IndexError. The reference only: the kernels trust the Executor's check_batch."""
    if labels.dtype.kind not in "iu":
        raise IndexError(f"cross_entropy labels must be integer class indices, got "
                         f"{labels.dtype.name} values")
    if labels.size:
        lo, hi = int(labels.min()), int(labels.max())
        if lo < 0 or hi >= c:
            raise IndexError(f"cross_entropy labels must lie in [0, {c}) for {c} classes, "
                             f"got {lo if lo < 0 else hi}")


def _ce_target(xp: object, labels: Array, n: int, c: int, eps: float, dtype: object) -> Array:
    _check_labels(labels, c)
    q = xp.full((n, c), eps / c, dtype=dtype)  # type: ignore[attr-defined]
    q[xp.arange(n), labels] += 1.0 - eps  # type: ignore[attr-defined]
    return q


def _ce_forward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                attrs: Attrs) -> Array:
    logits, labels = ins
    n, c = logits.shape
    logp = log_softmax(ctx.xp, logits)
    q = _ce_target(ctx.xp, labels, n, c, attrs["label_smoothing"], logits.dtype)
    return -(q * logp).sum() / n


def _ce_backward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array], out: Array,
                 gout: Array, attrs: Attrs,
                 needs: Sequence[bool]) -> Grads:
    logits, labels = ins
    n, c = logits.shape
    p = ctx.xp.exp(log_softmax(ctx.xp, logits))
    q = _ce_target(ctx.xp, labels, n, c, attrs["label_smoothing"], logits.dtype)
    return [(p - q) * (gout / n) if needs[0] else None, None], {}


register(OpDef(name="cross_entropy", kind="loss", arity=2, attrs={"label_smoothing": 0.0},
               checks={"label_smoothing": real(0.0, 1.0, hi_open=True)},
               infer=_ce_infer, forward=_ce_forward, backward=_ce_backward,
               differentiable_inputs=(0,),
               doc="mean softmax cross-entropy of logits (N, C) against int64 labels (N,)"))


def _mse_infer(ins: Sequence[TensorType], attrs: Attrs) -> TensorType:
    pred, target = ins
    require_float(pred, "prediction")
    require_float(target, "target")
    ok = target.shape == pred.shape or (pred.shape[-1:] == (1,) and target.shape == pred.shape[:-1])
    require(ok, f"mse target must match prediction {pred} (or drop its last axis of 1), "
                f"got {target}")
    return TensorType((), pred.dtype)


def _mse_forward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                 attrs: Attrs) -> Array:
    pred, target = ins
    d = pred - target.reshape(pred.shape)
    return (d * d).mean()


def _mse_backward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array], out: Array,
                  gout: Array, attrs: Attrs,
                  needs: Sequence[bool]) -> Grads:
    pred, target = ins
    d = pred - target.reshape(pred.shape)
    return [d * (2.0 * gout / pred.size) if needs[0] else None, None], {}


register(OpDef(name="mse", kind="loss", arity=2, attrs={}, checks={}, infer=_mse_infer,
               forward=_mse_forward, backward=_mse_backward, differentiable_inputs=(0,),
               doc="mean squared error"))
