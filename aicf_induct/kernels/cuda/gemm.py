"""The fused linear kernels on the GPU, in three variants each:

- `cublas`: cuBLAS GEMMs (compute type from the precision policy: fp32, tf32 or bf16 with
  fp32 accumulation), then one fused epilogue kernel (bias + activation forward; activation
  backward + bias-gradient reduction);
- `tiled64` / `tiled32`: a tiled SIMT GEMM with the epilogue inside (exact fp32/fp64: best
  where launches, not FLOPs, dominate);
- `wmma` (forward only): a tiled tensor-core GEMM (tf32 or bf16 operands) with the epilogue
  inside.

Row-major buffers are handed to column-major cuBLAS as their transposes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from aicf_induct.ir.ops import Array, OpContext
from aicf_induct.kernels.cuda.compile import check_cublas, cublas, device, function
from aicf_induct.kernels.cuda.launch import (
    NULL,
    act_id,
    ctype,
    gemm_workspace,
    grid_1d,
    i32,
    i64,
    ptr,
    rows,
    scratch,
)
from aicf_induct.kernels.cuda.sources import Family

OP_N, OP_T = 0, 1
CUDA_R_32F, CUDA_R_64F = 0, 1
COMPUTE = {"fp32": 68, "tf32": 77, "bf16": 75}  # CUBLAS_COMPUTE_32F, _FAST_TF32, _FAST_16BF
COMPUTE_64F = 70
GEMM_DEFAULT = -1
# host scalars (pointer mode host), per dtype: (alpha, beta)
_SCALARS: dict[Any, tuple[np.ndarray, np.ndarray]] = {
    np.dtype(np.float32): (np.ones(1, np.float32), np.zeros(1, np.float32)),
            np.dtype(np.float64): (np.ones(1, np.float64), np.zeros(1, np.float64))}
EW_ILP = 4  # vectors per thread per round in elementwise.cu's bias_act and act_bwd
TILES = {"tiled64": (64, 64, 16, 4, 4), "tiled32": (32, 32, 16, 2, 2)}  # BM, BN, BK, TM, TN
GEMM_TILED = Family("gemm_tiled.cu")
GEMM_WMMA = Family("gemm_wmma.cu", toolkit=True)
ELEMENTWISE = Family("elementwise.cu", defines={"EW_ILP": EW_ILP})


def _on_stream(ws: Array) -> tuple[Any, int]:
    """cuBLAS's library and handle on the current stream with `ws` as its workspace (set
    after the stream: cublasSetStream resets it; `launch.gemm_workspace`)."""
    import cupy

    lib, h = cublas()
    check_cublas(lib.cublasSetStream_v2(h, cupy.cuda.get_current_stream().ptr),
                 "cublasSetStream")
    check_cublas(lib.cublasSetWorkspace_v2(h, ws.data.ptr, ws.nbytes), "cublasSetWorkspace")
    return lib, h


def cublas_gemm(precision: str, transa: int, transb: int, m: int, n: int, k: int, a: Array,
                lda: int, b: Array, ldb: int, c: Array, ldc: int, *, ws: Array) -> None:
    """Column-major C (m, n) = op(A) op(B) through cuBLAS on the current stream with the
    workspace `ws` (callable while the stream captures a CUDA graph)."""
    lib, h = _on_stream(ws)
    one, zero = _SCALARS[c.dtype]
    if c.dtype == np.float64:
        dt, compute = CUDA_R_64F, COMPUTE_64F
    else:
        dt, compute = CUDA_R_32F, COMPUTE[precision]
    check_cublas(lib.cublasGemmEx(h, transa, transb, m, n, k, one.ctypes.data, a.data.ptr,
                                  dt, lda, b.data.ptr, dt, ldb, zero.ctypes.data, c.data.ptr,
                                  dt, ldc, compute, GEMM_DEFAULT), "cublasGemmEx")


def cublas_gemm_batched(transa: int, transb: int, m: int, n: int, k: int, a: Array, lda: int,
                        stride_a: int, b: Array, ldb: int, stride_b: int, c: Array, ldc: int,
                        stride_c: int, batch: int, *, ws: Array) -> None:
    """`batch` column-major GEMMs C_i = op(A_i) op(B_i), operand i at pointer + i * stride
    (elements; a stride 0 repeats the operand), in fp32 (or fp64) through one
    cublasGemmStridedBatchedEx on the current stream with the workspace `ws` (callable
    while a stream captures)."""
    lib, h = _on_stream(ws)
    one, zero = _SCALARS[c.dtype]
    dt, compute = (CUDA_R_64F, COMPUTE_64F) if c.dtype == np.float64 else (CUDA_R_32F,
                                                                          COMPUTE["fp32"])
    check_cublas(lib.cublasGemmStridedBatchedEx(
        h, transa, transb, m, n, k, one.ctypes.data, a.data.ptr, dt, lda, stride_a, b.data.ptr,
        dt, ldb, stride_b, zero.ctypes.data, c.data.ptr, dt, ldc, stride_c, batch, compute,
        GEMM_DEFAULT), "cublasGemmStridedBatchedEx")


def xwt(precision: str, x: Array, w: Array, out: Array, *, ws: Array) -> None:
    """out (M, N) = x (M, K) @ w (N, K)ᵀ."""
    (m, k), n = x.shape, w.shape[0]
    cublas_gemm(precision, OP_T, OP_N, n, m, k, w, k, x, k, out, n, ws=ws)


def gw(precision: str, g: Array, w: Array, out: Array, *, ws: Array) -> None:
    """out (M, K) = g (M, N) @ w (N, K)."""
    (m, n), k = g.shape, w.shape[1]
    cublas_gemm(precision, OP_N, OP_N, k, m, n, w, k, g, n, out, k, ws=ws)


def gtx(precision: str, g: Array, x: Array, out: Array, *, ws: Array) -> None:
    """out (N, K) = g (M, N)ᵀ @ x (M, K)."""
    (m, n), k = g.shape, x.shape[1]
    cublas_gemm(precision, OP_N, OP_T, k, n, m, x, k, g, n, out, k, ws=ws)


def tiled(tile: str, m: int, n: int, k: int, a: Array, lda: int, a_kc: bool, b: Array,
          ldb: int, b_nc: bool, c: Array, ldc: int, *, h: Array | None = None, act_a: int = 0,
          epi: int = 0, act_out: int = 0, bias: Array | None = None, z: Array | None = None,
          dbias: Array | None = None) -> None:
    """C = op(A) op(B) with the epilogue inside (gemm_tiled.cu)."""
    bm, bn, bk, tm, tn = TILES[tile]
    flags = f"{'true' if a_kc else 'false'},{'true' if b_nc else 'false'}"
    name = (f"gemm_tiled<{ctype(c.dtype)},{bm},{bn},{bk},{tm},{tn},{flags},{act_a},{epi},"
            f"{act_out}>")
    fn = function(GEMM_TILED, name)
    grid = (math.ceil(n / bn), math.ceil(m / bm))
    fn(grid, ((bm // tm) * (bn // tn),),
       (i32(m), i32(n), i32(k), a, i64(lda), ptr(h), b, i64(ldb), c, i64(ldc), ptr(bias),
        ptr(z), ptr(dbias)))


def bias_act(cin: Array, bias: Array | None, z: Array | None, out: Array, act: int) -> None:
    """out = act(cin + bias); z = cin + bias when given (either may alias cin)."""
    m, n = cin.shape
    vec = 4 if cin.dtype == np.float32 and n % 4 == 0 and all(
        a is None or a.data.ptr % 16 == 0 for a in (cin, z, out)) else 1
    fn = function(ELEMENTWISE, f"bias_act<{ctype(out.dtype)},{act},{vec}>")
    fn((grid_1d(math.ceil(m * n / (vec * EW_ILP))),), (256,),
       (i64(m), i32(n), cin, ptr(bias), ptr(z), out))


def act_bwd_bias(attrs: dict[str, Any], g: Array, h: Array | None, gz: Array | None,
                 db: Array, act: int) -> None:
    """gz = act'(h)·g (stored when gz is given) and db = Σ_rows gz, in one launch: row chunks
    enough to fill the device (at least 64 rows each), summed by the chunk that ends last."""
    import cupy

    m, n = g.shape
    t = ctype(g.dtype)
    cols = math.ceil(n / 32)
    chunks = max(1, min(math.ceil(2 * device().sms / cols), math.ceil(m / 64)))
    per = math.ceil(m / chunks)
    chunks = math.ceil(m / per) if m else 1
    partial = db if chunks == 1 else scratch(attrs, "colsum", (chunks, n), g.dtype)
    tickets = scratch(attrs, "colsum_tickets", (cols,), cupy.uint32, zero=True)
    fn = function(ELEMENTWISE, f"act_bwd_bias<{t},{act}>")
    fn((cols, chunks), (32, 32), (i32(m), i32(n), i32(max(per, 1)), g, ptr(h), ptr(gz),
                                  partial, db, tickets))


def colsum_finalize(partial: Array, stride: int, out: Array) -> None:
    """out[j] = Σ_r partial[r, j] (rows `stride` apart), in order."""
    chunks, n = partial.shape[0], out.shape[0]
    fn = function(ELEMENTWISE, f"colsum_finalize<{ctype(out.dtype)}>")
    fn((math.ceil(n / 256),), (256,), (i32(chunks), i32(n), i32(stride), partial, out))


def act_bwd(h: Array, g: Array, out: Array, act: int) -> None:
    n = g.size
    fn = function(ELEMENTWISE, f"act_bwd<{ctype(g.dtype)},{act}>")
    fn((grid_1d(math.ceil(n / EW_ILP)),), (256,), (i64(n), h, g, out))


# -- linear_act --------------------------------------------------------------------------

def _fwd_operands(ins: Sequence[Array], outs: Sequence[Array | None],
                  params: dict[str, Array]) -> tuple[Array, Array, Array | None, Array,
                                                     Array | None]:
    x = rows(ins[0])
    a = rows(outs[0])
    z = rows(outs[1]) if len(outs) > 1 and outs[1] is not None else None
    return x, params["weight"], params.get("bias"), a, z


def _macs(x: Array, w: Array) -> int:
    """Multiply-adds of x (rows, in) times w (out, in) transposed."""
    return int(x.size) * int(w.shape[0])


def linear_act_cublas(ctx: OpContext, ins: Sequence[Array], outs: Sequence[Array | None],
                      params: dict[str, Array], gparams: dict[str, Array],
                      attrs: dict[str, Any]) -> None:
    x, w, b, a, z = _fwd_operands(ins, outs, params)
    act = act_id(attrs.get("act"), attrs.get("act_attrs"))
    target = z if z is not None else a
    xwt(attrs.get("precision", "fp32"), x, w, target, ws=gemm_workspace(attrs, _macs(x, w)))
    if b is not None or act != 0:
        bias_act(target, b, z, a, act)
    elif z is not None:  # no bias, no activation, z wanted too: a is z
        a[...] = z


def linear_act_cublaslt(ctx: OpContext, ins: Sequence[Array], outs: Sequence[Array | None],
                        params: dict[str, Array], gparams: dict[str, Array],
                        attrs: dict[str, Any]) -> None:
    """The bias and ReLU inside the GEMM (lt.py); with the pre-activation wanted too, the
    GEMM + bias writes z and one pass applies the activation."""
    from aicf_induct.kernels.cuda.lt import xwt_epilogue

    x, w, b, a, z = _fwd_operands(ins, outs, params)
    relu = attrs.get("act") == "relu"
    prec = attrs.get("precision", "fp32")
    ws = gemm_workspace(attrs, _macs(x, w))
    if z is None:
        xwt_epilogue(prec, x, w, b, relu, a, ws=ws)
        return
    xwt_epilogue(prec, x, w, b, False, z, ws=ws)
    if relu:
        bias_act(z, None, None, a, act_id("relu"))
    else:
        a[...] = z


def linear_act_tiled(tile: str) -> Any:
    def run(ctx: OpContext, ins: Sequence[Array], outs: Sequence[Array | None],
            params: dict[str, Array], gparams: dict[str, Array], attrs: dict[str, Any]) -> None:
        x, w, b, a, z = _fwd_operands(ins, outs, params)
        (m, k), n = x.shape, w.shape[0]
        act = act_id(attrs.get("act"), attrs.get("act_attrs"))
        tiled(tile, m, n, k, x, k, True, w, k, False, a, n, epi=1, act_out=act, bias=b, z=z)

    return run


def linear_act_wmma(ctx: OpContext, ins: Sequence[Array], outs: Sequence[Array | None],
                    params: dict[str, Array], gparams: dict[str, Array],
                    attrs: dict[str, Any]) -> None:
    x, w, b, a, z = _fwd_operands(ins, outs, params)
    (m, k), n = x.shape, w.shape[0]
    act = act_id(attrs.get("act"), attrs.get("act_attrs"))
    prec = 1 if attrs.get("precision") == "tf32" else 2
    fn = function(GEMM_WMMA, f"gemm_wmma_fwd<{act},{prec}>")
    fn((math.ceil(n / 64), math.ceil(m / 64)), (128,),
       (i32(m), i32(n), i32(k), x, w, ptr(b), ptr(z), a))


# -- act_linear_bwd ----------------------------------------------------------------------

def _bwd_operands(ins: Sequence[Array], outs: Sequence[Array | None]) -> tuple[
        Array, Array, Array | None, Array | None, Array | None]:
    x, g = rows(ins[0]), rows(ins[1])
    h = rows(ins[2]) if len(ins) > 2 else None
    gx = rows(outs[0]) if outs[0] is not None else None
    gz = rows(outs[1]) if len(outs) > 1 and outs[1] is not None else None
    return x, g, h, gx, gz


def act_linear_bwd_cublas(ctx: OpContext, ins: Sequence[Array], outs: Sequence[Array | None],
                          params: dict[str, Array], gparams: dict[str, Array],
                          attrs: dict[str, Any]) -> None:
    x, g, h, gx, gz = _bwd_operands(ins, outs)
    prec = attrs.get("precision", "fp32")
    act = act_id(attrs.get("act"), attrs.get("act_attrs"))
    db = gparams.get("bias")
    if act != 0:
        if gz is None:
            gz = scratch(attrs, "gz", g.shape, g.dtype)
        if db is not None:
            act_bwd_bias(attrs, g, h, gz, db, act)
        else:
            act_bwd(h, g, gz, act)
    else:
        gz = g
        if db is not None:
            act_bwd_bias(attrs, g, None, None, db, 0)
    ws = gemm_workspace(attrs, _macs(x, params["weight"]))
    if "weight" in gparams:
        gtx(prec, gz, x, gparams["weight"], ws=ws)
    if gx is not None:
        gw(prec, gz, params["weight"], gx, ws=ws)


def act_linear_bwd_cublaslt(ctx: OpContext, ins: Sequence[Array],
                            outs: Sequence[Array | None], params: dict[str, Array],
                            gparams: dict[str, Array], attrs: dict[str, Any]) -> None:
    """gz = act'(h)·g in one elementwise pass; the weight gradient with the bias gradient in
    its epilogue, and gx, through cuBLASLt (lt.py), no split-K reduction kernels."""
    from aicf_induct.kernels.cuda import lt

    x, g, h, gx, gz = _bwd_operands(ins, outs)
    prec = attrs.get("precision", "fp32")
    act = act_id(attrs.get("act"), attrs.get("act_attrs"))
    db = gparams.get("bias")
    if act != 0:
        if gz is None:
            gz = scratch(attrs, "gz", g.shape, g.dtype)
        assert h is not None
        act_bwd(h, g, gz, act)
    else:
        gz = g
    ws = gemm_workspace(attrs, _macs(x, params["weight"]))
    done = "weight" in gparams and lt.wgrad_bgrad(prec, gz, x, gparams["weight"], db, ws=ws)
    if not done and "weight" in gparams:  # no bias-gradient epilogue here: cuBLAS + a pass
        gtx(prec, gz, x, gparams["weight"], ws=ws)
    if not done and db is not None:
        act_bwd_bias(attrs, gz, None, None, db, 0)
    if gx is not None:
        lt.dgrad(prec, gz, params["weight"], gx, ws=ws)


def act_linear_bwd_tiled(tile: str) -> Any:
    def run(ctx: OpContext, ins: Sequence[Array], outs: Sequence[Array | None],
            params: dict[str, Array], gparams: dict[str, Array], attrs: dict[str, Any]) -> None:
        x, g, h, gx, _ = _bwd_operands(ins, outs)
        (m, n), k = g.shape, x.shape[1]
        act = act_id(attrs.get("act"), attrs.get("act_attrs"))
        db = gparams.get("bias")
        if "weight" in gparams:  # gW (n, k) = gzᵀ x, and the bias gradient from gz's tiles
            tiled(tile, n, k, m, g, n, False, x, k, True, gparams["weight"], k, h=h,
                  act_a=act, epi=2 if db is not None else 0, dbias=db)
        elif db is not None:
            act_bwd_bias(attrs, g, h, None, db, act)
        if gx is not None:  # gx (m, k) = gz W
            tiled(tile, m, k, n, g, n, True, params["weight"], k, True, gx, k, h=h, act_a=act)

    return run


__all__ = ["NULL", "TILES", "act_linear_bwd_cublas", "act_linear_bwd_cublaslt",
           "act_linear_bwd_tiled",
           "linear_act_cublas", "linear_act_cublaslt", "linear_act_tiled", "linear_act_wmma"]
