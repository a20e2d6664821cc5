"""Shape, reduction, concat and batched-matmul ops on the GPU (tensor.cu, cuBLAS). Each
computes what the op table's reference computes; none allocates or synchronises, so a step
holding them can be captured as a CUDA graph."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from aicf_induct.ir.ops import Array, OpContext
from aicf_induct.kernels.cuda import gemm
from aicf_induct.kernels.cuda.compile import function
from aicf_induct.kernels.cuda.gemm import OP_N, OP_T
from aicf_induct.kernels.cuda.launch import ctype, gemm_workspace, grid_1d, i32, i64, scalar
from aicf_induct.kernels.cuda.sources import Family
from aicf_induct.kernels.registry import KernelQuery

TENSOR = Family("tensor.cu")


def _around(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    """(outer, n, inner) of `shape` around `axis`."""
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


# -- reshape / transpose: copies (the plan gives every value its own buffer) ----------------

def copy_fwd(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array],
             attrs: dict[str, Any], out: Array) -> None:
    ctx.xp.copyto(out, ins[0].reshape(out.shape))


def copy_vjp(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array], y: Array,
             gy: Array, attrs: dict[str, Any], needs: Sequence[bool],
             gins: Sequence[Array | None], gparams: dict[str, Array]) -> None:
    if gins[0] is not None:
        ctx.xp.copyto(gins[0], gy.reshape(gins[0].shape))


def _inverse(perm: Sequence[int]) -> list[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def transpose_fwd(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array],
                  attrs: dict[str, Any], out: Array) -> None:
    ctx.xp.copyto(out, ins[0].transpose(attrs["perm"]))


def transpose_vjp(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array], y: Array,
                  gy: Array, attrs: dict[str, Any], needs: Sequence[bool],
                  gins: Sequence[Array | None], gparams: dict[str, Array]) -> None:
    if gins[0] is not None:
        ctx.xp.copyto(gins[0], gy.transpose(_inverse(attrs["perm"])))


# -- mean / sum over an axis ----------------------------------------------------------------

def reduce_kernels(mean: bool) -> tuple[Any, Any]:
    """fwd and vjp of `mean` (mean=True) or `sum` over attrs["axis"]."""

    def fwd(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array],
            attrs: dict[str, Any], out: Array) -> None:
        x = ins[0]
        outer, n, inner = _around(x.shape, attrs["axis"] % x.ndim)
        fn = function(TENSOR, f"reduce_axis<{ctype(x.dtype)}>")
        threads = outer * inner * (32 if inner == 1 else 1)
        fn((grid_1d(threads),), (256,), (i64(outer), i32(n), i64(inner),
                                         scalar(x.dtype, 1.0 / n if mean else 1.0), x, out))

    def vjp(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array], y: Array,
            gy: Array, attrs: dict[str, Any], needs: Sequence[bool],
            gins: Sequence[Array | None], gparams: dict[str, Array]) -> None:
        g = gins[0]
        if g is None:
            return
        outer, n, inner = _around(g.shape, attrs["axis"] % g.ndim)
        fn = function(TENSOR, f"broadcast_axis<{ctype(g.dtype)}>")
        fn((grid_1d(g.size),), (256,), (i64(outer), i32(n), i64(inner),
                                        scalar(g.dtype, 1.0 / n if mean else 1.0), gy, g))

    return fwd, vjp


# -- concat along any axis ------------------------------------------------------------------

def _concat(whole: Array, ins: Sequence[Array], parts: Sequence[Array | None], axis: int,
            to_part: bool) -> None:
    """Copy each operand ins[k] (buffer parts[k], None: skip it) into its place in `whole`,
    or with `to_part` its place in `whole` out into parts[k]."""
    a = axis % whole.ndim
    outer, total, inner = _around(whole.shape, a)
    fn = function(TENSOR, f"concat_part<{ctype(whole.dtype)},{'true' if to_part else 'false'}>")
    off = 0
    for x, p in zip(ins, parts, strict=True):
        n = x.shape[a]
        if p is not None and p.size:
            src, dst = (whole, p) if to_part else (p, whole)
            fn((grid_1d(p.size),), (256,), (i64(outer), i32(n), i32(total), i32(off),
                                            i64(inner), src, dst))
        off += n


def concat_fwd(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array],
               attrs: dict[str, Any], out: Array) -> None:
    _concat(out, ins, ins, attrs["axis"], to_part=False)


def concat_vjp(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array], y: Array,
               gy: Array, attrs: dict[str, Any], needs: Sequence[bool],
               gins: Sequence[Array | None], gparams: dict[str, Array]) -> None:
    _concat(gy, ins, gins, attrs["axis"], to_part=True)


# -- batched matmul (cuBLAS strided-batched) ------------------------------------------------

def matmul_applies(q: KernelQuery) -> bool:
    """Float operands whose leading axes are equal (one strided-batched GEMM each way), or
    whose b has no leading axes but ones (a shared right operand: one GEMM over a's rows);
    other broadcasts take the fallback."""
    if q.dtype not in ("float32", "float64") or len(q.shapes) < 2:
        return False  # (a VJP's query lists a, b, the output and its gradient)
    la, lb = q.shapes[0][:-2], q.shapes[1][:-2]
    return la == lb or all(d == 1 for d in lb)


def _dims(a: Array, b: Array) -> tuple[int, int, int, int, bool]:
    """(batch, M, K, N, shared): shared when b is one matrix for every batch of a."""
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    shared = a.shape[:-2] != b.shape[:-2]
    return math.prod(a.shape[:-2]), m, k, n, shared


def matmul_fwd(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array],
               attrs: dict[str, Any], out: Array) -> None:
    a, b = ins
    batch, m, k, n, shared = _dims(a, b)
    if shared:  # C (batch*M, N) = A (batch*M, K) @ B (K, N)
        batch, m = 1, batch * m
    # column-major C^T (N, M) = B^T (N, K) A^T (K, M), per batch
    gemm.cublas_gemm_batched(OP_N, OP_N, n, m, k, b, n, k * n, a, k, m * k, out, n, m * n,
                             batch, ws=gemm_workspace(attrs, batch * m * n * k))


def matmul_vjp(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array], y: Array,
               gy: Array, attrs: dict[str, Any], needs: Sequence[bool],
               gins: Sequence[Array | None], gparams: dict[str, Array]) -> None:
    a, b = ins
    ga, gb = gins
    batch, m, k, n, shared = _dims(a, b)
    if shared:  # b's gradient sums over every row of every batch: one GEMM over a's rows
        batch, m = 1, batch * m
    if ga is not None:  # dA (M, K) = G (M, N) B^T: column-major dA^T = B G^T
        gemm.cublas_gemm_batched(OP_T, OP_N, k, m, n, b, n, k * n, gy, n, m * n, ga, k,
                                 m * k, batch, ws=gemm_workspace(attrs, batch * m * n * k))
    if gb is not None:  # dB (K, N) = A^T G: column-major dB^T = G^T A
        gemm.cublas_gemm_batched(OP_N, OP_T, n, k, m, gy, n, m * n, a, k, m * k, gb, n,
                                 k * n, batch, ws=gemm_workspace(attrs, batch * m * n * k))
