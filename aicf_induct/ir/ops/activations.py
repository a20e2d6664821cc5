"""Pointwise activations: relu, gelu (exact or tanh), tanh, silu, sigmoid."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from scipy import special

from aicf_induct.ir.graph import TensorType
from aicf_induct.ir.ops.base import (
    Array,
    Attrs,
    OpContext,
    OpDef,
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
        return special.erf(x)
    from cupyx.scipy import special as cspecial  # pragma: no cover - GPU only

    return cspecial.erf(x)  # pragma: no cover


def _sigmoid(xp: object, x: Array) -> Array:
    return special.expit(x) if xp.__name__ == "numpy" else 1.0 / (1.0 + xp.exp(-x))  # type: ignore[attr-defined]


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
    return g * (1.0 - y * y)


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

# name -> (forward, grad, attrs, idempotent). Idempotent activations (f(f(x)) = f(x)) can be
# inserted after themselves without changing the function: the deepen rewrite relies on it.
ACTIVATIONS: dict[str, tuple[PointwiseFwd, PointwiseGrad, dict[str, object], bool]] = {
    "relu": (relu_fwd, relu_grad, {}, True),
    "gelu": (gelu_fwd, gelu_grad, {"approximate": "none"}, False),
    "tanh": (tanh_fwd, tanh_grad, {}, False),
    "sigmoid": (sigmoid_fwd, sigmoid_grad, {}, False),
    "silu": (silu_fwd, silu_grad, {}, False),
}


def _make(name: str, fwd: PointwiseFwd, grad: PointwiseGrad, attrs: dict[str, object]) -> OpDef:
    def forward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                a: Attrs) -> Array:
        return fwd(ctx.xp, ins[0], a)

    def backward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array], out: Array,
                 gout: Array, a: Attrs,
                 needs: Sequence[bool]) -> tuple[list[Array | None], dict[str, Array]]:
        return [grad(ctx.xp, ins[0], out, gout, a) if needs[0] else None], {}

    def infer(ins: Sequence[TensorType], a: Attrs) -> TensorType:
        if name == "gelu":
            require(a.get("approximate") in ("none", "tanh"),
                    "gelu attr 'approximate' must be 'none' or 'tanh', "
                    f"got {a.get('approximate')!r}")
        return same_as_input(ins, a)

    return OpDef(name=name, kind="activation", arity=1, attrs=dict(attrs), infer=infer,
                 forward=forward, backward=backward, doc=f"pointwise {name}")


for _name, (_f, _g, _a, _idem) in ACTIVATIONS.items():
    register(_make(_name, _f, _g, _a))
