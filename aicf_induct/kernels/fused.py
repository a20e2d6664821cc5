"""Fused instructions: what `compiler.fusion` puts in a program in place of several IR ops,
and their reference implementations over `xp` (NumPy on the CPU, CuPy as the GPU fallback).

A fused kernel has one signature:

    fn(ctx, ins, outs, params, gparams, attrs) -> None

It reads the operands `ins`, writes the buffers `outs` (None: not wanted), reads the layer's
parameters and writes the gradients in `gparams`. The references below are the
specification: each CUDA kernel of a fused op is tested against them, and they are built
from the op table's own forward and VJP rules, so a fused program computes what the
unfused one does.

| op             | ins                | outs                      | computes                  |
|----------------|--------------------|---------------------------|---------------------------|
| linear_act     | x                  | a, z or None (pre-act)    | z = x Wᵀ + b; a = act(z)  |
| act_linear_bwd | x, g, h            | gx or None, gz or None    | gz = act'(h)·g; gW = gzᵀx; |
|                |                    |                           | gb = Σ_rows gz; gx = gz W |
| softmax_ce     | logits, labels, gy | loss, glogits             | cross-entropy and its     |
|                |                    |                           | gradient                  |

`act` is None (no activation) or an activation op (`ACTIVATIONS`) with `act_attrs`; `h`
is what that activation's derivative is computed from: its output where its op-table entry
says `from_output` (relu, tanh, sigmoid), its input otherwise (gelu, silu). In
`act_linear_bwd`, `h` is absent when `act` is None.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aicf_induct.ir.ops import OPS, Array, OpContext, activation
from aicf_induct.kernels.registry import REGISTRY, Kernel

FUSED_OPS = ("linear_act", "act_linear_bwd", "softmax_ce")


def act_forward(xp: Any, z: Array, act: str | None, act_attrs: dict[str, Any]) -> Array:
    if act is None:
        return z
    entry = activation(act, act_attrs)
    return entry.forward(xp, z, {**entry.attrs, **act_attrs})


def act_backward(xp: Any, h: Array, g: Array, act: str | None,
                 act_attrs: dict[str, Any]) -> Array:
    """g · act'(·) with the derivative taken from h (output or input: `from_output`).
    The op table's grad rules read only y for tanh/sigmoid, only x for gelu/silu, and
    x > 0 for relu, which equals y > 0: so (h, h) serves both forms."""
    if act is None:
        return g
    entry = activation(act, act_attrs)
    return entry.grad(xp, h, h, g, {**entry.attrs, **act_attrs})


def linear_act_ref(ctx: OpContext, ins: Sequence[Array], outs: Sequence[Array | None],
                   params: dict[str, Array], gparams: dict[str, Array],
                   attrs: dict[str, Any]) -> None:
    xp, x = ctx.xp, ins[0]
    z = x @ params["weight"].T
    if "bias" in params:
        z += params["bias"]
    if len(outs) > 1 and outs[1] is not None:
        outs[1][...] = z
    out = outs[0]
    assert out is not None
    out[...] = act_forward(xp, z, attrs.get("act"), attrs.get("act_attrs", {}))


def act_linear_bwd_ref(ctx: OpContext, ins: Sequence[Array], outs: Sequence[Array | None],
                       params: dict[str, Array], gparams: dict[str, Array],
                       attrs: dict[str, Any]) -> None:
    xp, x, g = ctx.xp, ins[0], ins[1]
    act = attrs.get("act")
    gz = g if act is None else act_backward(xp, ins[2], g, act, attrs.get("act_attrs", {}))
    if len(outs) > 1 and outs[1] is not None:
        outs[1][...] = gz
    if "weight" in gparams:
        gparams["weight"][...] = gz.T @ x
    if "bias" in gparams:
        gparams["bias"][...] = gz.sum(axis=0)
    if outs[0] is not None:
        outs[0][...] = gz @ params["weight"]


def softmax_ce_ref(ctx: OpContext, ins: Sequence[Array], outs: Sequence[Array | None],
                   params: dict[str, Array], gparams: dict[str, Array],
                   attrs: dict[str, Any]) -> None:
    op = OPS["cross_entropy"]
    full = op.full_attrs({"label_smoothing": attrs.get("label_smoothing", 0.0)})
    logits, labels, gy = ins
    loss, glogits = outs
    if loss is not None:
        loss[...] = op.forward(ctx, [logits, labels], {}, full)
    if glogits is not None:
        assert op.backward is not None
        gi, _ = op.backward(ctx, [logits, labels], {}, None, gy, full, (True, False))
        glogits[...] = gi[0]


REFERENCES = {"linear_act": linear_act_ref, "act_linear_bwd": act_linear_bwd_ref,
              "softmax_ce": softmax_ce_ref}


def _register() -> None:
    # The references run on either device (xp decides); the lowest priority, so a real
    # kernel wins wherever one applies. Not capturable: they allocate temporaries.
    for op, fn in REFERENCES.items():
        for device in ("cpu", "cuda"):
            REGISTRY.register(Kernel(f"{op}.fused.reference", op, "fused", device, fn,
                                     priority=-1))


_register()
