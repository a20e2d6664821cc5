"""GEMMs through cuBLASLt with work folded into the epilogue: the forward linear's bias and
ReLU (CUBLASLT_EPILOGUE_RELU_BIAS and kin: no elementwise pass over the output afterwards)
and the weight gradient's bias gradient (CUBLASLT_EPILOGUE_BGRADB: the column sums of gz
from the operand the GEMM reads anyway). The backward's GEMMs ask for algorithms without a
separate split-K reduction kernel (one launch each: the small sizes are bound by launches).

One `LtGemm` per problem (shapes, leading dimensions, pointer alignments, epilogue,
precision), built once (descriptors and the heuristic's first algorithm) and kept in the
compile cache; a call sets the bias pointer and launches on the current stream, so a CUDA
graph may capture it. Each call brings its workspace (the instruction's own,
`launch.gemm_workspace`: concurrent streams never share one). Row-major buffers go to
column-major cuBLASLt as their transposes, as in gemm.py.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from aicf_induct.kernels.cuda.compile import check_cublas, cublaslt

CUDA_R_32F = 0
COMPUTE = {"fp32": 68, "tf32": 77}  # CUBLAS_COMPUTE_32F, _32F_FAST_TF32
DESC_TRANSA, DESC_TRANSB, DESC_EPILOGUE, DESC_BIAS_POINTER = 3, 4, 7, 8
PREF_MAX_WORKSPACE_BYTES, PREF_REDUCTION_SCHEME_MASK = 1, 3
REDUCTION_INPLACE = 1  # split-K summed in the output by the GEMM itself, no second kernel
EPILOGUE_DEFAULT, EPILOGUE_BGRADB = 1, 512
PREF_MIN_ALIGNMENT = {"a": 5, "b": 6, "c": 7, "d": 8}
EPILOGUE = {(False, False): 1, (False, True): 2, (True, False): 4, (True, True): 6}
# (bias, relu) -> DEFAULT, RELU, BIAS, RELU_BIAS
_ONE, _ZERO = np.ones(1, np.float32), np.zeros(1, np.float32)
_PLANS: dict[tuple[Any, ...], LtGemm | None] = {}  # None: no algorithm


class _Heuristic(ctypes.Structure):  # cublasLtMatmulHeuristicResult_t
    _fields_ = [("algo", ctypes.c_uint64 * 8), ("workspace", ctypes.c_size_t),
                ("state", ctypes.c_int), ("waves", ctypes.c_float),
                ("reserved", ctypes.c_int * 4)]


def alignment(ptr: int) -> int:
    """The largest power of two (at most 256) that divides a device address."""
    return min(256, ptr & -ptr) if ptr else 256


class LtGemm:
    """Column-major D (m, n) = op(A) op(B) [+ bias over rows] [relu], fp32 storage."""

    def __init__(self, precision: str, transa: int, transb: int, m: int, n: int, k: int,
                 lda: int, ldb: int, ldd: int, epilogue: int, aligns: tuple[int, ...],
                 ws_bytes: int, reduction_mask: int | None = None) -> None:
        lib, handle = cublaslt()
        self.lib, self.handle = lib, handle
        vp = ctypes.c_void_p
        self.desc = vp()
        check_cublas(lib.cublasLtMatmulDescCreate(ctypes.byref(self.desc), COMPUTE[precision],
                                                  CUDA_R_32F), "cublasLtMatmulDescCreate")
        self._set(DESC_TRANSA, ctypes.c_int32(transa))
        self._set(DESC_TRANSB, ctypes.c_int32(transb))
        self._set(DESC_EPILOGUE, ctypes.c_uint32(epilogue))
        self.has_bias = epilogue in (4, 6, EPILOGUE_BGRADB)
        ra, ca = (k, m) if transa else (m, k)
        rb, cb = (n, k) if transb else (k, n)
        self.a_l, self.b_l, self.d_l = (self._layout(r, c, ld) for r, c, ld in
                                        ((ra, ca, lda), (rb, cb, ldb), (m, n, ldd)))
        pref = vp()
        check_cublas(lib.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)),
                     "cublasLtMatmulPreferenceCreate")
        ws = ctypes.c_uint64(int(ws_bytes))
        check_cublas(lib.cublasLtMatmulPreferenceSetAttribute(
            pref, PREF_MAX_WORKSPACE_BYTES, ctypes.byref(ws), 8), "preference")
        if reduction_mask is not None:
            mask = ctypes.c_uint32(reduction_mask)
            check_cublas(lib.cublasLtMatmulPreferenceSetAttribute(
                pref, PREF_REDUCTION_SCHEME_MASK, ctypes.byref(mask), 4), "preference")
        for key, al in zip("abcd", aligns[:4], strict=True):
            v = ctypes.c_uint32(al)
            check_cublas(lib.cublasLtMatmulPreferenceSetAttribute(
                pref, PREF_MIN_ALIGNMENT[key], ctypes.byref(v), 4), "preference")
        if self.has_bias:  # the heuristic reads the bias pointer's alignment from it
            self.set_bias(aligns[4])
        self.heur = _Heuristic()
        count = ctypes.c_int(0)
        status = lib.cublasLtMatmulAlgoGetHeuristic(
            handle, self.desc, self.a_l, self.b_l, self.d_l, self.d_l, pref, 1,
            ctypes.byref(self.heur), ctypes.byref(count))
        if status != 0 or count.value < 1 or self.heur.state != 0:
            raise LookupError(f"cuBLASLt has no algorithm for epilogue {epilogue}, "
                              f"{(m, n, k)}, {precision}, reduction mask {reduction_mask} "
                              f"(status {status})")

    def _set(self, attr: int, value: Any) -> None:
        check_cublas(self.lib.cublasLtMatmulDescSetAttribute(
            self.desc, attr, ctypes.byref(value), ctypes.sizeof(value)),
            "cublasLtMatmulDescSetAttribute")

    def _layout(self, rows: int, cols: int, ld: int) -> ctypes.c_void_p:
        out = ctypes.c_void_p()
        check_cublas(self.lib.cublasLtMatrixLayoutCreate(ctypes.byref(out), CUDA_R_32F, rows,
                                                         cols, ld), "cublasLtMatrixLayoutCreate")
        return out

    def set_bias(self, ptr: int) -> None:
        self._set(DESC_BIAS_POINTER, ctypes.c_void_p(ptr))

    def __call__(self, a: Any, b: Any, d: Any, bias: Any | None, ws: Any) -> None:
        import cupy

        assert ws.nbytes >= self.heur.workspace, (ws.nbytes, self.heur.workspace)
        if self.has_bias and bias is not None:
            self.set_bias(int(bias.data.ptr))
        check_cublas(self.lib.cublasLtMatmul(
            self.handle, self.desc, _ONE.ctypes.data, a.data.ptr, self.a_l, b.data.ptr,
            self.b_l, _ZERO.ctypes.data, d.data.ptr, self.d_l, d.data.ptr, self.d_l,
            ctypes.addressof(self.heur.algo), ws.data.ptr,
            self.heur.workspace, cupy.cuda.get_current_stream().ptr), "cublasLtMatmul")


def gemm(precision: str, transa: int, transb: int, m: int, n: int, k: int, a: Any, lda: int,
         b: Any, ldb: int, d: Any, ldd: int, bias: Any | None = None,
         epilogue: int = EPILOGUE_DEFAULT, reduction_mask: int | None = None, *,
         ws: Any) -> bool:
    """Column-major D (m, n) = op(A) op(B) with `epilogue` (bias: its vector), one call,
    with the workspace `ws` (its size is part of the plan: the heuristic may use it all).
    With a reduction mask that no algorithm meets, again without it; False (nothing done)
    when cuBLASLt has no algorithm for this epilogue at all."""
    import cupy

    aligns = (alignment(a.data.ptr), alignment(b.data.ptr), alignment(d.data.ptr),
              alignment(d.data.ptr), alignment(bias.data.ptr) if bias is not None else 256)
    key = (cupy.cuda.runtime.getDevice(), precision, transa, transb, m, n, k, lda, ldb, ldd,
           epilogue, aligns, reduction_mask, int(ws.nbytes))
    if key not in _PLANS:
        _PLANS[key] = None
        for mask in dict.fromkeys((reduction_mask, None)):
            try:
                _PLANS[key] = LtGemm(precision, transa, transb, m, n, k, lda, ldb, ldd,
                                     epilogue, aligns, int(ws.nbytes), mask)
                break
            except LookupError:
                continue
    plan = _PLANS[key]
    if plan is None:
        return False
    plan(a, b, d, bias, ws)
    return True


def wgrad_bgrad(precision: str, g: Any, x: Any, gw: Any, gb: Any | None, *, ws: Any) -> bool:
    """gw (N, K) = g (M, N)ᵀ @ x (M, K), and gb (N,) = Σ_rows g when given; False when the
    bias-gradient epilogue has no algorithm here (then gw is not written either)."""
    (m, n), k = g.shape, x.shape[1]
    return gemm(precision, 0, 1, k, n, m, x, k, g, n, gw, k, gb,
                EPILOGUE_BGRADB if gb is not None else EPILOGUE_DEFAULT, REDUCTION_INPLACE,
                ws=ws)


def dgrad(precision: str, g: Any, w: Any, gx: Any, *, ws: Any) -> None:
    """gx (M, K) = g (M, N) @ w (N, K)."""
    (m, n), k = g.shape, w.shape[1]
    if not gemm(precision, 0, 0, k, m, n, w, k, g, n, gx, k, None, EPILOGUE_DEFAULT,
                REDUCTION_INPLACE, ws=ws):
        raise RuntimeError(f"cuBLASLt has no algorithm for {(k, m, n)}, {precision}")


def xwt_epilogue(precision: str, x: Any, w: Any, bias: Any | None, relu: bool,
                 out: Any, *, ws: Any) -> None:
    """out (M, N) = [relu](x (M, K) @ w (N, K)ᵀ [+ bias]), float32, one cuBLASLt call."""
    (m, k), n = x.shape, w.shape[0]
    if not gemm(precision, 1, 0, n, m, k, w, k, x, k, out, n, bias,
                EPILOGUE[(bias is not None, relu)], ws=ws):
        raise RuntimeError(f"cuBLASLt has no algorithm for {(n, m, k)}, {precision}")
