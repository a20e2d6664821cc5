"""Parameter initializers named by strings, so that a `ParamSpec` (and canonical JSON) can
say how a parameter starts: `zeros`, `ones`, `uniform:B` (U(-B, B), PyTorch's default for
linear layers with B = 1/sqrt(fan_in)), `normal:STD`, `xavier_uniform`, `kaiming_normal`."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from aicf_induct.errors import IRError
from aicf_induct.ir.graph import ParamSpec


def _fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """(fan_in, fan_out) as torch.nn.init._calculate_fan_in_and_fan_out gives them for
    rank >= 2: weights are (out, in, *kernel), and both fans count the kernel's receptive
    field, prod(shape[2:]) (a conv2d weight (64, 16, 5, 5) has fan_in 400, fan_out 1600).
    PyTorch refuses fewer than 2 axes; here a vector (d,) has both fans d, a scalar 1."""
    if len(shape) < 2:
        return (shape[0] if shape else 1), (shape[0] if shape else 1)
    field = math.prod(shape[2:])
    return shape[1] * field, shape[0] * field


def init_array(init: str, shape: tuple[int, ...], rng: np.random.Generator,
               dtype: str = "float64") -> np.ndarray:
    kind, _, arg = init.partition(":")
    if kind == "zeros":
        out = np.zeros(shape)
    elif kind == "ones":
        out = np.ones(shape)
    elif kind == "uniform":
        b = float(arg)
        out = rng.uniform(-b, b, size=shape)
    elif kind == "normal":
        out = rng.normal(0.0, float(arg), size=shape)
    elif kind == "xavier_uniform":
        fan_in, fan_out = _fans(shape)
        b = math.sqrt(6.0 / (fan_in + fan_out))
        out = rng.uniform(-b, b, size=shape)
    elif kind == "kaiming_normal":
        fan_in, _ = _fans(shape)
        out = rng.normal(0.0, math.sqrt(2.0 / fan_in), size=shape)
    else:
        raise IRError(f"unknown initializer '{init}'")
    return out.astype(dtype, copy=False)


def check_init(init: str) -> str | None:
    """The problem with an initializer string, or None if it is valid."""
    kind, _, arg = init.partition(":")
    if kind in ("zeros", "ones", "xavier_uniform", "kaiming_normal"):
        return None if not arg else f"initializer '{kind}' takes no argument"
    if kind in ("uniform", "normal"):
        try:
            v = float(arg)
        except ValueError:
            return f"initializer '{init}' needs a number, as in '{kind}:0.1'"
        return None if v >= 0 and math.isfinite(v) else \
            f"initializer '{init}' needs a finite number >= 0"
    return f"unknown initializer '{init}'"


def initial_values(params: Iterable[ParamSpec], seed: int = 0) -> dict[str, np.ndarray]:
    """A value for every parameter and buffer from its initializer, in the given order, from
    one seeded generator: the same specs and seed give the same values."""
    rng = np.random.default_rng(seed)
    return {p.name: init_array(p.init, tuple(p.shape), rng, p.dtype) for p in params}
