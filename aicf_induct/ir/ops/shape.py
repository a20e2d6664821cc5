"""Shape and reduction ops: `reshape`, `transpose`, and `mean` / `sum` over one axis.

Axis conventions: the batch axis is axis 0 of every tensor and its size is unknown until
compile time, so `reshape` rewrites only the per-example axes (its `shape` attr leaves the
batch out) and reductions may not reduce the batch axis (that is a loss's job).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from aicf_induct.ir.graph import Dim, TensorType
from aicf_induct.ir.ops.base import (
    AXIS,
    MAX_RANK,
    Array,
    Attrs,
    Grads,
    OpContext,
    OpDef,
    boolean,
    integers,
    is_int,
    register,
    require,
    require_float,
)


def _reshape_target(t: TensorType, shape: object) -> tuple[int, ...]:
    """The per-example target shape with its one -1 (if any) resolved."""
    require(isinstance(shape, list | tuple) and len(shape) >= 1
            and all(is_int(d) and (d > 0 or d == -1) for d in shape),
            f"reshape attr 'shape' must list sizes > 0 (one may be -1), got {shape!r}")
    assert isinstance(shape, list | tuple)
    require(sum(d == -1 for d in shape) <= 1, f"reshape: at most one -1, got {list(shape)}")
    require(len(t.shape) >= 1 and all(d is not None for d in t.shape[1:]),
            f"reshape needs known per-example sizes, got {t}")
    n = math.prod(int(d) for d in t.shape[1:] if d is not None)
    known = math.prod(d for d in shape if d != -1)
    if -1 in shape:
        require(n % known == 0, f"reshape: {t} cannot become (N, {list(shape)})")
        return tuple(n // known if d == -1 else d for d in shape)
    require(known == n, f"reshape: {t} has {n} values per example, {list(shape)} has {known}")
    return tuple(shape)


def _reshape_infer(ins: Sequence[TensorType], attrs: Attrs) -> TensorType:
    t = ins[0]
    require_float(t)
    return TensorType((t.shape[0], *_reshape_target(t, attrs.get("shape"))), t.dtype)


def _reshape_forward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                     attrs: Attrs) -> Array:
    x = ins[0]
    shape = list(attrs["shape"])
    if -1 in shape:  # resolved per example: NumPy cannot resolve it on a batch of 0 rows
        known = math.prod(d for d in shape if d != -1)
        shape[shape.index(-1)] = math.prod(x.shape[1:]) // known
    return x.reshape((x.shape[0], *shape))


def _reshape_backward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                      out: Array, gout: Array, attrs: Attrs, needs: Sequence[bool]) -> Grads:
    return [gout.reshape(ins[0].shape) if needs[0] else None], {}


register(OpDef(name="reshape", kind="shape", arity=1, attrs={"shape": None},
               checks={"shape": integers(also=(-1,))},
               infer=_reshape_infer, forward=_reshape_forward, backward=_reshape_backward,
               doc="reshape each example to attr shape (batch axis kept; one entry may be -1)"))


def _perm(t: TensorType, perm: object) -> tuple[int, ...]:
    ok = isinstance(perm, list | tuple) and sorted(perm) == list(range(len(t.shape)))
    require(ok, f"transpose attr 'perm' must be a permutation of 0..{len(t.shape) - 1}, "
                f"got {perm!r}")
    assert isinstance(perm, list | tuple)
    require(perm[0] == 0, f"transpose must keep the batch axis first, got perm {list(perm)}")
    return tuple(perm)


def _transpose_infer(ins: Sequence[TensorType], attrs: Attrs) -> TensorType:
    t = ins[0]
    require_float(t)
    perm = _perm(t, attrs.get("perm"))
    return TensorType(tuple(t.shape[p] for p in perm), t.dtype)


def _transpose_forward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                       attrs: Attrs) -> Array:
    return ins[0].transpose(attrs["perm"])


def _transpose_backward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                        out: Array, gout: Array, attrs: Attrs, needs: Sequence[bool]) -> Grads:
    inverse = [0] * len(attrs["perm"])
    for i, p in enumerate(attrs["perm"]):
        inverse[p] = i
    return [gout.transpose(inverse) if needs[0] else None], {}


register(OpDef(name="transpose", kind="shape", arity=1, attrs={"perm": None},
               checks={"perm": integers(0, MAX_RANK - 1)},
               infer=_transpose_infer, forward=_transpose_forward,
               backward=_transpose_backward,
               doc="permute axes (attr perm, the batch axis stays first)"))


def norm_axis(t: TensorType, axis: object, op: str) -> int:
    """`axis` as a non-negative index into t's axes; the batch axis (0) is refused."""
    rank = len(t.shape)
    require(is_int(axis) and -rank <= axis < rank,
            f"{op} attr 'axis' must be an int in [-{rank}, {rank}), got {axis!r}")
    assert isinstance(axis, int)
    a = axis % rank
    require(a != 0, f"{op} cannot work along the batch axis (axis {axis}) of {t}")
    return a


def _reduce_infer(ins: Sequence[TensorType], attrs: Attrs, op: str) -> TensorType:
    t = ins[0]
    require_float(t)
    a = norm_axis(t, attrs.get("axis"), op)
    require(isinstance(attrs.get("keepdims"), bool), f"{op} attr 'keepdims' must be a bool")
    shape: list[Dim] = list(t.shape)
    if attrs["keepdims"]:
        shape[a] = 1
    else:
        del shape[a]
    return TensorType(tuple(shape), t.dtype)


def _make_reduce(op: str) -> OpDef:
    mean = op == "mean"

    def infer(ins: Sequence[TensorType], attrs: Attrs) -> TensorType:
        return _reduce_infer(ins, attrs, op)

    def forward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                attrs: Attrs) -> Array:
        x = ins[0]
        f = x.mean if mean else x.sum
        return f(axis=attrs["axis"], keepdims=attrs["keepdims"])

    def backward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array], out: Array,
                 gout: Array, attrs: Attrs, needs: Sequence[bool]) -> Grads:
        if not needs[0]:
            return [None], {}
        x, a = ins[0], attrs["axis"] % ins[0].ndim
        g = gout if attrs["keepdims"] else ctx.xp.expand_dims(gout, a)
        g = ctx.xp.broadcast_to(g, x.shape)
        return [g / x.shape[a] if mean else g.copy()], {}

    return OpDef(name=op, kind="reduce", arity=1, attrs={"axis": -1, "keepdims": False},
                 checks={"axis": AXIS, "keepdims": boolean},
                 infer=infer, forward=forward, backward=backward,
                 doc=f"{op} over attr axis (not the batch axis), keepdims optional")


register(_make_reduce("mean"))
register(_make_reduce("sum"))
