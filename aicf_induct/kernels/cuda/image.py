"""`conv2d` and `pool` on the GPU (image.cu). conv2d is im2col + the cuBLAS GEMM each way
(as the reference: columns (N*OH*OW, C*kh*kw) times the weight (O, C*kh*kw)), the bias added
while the rows go back to NCHW; its backward turns the gradient into rows, two GEMMs give the
weight's and the columns' gradients, and col2im gathers the input's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aicf_induct.ir.ops import Array, OpContext
from aicf_induct.kernels.cuda import gemm
from aicf_induct.kernels.cuda.compile import function
from aicf_induct.kernels.cuda.launch import (
    act_id,
    ctype,
    gemm_workspace,
    grid_1d,
    i32,
    i64,
    ptr,
    scratch,
)
from aicf_induct.kernels.cuda.sources import Family

IMAGE = Family("image.cu")


def _window(x_shape: tuple[int, ...], out_hw: tuple[int, int],
            attrs: dict[str, Any]) -> tuple[Any, ...]:
    """The kernels' window arguments: C, H, W, OH, OW, KH, KW, SH, SW, PH, PW."""
    _, c, h, w = x_shape
    (kh, kw), (sh, sw), (ph, pw) = attrs["kernel_size"], attrs["stride"], attrs["padding"]
    return tuple(i32(v) for v in (c, h, w, *out_hw, kh, kw, sh, sw, ph, pw))


# -- conv2d -------------------------------------------------------------------------------

def conv2d_fwd(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array],
               attrs: dict[str, Any], out: Array) -> None:
    x, w = ins[0], params["weight"]
    n, o, oh, ow = out.shape
    t = ctype(x.dtype)
    win = _window(x.shape, (oh, ow), attrs)
    ck = w.size // o
    cols = scratch(attrs, "cols", (n * oh * ow, ck), x.dtype)
    function(IMAGE, f"im2col<{t}>")((grid_1d(cols.size),), (256,), (i64(n), *win, x, cols))
    rows = scratch(attrs, "rows", (n * oh * ow, o), x.dtype)
    gemm.xwt("fp32", cols, w.reshape(o, ck), rows, ws=gemm_workspace(attrs, cols.size * o))
    function(IMAGE, f"rows_to_nchw<{t}>")((grid_1d(out.size),), (256,),
                                          (i64(n), i32(o), i32(oh * ow), rows,
                                           ptr(params.get("bias")), out))


def conv2d_vjp(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array], y: Array,
               gy: Array, attrs: dict[str, Any], needs: Sequence[bool],
               gins: Sequence[Array | None], gparams: dict[str, Array]) -> None:
    x, w = ins[0], params["weight"]
    n, o, oh, ow = gy.shape
    t = ctype(x.dtype)
    win = _window(x.shape, (oh, ow), attrs)
    ck = w.size // o
    g2 = scratch(attrs, "grows", (n * oh * ow, o), x.dtype)
    function(IMAGE, f"nchw_to_rows<{t}>")((grid_1d(g2.size),), (256,),
                                          (i64(n), i32(o), i32(oh * ow), gy, g2))
    if "weight" in gparams:  # dW (O, CK) = g2ᵀ cols
        cols = scratch(attrs, "cols", (n * oh * ow, ck), x.dtype)
        function(IMAGE, f"im2col<{t}>")((grid_1d(cols.size),), (256,), (i64(n), *win, x, cols))
        gemm.gtx("fp32", g2, cols, gparams["weight"].reshape(o, ck),
                 ws=gemm_workspace(attrs, g2.shape[0] * ck * o))
    if "bias" in gparams:
        gemm.act_bwd_bias(attrs.setdefault("_bias", {}), g2, None, None, gparams["bias"],
                          act_id(None))
    if gins[0] is not None:  # dcols = g2 W, then each input element gathers its columns
        gcols = scratch(attrs, "gcols", (n * oh * ow, ck), x.dtype)
        gemm.gw("fp32", g2, w.reshape(o, ck), gcols,
                ws=gemm_workspace(attrs, g2.shape[0] * ck * o))
        function(IMAGE, f"col2im<{t}>")((grid_1d(x.size),), (256,),
                                        (i64(n), *win, gcols, gins[0]))


# -- pool ---------------------------------------------------------------------------------

def _mode(attrs: dict[str, Any]) -> str:
    return "true" if attrs["mode"] == "max" else "false"


def pool_fwd(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array],
             attrs: dict[str, Any], out: Array) -> None:
    x = ins[0]
    fn = function(IMAGE, f"pool_fwd<{ctype(x.dtype)},{_mode(attrs)}>")
    fn((grid_1d(out.size),), (256,),
       (i64(x.shape[0]), *_window(x.shape, out.shape[2:], attrs), x, out))


def pool_vjp(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array], y: Array,
             gy: Array, attrs: dict[str, Any], needs: Sequence[bool],
             gins: Sequence[Array | None], gparams: dict[str, Array]) -> None:
    g = gins[0]
    if g is None:
        return
    x = ins[0]
    fn = function(IMAGE, f"pool_bwd<{ctype(x.dtype)},{_mode(attrs)}>")
    fn((grid_1d(x.size),), (256,),
       (i64(x.shape[0]), *_window(x.shape, gy.shape[2:], attrs), x, gy, g))
