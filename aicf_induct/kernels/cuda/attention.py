"""The `attention` op on the GPU: the projections through cuBLAS, the core (scores, softmax,
attention dropout, probabilities times values) in one fused kernel per direction
(attention.cu), for the short sequences of tabular transformers. Longer sequences or wider
heads than ATTN_MAX, or more shared memory than the device has, take the registry's fallback.

Forward: qkv = x W_inᵀ + b_in; o = attn_fwd(qkv); y = o W_outᵀ + b_out.
Backward: qkv again; dO = gy W_out; attn_bwd(qkv, dO) -> dqkv and o; then the four GEMMs of
the two projections and their bias gradients. Buffers live in the instruction's scratch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aicf_induct.ir.ops import Array, OpContext
from aicf_induct.kernels.cuda import gemm
from aicf_induct.kernels.cuda.compile import device, function
from aicf_induct.kernels.cuda.launch import (
    act_id,
    ctype,
    f64,
    gemm_workspace,
    i32,
    ptr,
    rng_args,
    scalar,
    scratch,
)
from aicf_induct.kernels.cuda.sources import Family
from aicf_induct.kernels.registry import KernelQuery

ATTN_MAX = 64  # tokens and head width the fused kernels take (keys per lane: ATTN_MAX / 32)
ATTN_WARPS = 4  # query rows in flight per block
STATIC_SMEM = 48 << 10  # dynamic shared memory any device gives without opting in
ATTENTION = Family("attention.cu", defines={"T_ATTNMAX": ATTN_MAX})


def fwd_smem(s: int, dh: int, itemsize: int) -> int:
    """Bytes of attn_fwd's shared memory: K, V (rows dh + 1 apart), a q and a p row per warp."""
    return (2 * s * (dh + 1) + ATTN_WARPS * (dh + s)) * itemsize


def bwd_smem(s: int, dh: int, itemsize: int) -> int:
    """Bytes of attn_bwd's: Q, K, V, dO (rows dh + 1 apart), then two s x s matrices."""
    return (4 * s * (dh + 1) + 2 * s * s) * itemsize


def applies(q: KernelQuery) -> bool:
    """Float (B, S, d) input, S <= ATTN_MAX tokens, head width d / heads <= ATTN_MAX, and the
    backward's shared memory within what the device lets a block opt in to (asked only past
    the 48 KiB every device gives)."""
    if q.dtype not in ("float32", "float64") or len(q.shapes[0]) != 3:
        return False  # (a VJP's query lists the input, the output and its gradient)
    _, s, d = q.shapes[0]
    heads = int(q.attrs.get("heads", 1))
    if heads <= 0 or d % heads or s > ATTN_MAX or d // heads > ATTN_MAX:
        return False
    need = bwd_smem(s, d // heads, np.dtype(q.dtype).itemsize)
    return need <= STATIC_SMEM or need <= device().smem_optin


def _launch(name: str, dtype: Any, smem: int, grid: int, args: tuple[Any, ...]) -> None:
    fn = function(ATTENTION, f"{name}<{ctype(dtype)}>")
    if smem > STATIC_SMEM and fn.max_dynamic_shared_size_bytes < smem:
        fn.max_dynamic_shared_size_bytes = smem  # set on the first call, before any capture
    fn((grid,), (32 * ATTN_WARPS,), args, shared_mem=smem)


def _dropout_args(ctx: OpContext, attrs: dict[str, Any], dtype: Any) -> tuple[Any, ...]:
    p = float(attrs["dropout"]) if ctx.training else 0.0
    return (f64(p), scalar(dtype, 1.0 / (1.0 - p)), *rng_args(ctx))


def _qkv(attrs: dict[str, Any], x2: Array, params: dict[str, Array]) -> Array:
    """The packed projection (B*S, 3d) into the instruction's scratch."""
    qkv = scratch(attrs, "qkv", (x2.shape[0], 3 * x2.shape[1]), x2.dtype)
    gemm.xwt("fp32", x2, params["in_weight"], qkv, ws=gemm_workspace(attrs, qkv.size * x2.shape[1]))
    if "in_bias" in params:
        gemm.bias_act(qkv, params["in_bias"], None, qkv, act_id(None))
    return qkv


def attention_fwd(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array],
                  attrs: dict[str, Any], out: Array) -> None:
    x = ins[0]
    b, s, d = x.shape
    h = int(attrs["heads"])
    x2 = x.reshape(b * s, d)
    qkv = _qkv(attrs, x2, params)
    o = scratch(attrs, "o", (b * s, d), x.dtype)
    _launch("attn_fwd", x.dtype, fwd_smem(s, d // h, x.itemsize), b * h,
            (i32(h), i32(s), i32(d // h), qkv, o, *_dropout_args(ctx, attrs, x.dtype)))
    y2 = out.reshape(b * s, d)
    gemm.xwt("fp32", o, params["out_weight"], y2, ws=gemm_workspace(attrs, qkv.size * d))
    if "out_bias" in params:
        gemm.bias_act(y2, params["out_bias"], None, y2, act_id(None))


def _colsum(attrs: dict[str, Any], key: str, g: Array, out: Array) -> None:
    """out = column sums of g; each call site keeps its own scratch (a sub-dict of attrs)."""
    gemm.act_bwd_bias(attrs.setdefault(key, {}), g, None, None, out, act_id(None))


def attention_vjp(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array], y: Array,
                  gy: Array, attrs: dict[str, Any], needs: Sequence[bool],
                  gins: Sequence[Array | None], gparams: dict[str, Array]) -> None:
    x = ins[0]
    b, s, d = x.shape
    h = int(attrs["heads"])
    x2, g2 = x.reshape(b * s, d), gy.reshape(b * s, d)
    qkv = _qkv(attrs, x2, params)
    ws = gemm_workspace(attrs, qkv.size * d)
    go = scratch(attrs, "go", (b * s, d), x.dtype)
    gemm.gw("fp32", g2, params["out_weight"], go, ws=ws)  # dO = gy W_out
    gqkv = scratch(attrs, "gqkv", (b * s, 3 * d), x.dtype)
    o = scratch(attrs, "o", (b * s, d), x.dtype) if "out_weight" in gparams else None
    _launch("attn_bwd", x.dtype, bwd_smem(s, d // h, x.itemsize), b * h,
            (i32(h), i32(s), i32(d // h), qkv, go, gqkv, ptr(o),
             *_dropout_args(ctx, attrs, x.dtype)))
    if o is not None:
        gemm.gtx("fp32", g2, o, gparams["out_weight"], ws=ws)
    if "out_bias" in gparams:
        _colsum(attrs, "_out_bias", g2, gparams["out_bias"])
    if "in_weight" in gparams:
        gemm.gtx("fp32", gqkv, x2, gparams["in_weight"], ws=ws)
    if "in_bias" in gparams:
        _colsum(attrs, "_in_bias", gqkv, gparams["in_bias"])
    if gins[0] is not None:
        gemm.gw("fp32", gqkv, params["in_weight"], gins[0].reshape(b * s, d), ws=ws)
