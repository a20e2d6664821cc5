"""`input` and `linear`: y = x @ W.T + b, weights stored (out, in) as in PyTorch."""

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
    feature_dim,
    integer,
    integers,
    is_int,
    one_of,
    register,
    require,
    require_float,
)


def _input_infer(ins: Sequence[TensorType], attrs: Attrs) -> TensorType:
    shape = attrs.get("shape")
    require(isinstance(shape, list | tuple) and len(shape) >= 1,
            "input needs attr 'shape', a list whose entries are sizes or null for the batch")
    assert isinstance(shape, list | tuple)
    require(all(d is None or (is_int(d) and d > 0) for d in shape),
            f"input shape entries must be positive ints or null, got {list(shape)}")
    # said here, at the input, rather than as a consumer's "needs a batch axis"; null only
    # there, since the batch size is put in every null at compile time
    require(all(d is not None for d in shape[1:]),
            f"input shape {list(shape)}: null stands for the batch axis, first, only; give "
            "each other axis its size")
    require(shape[0] is None,  # [null]: a value per example (labels)
            f"input shape {list(shape)} has no batch axis: give it first, as null (e.g. "
            f"{[None, *shape]})")
    dtype = attrs.get("dtype", "float64")
    require(dtype in ("float32", "float64", "int64"), f"input dtype {dtype!r} not supported")
    return TensorType(tuple(shape), dtype)


def _input_forward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                   attrs: Attrs) -> Array:
    raise RuntimeError("input nodes are fed, not computed")


register(OpDef(
    name="input", kind="input", arity=0, attrs={"shape": None, "dtype": "float64"},
    checks={"shape": integers(null=True), "dtype": one_of("float32", "float64", "int64")},
    infer=_input_infer, forward=_input_forward, backward=None,
    doc="A graph input; attrs: shape (null for the batch axis), dtype.",
))


def _linear_params(ins: Sequence[TensorType], attrs: Attrs) -> dict[str, ParamInfo]:
    n_in, n_out = feature_dim(ins[0]), int(attrs["out_features"])
    bound = f"uniform:{1.0 / math.sqrt(n_in)!r}"  # PyTorch's nn.Linear default
    out = {"weight": ParamInfo((n_out, n_in), bound)}
    if attrs.get("bias", True):
        out["bias"] = ParamInfo((n_out,), bound)
    return out


def _linear_infer(ins: Sequence[TensorType], attrs: Attrs) -> TensorType:
    require_float(ins[0])
    feature_dim(ins[0])
    n_out = attrs.get("out_features")
    require(is_int(n_out) and n_out > 0,
            f"linear needs attr 'out_features' > 0, got {n_out!r}")
    return TensorType((*ins[0].shape[:-1], n_out), ins[0].dtype)


def _linear_forward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                    attrs: Attrs) -> Array:
    y = ins[0] @ params["weight"].T
    if "bias" in params:
        y += params["bias"]
    return y


def _linear_backward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                     out: Array, gout: Array, attrs: Attrs,
                     needs: Sequence[bool]) -> Grads:
    x, w = ins[0], params["weight"]
    g2 = gout.reshape(-1, gout.shape[-1])  # (B, out) with all leading axes folded
    x2 = x.reshape(-1, x.shape[-1])
    grads = {"weight": g2.T @ x2}
    if "bias" in params:
        grads["bias"] = g2.sum(axis=0)
    gx = (gout @ w) if needs[0] else None
    return [gx], grads


register(OpDef(
    name="linear", kind="layer", arity=1, attrs={"out_features": None, "bias": True},
    checks={"out_features": integer(), "bias": boolean},
    infer=_linear_infer, forward=_linear_forward, backward=_linear_backward,
    params=_linear_params, doc="y = x @ weight.T + bias; weight (out, in).",
))
