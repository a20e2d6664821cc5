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

import math
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
    rank: int = 0  # the data-parallel rank: keys it too, so ranks draw their own masks
    node_id: str = ""
    state_updates: dict[str, Array] = field(default_factory=dict)  # role -> new buffer value
    # GPU only: a (1,) int64 device array holding `step`, which kernels captured in a CUDA
    # graph read at replay (a captured launch cannot see the host's `step`)
    device_step: Array = None

    def rng(self) -> np.random.Generator:
        """A counter-based generator keyed by (seed, step, node, rank): the same key gives the
        same stream, so backward regenerates dropout masks and rollback replays are exact."""
        # as uint64: a list holding a word of 2**63 or more reaches Philox through float64,
        # which lost the step's low bits for seeds from 2**31 (masks repeated over 2,048 steps)
        key = np.array([((self.seed & 0xFFFFFFFF) << 32) | (self.step & 0xFFFFFFFF),
                        node_stream(self)], dtype=np.uint64)
        return np.random.Generator(np.random.Philox(key=key))


def node_stream(ctx: OpContext) -> int:
    """The dropout key's second word: the node (crc32 of its id) and, above it, the rank (0
    on one rank, so a one-rank run draws what it always drew)."""
    return ((ctx.rank & 0xFFFFFFFF) << 32) | zlib.crc32(ctx.node_id.encode())


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
# an attribute's value -> what is wrong with it ("must be ..., got ..."), or None
AttrCheck = Callable[[Any], str | None]


def no_params(_in: Sequence[TensorType], _attrs: Attrs) -> dict[str, ParamInfo]:
    return {}


@dataclass(frozen=True)
class OpDef:
    name: str
    kind: str  # "input" | "layer" | "activation" | "norm" | "regularizer" | "merge" | "loss" | ...
    arity: int | None  # number of inputs; None means two or more
    attrs: dict[str, Any]  # allowed attributes and their defaults
    checks: dict[str, AttrCheck]  # what values each attribute takes (helpers below)
    infer: InferFn
    forward: ForwardFn
    backward: BackwardFn | None  # None: not differentiable (inputs)
    params: ParamsFn = no_params
    differentiable_inputs: tuple[int, ...] | None = None  # None: all inputs
    doc: str = ""

    def full_attrs(self, attrs: Attrs) -> dict[str, Any]:
        return {**self.attrs, **attrs}

    def floats_read(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """`attrs` with an integer given to a float attribute read as its float: JSON writers
        (JavaScript's among them) write 0.0 as 0, as `dropout=0` means 0.0 in a model spec.
        One past 2**53, which no float holds exactly, is left for the check to refuse."""
        return {k: float(v) if self.checks.get(k) in FLOAT_CHECKS and is_int(v)
                and abs(v) <= 2**53 else v for k, v in attrs.items()}

    def attr_problems(self, attrs: Attrs) -> list[str]:
        """What is wrong with the given attributes' values, one line each naming the
        attribute. A None where the op's default is None is the attribute left unset (the
        shape rule says when it must be set); an unknown attribute is the validator's."""
        out = []
        for name, value in attrs.items():
            check = self.checks.get(name)
            if check is None or (value is None and self.attrs.get(name) is None):
                continue
            if (why := check(value)) is not None:
                out.append(f"{self.name} attribute '{name}' {why}")
        return out


OPS: dict[str, OpDef] = {}
FLOAT_CHECKS: set[AttrCheck] = set()  # the `real` checks, whose attributes read integers


def register(op: OpDef) -> OpDef:
    if op.name in OPS:
        raise ValueError(f"op '{op.name}' registered twice")
    if set(op.checks) != set(op.attrs):  # every attribute has its check, and no other
        raise ValueError(f"op '{op.name}': checks for {sorted(op.checks)}, attributes "
                         f"{sorted(op.attrs)}")
    OPS[op.name] = op
    return op


def get_op(name: str) -> OpDef:
    return OPS[name]


# -- attribute checks (`OpDef.checks`) -----------------------------------------------------
MAX_SIZE = 2**24  # the most features, channels, heads or ids a size attribute may give
MAX_RANK = 64  # axes a tensor may have (NumPy's limit): bounds axis and perm attributes


def _shown(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def boolean(v: Any) -> str | None:
    return None if isinstance(v, bool) else f"must be true or false, got {_shown(v)}"


def integer(lo: int = 1, hi: int = MAX_SIZE) -> AttrCheck:
    """An integer in [lo, hi] (a size by default); JSON's true is not 1, nor 4.0 four."""
    def check(v: Any) -> str | None:
        ok = is_int(v) and lo <= v <= hi
        return None if ok else f"must be an integer from {lo} to {hi}, got {_shown(v)}"
    return check


def real(lo: float = -math.inf, hi: float = math.inf, *, lo_open: bool = False,
         hi_open: bool = False) -> AttrCheck:
    """A finite float within the bounds (open where said). A node's integer is read as its
    float when the node is made (`OpDef.floats_read`); the check itself takes floats only."""
    def check(v: Any) -> str | None:
        ok = isinstance(v, float) and math.isfinite(v) and (lo < v if lo_open else lo <= v) \
            and (v < hi if hi_open else v <= hi)
        return None if ok else f"must be a finite float{span}, got {_shown(v)}"
    bounds = [f"{'>' if lo_open else '>='} {lo:g}"] * math.isfinite(lo) + \
        [f"{'<' if hi_open else '<='} {hi:g}"] * math.isfinite(hi)
    span = " " + " and ".join(bounds) if bounds else ""
    FLOAT_CHECKS.add(check)
    return check


def one_of(*values: Any) -> AttrCheck:
    def check(v: Any) -> str | None:
        ok = any(type(v) is type(x) and v == x for x in values)
        return None if ok else f"must be {' or '.join(map(repr, values))}, got {_shown(v)}"
    return check


def integers(lo: int = 1, hi: int = MAX_SIZE, *, length: int | None = None,
             null: bool = False, also: tuple[int, ...] = ()) -> AttrCheck:
    """A list of integers in [lo, hi] (or in `also`; null too with `null`): `length` of
    them, or at least one."""
    def check(v: Any) -> str | None:
        ok = isinstance(v, list | tuple) and (len(v) == length if length else len(v) >= 1) \
            and all((null and d is None) or (is_int(d) and (lo <= d <= hi or d in also))
                    for d in v)
        return None if ok else f"must be {what}, got {_shown(v)}"
    count = f"{length} integers" if length else "a non-empty list of integers"
    what = f"{count} from {lo} to {hi}" + "".join(f" or {a}" for a in also) + \
        (" (or null)" if null else "")
    return check


AXIS = integer(-MAX_RANK, MAX_RANK - 1)  # an axis attribute; the shape rule checks the rank


def hw(lo: int) -> AttrCheck:
    """[h, w] of an image op's window, each from `lo` to MAX_SIZE."""
    return integers(lo, length=2)


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
