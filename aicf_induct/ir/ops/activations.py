"""Pointwise activations, one `Activation` entry each (`ACTIVATIONS`): relu, gelu (exact or
tanh), tanh, silu, sigmoid."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from aicf_induct.ir.graph import TensorType
from aicf_induct.ir.ops.base import (
    Array,
    Attrs,
    Grads,
    OpContext,
    OpDef,
    one_of,
    register,
    require,
    same_as_input,
)

_SQRT2 = math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _erf(xp: object, x: Array) -> Array:
    # NumPy has no erf; CuPy has it under cupyx.scipy.special.
    if xp.__name__ == "numpy":  # type: ignore[attr-defined]
        from scipy import special  # here: `import aicf_induct.ir` need not load scipy

        return special.erf(x)
    from cupyx.scipy import special as cspecial  # pragma: no cover - GPU only

    return cspecial.erf(x)  # pragma: no cover


def _sigmoid(xp: object, x: Array) -> Array:
    if xp.__name__ == "numpy":  # type: ignore[attr-defined]
        from scipy import special

        return special.expit(x)
    return 1.0 / (1.0 + xp.exp(-x))  # type: ignore[attr-defined]


def relu_fwd(xp: object, x: Array, attrs: Attrs) -> Array:
    return xp.maximum(x, 0)  # type: ignore[attr-defined]


def relu_grad(xp: object, x: Array, y: Array, g: Array, attrs: Attrs) -> Array:
    return g * (x > 0)


def gelu_fwd(xp: object, x: Array, attrs: Attrs) -> Array:
    if attrs["approximate"] == "tanh":
        return 0.5 * x * (1.0 + xp.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x**3)))  # type: ignore[attr-defined]
    return 0.5 * x * (1.0 + _erf(xp, x / _SQRT2))


def gelu_grad(xp: object, x: Array, y: Array, g: Array, attrs: Attrs) -> Array:
    if attrs["approximate"] == "tanh":
        u = _SQRT_2_OVER_PI * (x + 0.044715 * x**3)
        t = xp.tanh(u)  # type: ignore[attr-defined]
        du = _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * x**2)
        return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du)
    cdf = 0.5 * (1.0 + _erf(xp, x / _SQRT2))
    pdf = _INV_SQRT_2PI * xp.exp(-0.5 * x * x)  # type: ignore[attr-defined]
    return g * (cdf + x * pdf)


def tanh_fwd(xp: object, x: Array, attrs: Attrs) -> Array:
    return xp.tanh(x)  # type: ignore[attr-defined]


def tanh_grad(xp: object, x: Array, y: Array, g: Array, attrs: Attrs) -> Array:
    # (1 - y)(1 + y), not 1 - y*y: near saturation y*y rounds the difference from 1 away
    # (the kernels compute it so too, activations.cuh)
    return g * ((1.0 - y) * (1.0 + y))


def sigmoid_fwd(xp: object, x: Array, attrs: Attrs) -> Array:
    return _sigmoid(xp, x)


def sigmoid_grad(xp: object, x: Array, y: Array, g: Array, attrs: Attrs) -> Array:
    return g * y * (1.0 - y)


def silu_fwd(xp: object, x: Array, attrs: Attrs) -> Array:
    return x * _sigmoid(xp, x)


def silu_grad(xp: object, x: Array, y: Array, g: Array, attrs: Attrs) -> Array:
    s = _sigmoid(xp, x)
    return g * s * (1.0 + x * (1.0 - s))


PointwiseFwd = Callable[[object, Array, Attrs], Array]
PointwiseGrad = Callable[[object, Array, Array, Array, Attrs], Array]


@dataclass(frozen=True)
class Activation:
    """Everything about one activation, in one entry: the model spec's name for it, the IR
    op (and attrs) that compute it, its reference rules, and what the kernels need to know.
    The spec language's list, the fused kernels' choice of what to keep for the backward,
    and the CUDA kernels' ids (passed to NVRTC as -D `cuda_name`=`cuda_id`) all come from
    `ACTIVATION_TABLE`."""

    name: str  # in model specs (mlp:act=...); an op's plain entry has the op's name
    op: str  # the IR op that computes it
    attrs: dict[str, object]  # the op's attrs that make it this activation
    forward: PointwiseFwd
    grad: PointwiseGrad  # (xp, x, y, g, attrs) -> g * f'(x)
    # f(f(x)) = f(x): inserted after itself it leaves the function unchanged (deepen)
    idempotent: bool
    # its derivative is a function of its output alone (relu: y > 0 iff x > 0), so the
    # backward keeps y and the fused kernels need not store the pre-activation
    from_output: bool
    cuda_id: int  # the CUDA kernels' template argument ACT (not CUDA_NONE)
    cuda_name: str  # the macro kernels/cuda/activations.cuh names it by


CUDA_NONE = 0  # the CUDA kernels' ACT for no activation (ACT_NONE: act_fwd is the identity)

# every activation by name, in the order the spec language lists them
ACTIVATION_TABLE: dict[str, Activation] = {a.name: a for a in (
    Activation("relu", "relu", {}, relu_fwd, relu_grad, idempotent=True, from_output=True,
               cuda_id=1, cuda_name="ACT_RELU"),
    Activation("gelu", "gelu", {"approximate": "none"}, gelu_fwd, gelu_grad, idempotent=False,
               from_output=False, cuda_id=2, cuda_name="ACT_GELU"),
    Activation("gelu_tanh", "gelu", {"approximate": "tanh"}, gelu_fwd, gelu_grad,
               idempotent=False, from_output=False, cuda_id=3, cuda_name="ACT_GELU_TANH"),
    Activation("tanh", "tanh", {}, tanh_fwd, tanh_grad, idempotent=False, from_output=True,
               cuda_id=4, cuda_name="ACT_TANH"),
    Activation("silu", "silu", {}, silu_fwd, silu_grad, idempotent=False, from_output=False,
               cuda_id=6, cuda_name="ACT_SILU"),
    Activation("sigmoid", "sigmoid", {}, sigmoid_fwd, sigmoid_grad, idempotent=False,
               from_output=True, cuda_id=5, cuda_name="ACT_SIGMOID"),
)}
ACTIVATION_NAMES = tuple(ACTIVATION_TABLE)  # the model spec's act= values
# the activation ops of the IR, each by its plain entry (gelu: approximate=none)
ACTIVATIONS: dict[str, Activation] = {a.op: a for a in ACTIVATION_TABLE.values()
                                      if a.name == a.op}


def activation(op: str, attrs: Mapping[str, object] | None = None) -> Activation:
    """The entry IR op `op` with `attrs` computes (gelu with approximate=tanh: gelu_tanh);
    attrs left out take the op's plain entry's values. KeyError if `op` is no activation."""
    plain = ACTIVATIONS.get(op)
    if plain is None:
        raise KeyError(f"{op!r} is not an activation op (ops: {', '.join(ACTIVATIONS)})")
    full = {**plain.attrs, **(attrs or {})}
    for a in ACTIVATION_TABLE.values():
        if a.op == op and all(full.get(k) == v for k, v in a.attrs.items()):
            return a
    raise KeyError(f"no activation is {op} with {dict(attrs or {})}")


def _make(op: str) -> OpDef:
    plain = ACTIVATIONS[op]
    variants = [a.attrs for a in ACTIVATION_TABLE.values() if a.op == op]

    def forward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                a: Attrs) -> Array:
        return plain.forward(ctx.xp, ins[0], a)

    def backward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array], out: Array,
                 gout: Array, a: Attrs,
                 needs: Sequence[bool]) -> Grads:
        return [plain.grad(ctx.xp, ins[0], out, gout, a) if needs[0] else None], {}

    def infer(ins: Sequence[TensorType], a: Attrs) -> TensorType:
        for key in plain.attrs:  # e.g. gelu's approximate: one of its entries' values
            valid = [v[key] for v in variants]
            require(a.get(key) in valid, f"{op} attr {key!r} must be "
                    f"{' or '.join(repr(v) for v in valid)}, got {a.get(key)!r}")
        return same_as_input(ins, a)

    checks = {key: one_of(*dict.fromkeys(v[key] for v in variants)) for key in plain.attrs}
    return OpDef(name=op, kind="activation", arity=1, attrs=dict(plain.attrs), checks=checks,
                 infer=infer, forward=forward, backward=backward, doc=f"pointwise {op}")


for _op in ACTIVATIONS:
    register(_make(_op))
