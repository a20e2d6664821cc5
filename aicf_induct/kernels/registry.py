"""The kernel registry: (op, direction, device, dtype, shapes) -> the kernel that runs it.

Kernels write into buffers the plan owns (`out=` style), so a compiled step allocates
nothing. Signatures:

    fwd(ctx, ins, params, attrs, out) -> None
    vjp(ctx, ins, params, y, gy, attrs, needs, gins, gparams) -> None

`gins[k]` is the buffer for input k's gradient (None when not needed); `gparams` maps each
trainable role to its gradient view in the parameter store. Every op has a guaranteed
fallback: its reference forward/backward from the op table, copied into the buffers.
Variants carry a priority and an `applies` predicate; an autotuner
(`kernels.autotune.TunedRegistry`) picks among the applicable ones per shape. Fused
instructions (direction "fused", see `kernels.fused`) use one signature for all ops:

    fused(ctx, ins, outs, params, gparams, attrs) -> None
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aicf_induct.ir.ops import OPS, Array, OpContext

KernelFn = Callable[..., None]


@dataclass(frozen=True)
class KernelQuery:
    op: str
    direction: str  # "fwd" | "vjp"
    device: str  # "cpu" | "cuda"
    dtype: str
    shapes: tuple[tuple[int, ...], ...]  # operand shapes
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Kernel:
    name: str
    op: str
    direction: str
    device: str
    fn: KernelFn
    priority: int = 0
    applies: Callable[[KernelQuery], bool] | None = None
    capturable: bool = False  # allocates nothing and syncs nothing: safe in a CUDA graph


def reference_fwd(op: str) -> KernelFn:
    forward = OPS[op].forward

    def run(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array], attrs: dict[str, Any],
            out: Array) -> None:
        out[...] = forward(ctx, ins, params, attrs)

    return run


def reference_vjp(op: str) -> KernelFn:
    backward = OPS[op].backward
    assert backward is not None, op

    def run(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array], y: Array, gy: Array,
            attrs: dict[str, Any], needs: Sequence[bool], gins: Sequence[Array | None],
            gparams: dict[str, Array]) -> None:
        gi, gp = backward(ctx, ins, params, y, gy, attrs, needs)
        for dst, src in zip(gins, gi, strict=True):
            if dst is not None:
                dst[...] = src
        for role, dst in gparams.items():
            dst[...] = gp[role]

    return run


class KernelRegistry:
    def __init__(self) -> None:
        self._kernels: dict[tuple[str, str, str], list[Kernel]] = {}

    def register(self, kernel: Kernel) -> Kernel:
        variants = self._kernels.setdefault((kernel.op, kernel.direction, kernel.device), [])
        variants.append(kernel)
        variants.sort(key=lambda k: -k.priority)
        return kernel

    def candidates(self, q: KernelQuery) -> list[Kernel]:
        variants = self._kernels.get((q.op, q.direction, q.device), [])
        return [k for k in variants if k.applies is None or k.applies(q)]

    def select(self, q: KernelQuery) -> Kernel:
        """The best applicable variant, else the reference fallback."""
        found = self.candidates(q)
        if found:
            return found[0]
        fn = reference_fwd(q.op) if q.direction == "fwd" else reference_vjp(q.op)
        return Kernel(f"{q.op}.{q.direction}.reference", q.op, q.direction, q.device, fn, -1)


REGISTRY = KernelRegistry()
