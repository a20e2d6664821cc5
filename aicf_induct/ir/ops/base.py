"""The op table's entry type and registry.

Everything about an op lives in one `OpDef`: its attributes and their defaults, the
parameters it owns, its shape/dtype rule, its NumPy reference forward and its backward rule
(VJP). Forward and backward are pure functions over an array module `xp` (NumPy here, CuPy on
a GPU): the reference is the specification every kernel is tested against.

Backward rules receive the forward inputs, parameters, output and output gradient — no hidden
saved state — and return gradients for the inputs named in `needs` and for every trainable
parameter. What a rule needs from the forward pass it recomputes (dropout regenerates its mask
from the counter-based RNG), so the executor can plan memory from the IR alone.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypeGuard

import numpy as np

from aicf_induct.errors import ShapeError
from aicf_induct.ir.graph import TensorType

Array = Any  # numpy.ndarray or cupy.ndarray
Attrs = Mapping[str, Any]
# what a backward rule returns: a gradient per input (None: not needed) and per parameter role
Grads = tuple[list[Array | None], dict[str, Array]]


@dataclass
class OpContext:
    """What a forward or backward call may know beyond its operands."""

    xp: ModuleType = np
    training: bool = True
    seed: int = 0
    step: int = 0  # the optimizer step this pass belongs to: keys the dropout RNG
    node_id: str = ""
    state_updates: dict[str, Array] = field(default_factory=dict)  # role -> new buffer value
    # GPU only: a (1,) int64 device array holding `step`, which kernels captured in a CUDA
    # graph read at replay (a captured launch cannot see the host's `step`)
    device_step: Array = None

    def rng(self) -> np.random.Generator:
        """A counter-based generator keyed by (seed, step, node): the same key gives the same
        stream, so backward regenerates dropout masks and rollback replays are exact."""
        key = [((self.seed & 0xFFFFFFFF) << 32) | (self.step & 0xFFFFFFFF),
               zlib.crc32(self.node_id.encode())]
        return np.random.Generator(np.random.Philox(key=key))


@dataclass(frozen=True)
class ParamInfo:
    shape: tuple[int, ...]
    init: str
    trainable: bool = True


ForwardFn = Callable[[OpContext, Sequence[Array], Mapping[str, Array], Attrs], Array]
# backward(ctx, inputs, params, out, gout, attrs, needs) -> (input grads, param grads by role)
BackwardFn = Callable[
    [OpContext, Sequence[Array], Mapping[str, Array], Array, Array, Attrs, Sequence[bool]],
    Grads,
]
InferFn = Callable[[Sequence[TensorType], Attrs], TensorType]
ParamsFn = Callable[[Sequence[TensorType], Attrs], dict[str, ParamInfo]]


def no_params(_in: Sequence[TensorType], _attrs: Attrs) -> dict[str, ParamInfo]:
    return {}


@dataclass(frozen=True)
class OpDef:
    name: str
    kind: str  # "input" | "layer" | "activation" | "norm" | "regularizer" | "merge" | "loss" | ...
    arity: int | None  # number of inputs; None means two or more
    attrs: dict[str, Any]  # allowed attributes and their defaults
    infer: InferFn
    forward: ForwardFn
    backward: BackwardFn | None  # None: not differentiable (inputs)
    params: ParamsFn = no_params
    differentiable_inputs: tuple[int, ...] | None = None  # None: all inputs
    doc: str = ""

    def full_attrs(self, attrs: Attrs) -> dict[str, Any]:
        return {**self.attrs, **attrs}


OPS: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    if op.name in OPS:
        raise ValueError(f"op '{op.name}' registered twice")
    OPS[op.name] = op
    return op


def get_op(name: str) -> OpDef:
    return OPS[name]


# -- helpers shared by the shape rules -----------------------------------------------------

def is_int(value: object) -> TypeGuard[int]:
    """An integer attribute's value: JSON's `true` is not 1 here."""
    return isinstance(value, int) and not isinstance(value, bool)


def require(cond: bool, problem: str) -> None:
    """Shape rules call this; the validator adds the node id to the message."""
    if not cond:
        raise ShapeError(problem)


def require_float(t: TensorType, what: str = "input") -> None:
    require(t.dtype in ("float32", "float64"), f"{what} must be float32 or float64, got {t.dtype}")


def same_as_input(ins: Sequence[TensorType], _attrs: Attrs) -> TensorType:
    require_float(ins[0])
    return ins[0]


def feature_dim(t: TensorType, what: str = "input") -> int:
    require(len(t.shape) >= 2, f"{what} must have a batch and a feature axis, got {t}")
    d = t.shape[-1]
    require(d is not None, f"{what}'s feature axis must be known, got {t}")
    assert d is not None
    return d
