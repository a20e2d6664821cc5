"""`matmul`: a @ b over the last two axes, leading axes broadcast as in NumPy/PyTorch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aicf_induct.ir.graph import Dim, TensorType
from aicf_induct.ir.ops.base import (
    Array,
    Attrs,
    Grads,
    OpContext,
    OpDef,
    register,
    require,
    require_float,
)


def _broadcast(a: tuple[Dim, ...], b: tuple[Dim, ...]) -> tuple[Dim, ...]:
    """NumPy broadcasting of leading shapes; None (the batch) matches None or 1."""
    out: list[Dim] = []
    for k in range(max(len(a), len(b))):
        x = a[-1 - k] if k < len(a) else 1
        y = b[-1 - k] if k < len(b) else 1
        require(x == y or x == 1 or y == 1, f"matmul leading axes {a} and {b} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


def _matmul_infer(ins: Sequence[TensorType], attrs: Attrs) -> TensorType:
    a, b = ins
    require_float(a, "a")
    require_float(b, "b")
    require(a.dtype == b.dtype, f"matmul operands differ in dtype: {a} and {b}")
    require(len(a.shape) >= 2 and len(b.shape) >= 2, f"matmul needs rank >= 2, got {a} and {b}")
    require(a.shape[-1] is not None and a.shape[-1] == b.shape[-2],
            f"matmul inner sizes differ: {a} @ {b}")
    lead = _broadcast(a.shape[:-2], b.shape[:-2])
    return TensorType((*lead, a.shape[-2], b.shape[-1]), a.dtype)


def sum_to(xp: object, g: Array, shape: tuple[int, ...]) -> Array:
    """Sum a broadcast gradient back down to `shape` (the inverse of broadcasting)."""
    extra = g.ndim - len(shape)
    if extra:
        g = g.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


def _matmul_forward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                    attrs: Attrs) -> Array:
    return ctx.xp.matmul(ins[0], ins[1])


def _matmul_backward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                     out: Array, gout: Array, attrs: Attrs,
                     needs: Sequence[bool]) -> Grads:
    a, b = ins
    ga = sum_to(ctx.xp, gout @ b.swapaxes(-1, -2), a.shape) if needs[0] else None
    gb = sum_to(ctx.xp, a.swapaxes(-1, -2) @ gout, b.shape) if needs[1] else None
    return [ga, gb], {}


register(OpDef(name="matmul", kind="merge", arity=2, attrs={}, checks={},
               infer=_matmul_infer,
               forward=_matmul_forward, backward=_matmul_backward,
               doc="batched a @ b over the last two axes, leading axes broadcast"))
