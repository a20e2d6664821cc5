"""`embedding` and `numeric_tokenizer` on the GPU (tokens.cu)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from aicf_induct.ir.ops import Array, OpContext
from aicf_induct.kernels.cuda.compile import function
from aicf_induct.kernels.cuda.launch import ctype, grid_1d, i32, i64, ptr
from aicf_induct.kernels.cuda.sources import Family
from aicf_induct.kernels.registry import KernelQuery

TOKENS = Family("tokens.cu")


def embedding_applies(q: KernelQuery) -> bool:
    """int64 ids (the table's float dtype is the kernel's template argument)."""
    return q.dtype == "int64"


def embedding_fwd(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array],
                  attrs: dict[str, Any], out: Array) -> None:
    ids, w = ins[0], params["weight"]
    v, d = w.shape
    fn = function(TOKENS, f"embedding_fwd<{ctype(w.dtype)},{ctype(out.dtype)}>")
    fn((grid_1d(out.size),), (256,), (i64(ids.size), i32(d), i32(v), ids, w, out))


def embedding_vjp(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array], y: Array,
                  gy: Array, attrs: dict[str, Any], needs: Sequence[bool],
                  gins: Sequence[Array | None], gparams: dict[str, Array]) -> None:
    gw = gparams.get("weight")
    if gw is None:
        return
    ids = ins[0]
    v, d = gw.shape
    gw.fill(0)
    fn = function(TOKENS, f"embedding_bwd<{ctype(gw.dtype)},{ctype(gy.dtype)}>")
    fn((grid_1d(gy.size),), (256,), (i64(ids.size), i32(d), i32(v), ids, gy, gw))


def tokenizer_fwd(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array],
                  attrs: dict[str, Any], out: Array) -> None:
    x = ins[0]
    b, f = x.shape
    d = out.shape[-1]
    fn = function(TOKENS, f"tokenizer_fwd<{ctype(x.dtype)}>")
    fn((grid_1d(out.size),), (256,), (i64(b), i32(f), i32(d), x, params["weight"],
                                      ptr(params.get("bias")), out))


def tokenizer_vjp(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array], y: Array,
                  gy: Array, attrs: dict[str, Any], needs: Sequence[bool],
                  gins: Sequence[Array | None], gparams: dict[str, Array]) -> None:
    x = ins[0]
    b, f = x.shape
    d = gy.shape[-1]
    t = ctype(x.dtype)
    gw, gb = gparams.get("weight"), gparams.get("bias")
    if gw is not None or gb is not None:
        fn = function(TOKENS, f"tokenizer_bwd_params<{t}>")
        fn((math.ceil(f * d / 32),), (32, 32), (i64(b), i32(f), i32(d), gy, x, ptr(gw),
                                                      ptr(gb)))
    if gins[0] is not None:
        fn = function(TOKENS, f"tokenizer_bwd_x<{t}>")
        fn((grid_1d(32 * b * f),), (256,), (i64(b * f), i32(f), i32(d), gy, params["weight"],
                                            gins[0]))
