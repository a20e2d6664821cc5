"""Op-level CUDA kernels (the registry's fwd/vjp signatures) and the fused softmax +
cross-entropy. Each computes what the op table's reference computes; tests/kernels checks
them on fresh random inputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aicf_induct.ir.ops import Array, OpContext, activation
from aicf_induct.kernels.cuda import gemm
from aicf_induct.kernels.cuda.compile import device, function
from aicf_induct.kernels.cuda.launch import (
    act_id,
    ctype,
    f64,
    grid_1d,
    i32,
    i64,
    ptr,
    rng_args,
    row_chunks,
    rows,
    scalar,
    scratch,
)
from aicf_induct.kernels.cuda.sources import Family

# -- activations -------------------------------------------------------------------------


def act_fwd_kernel(op: str) -> Any:
    def fwd(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array],
            attrs: dict[str, Any], out: Array) -> None:
        x = ins[0].reshape(1, -1)  # one row: vector loads whenever the size allows
        gemm.bias_act(x, None, None, out.reshape(1, -1), act_id(op, attrs))

    return fwd


def act_vjp_kernel(op: str) -> Any:
    def vjp(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array], y: Array, gy: Array,
            attrs: dict[str, Any], needs: Sequence[bool], gins: Sequence[Array | None],
            gparams: dict[str, Array]) -> None:
        if gins[0] is not None:
            h = y if activation(op, attrs).from_output else ins[0]
            gemm.act_bwd(h, gy, gins[0], act_id(op, attrs))

    return vjp


# -- add ---------------------------------------------------------------------------------

def add_fwd(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array],
            attrs: dict[str, Any], out: Array) -> None:
    ctx.xp.add(ins[0], ins[1], out=out)


def add_vjp(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array], y: Array, gy: Array,
            attrs: dict[str, Any], needs: Sequence[bool], gins: Sequence[Array | None],
            gparams: dict[str, Array]) -> None:
    for g in gins:
        if g is not None:
            ctx.xp.copyto(g, gy)


# -- linear (unfused; the fusion pass routes linears through gemm.*) ---------------------

def _fused_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    fa: dict[str, Any] = attrs.setdefault("_fused", {"act": None, "act_attrs": {},
                                                     "precision": "fp32"})
    return fa


def linear_fwd(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array],
               attrs: dict[str, Any], out: Array) -> None:
    gemm.linear_act_cublas(ctx, ins, [out, None], params, {}, _fused_attrs(attrs))


def linear_vjp(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array], y: Array,
               gy: Array, attrs: dict[str, Any], needs: Sequence[bool],
               gins: Sequence[Array | None], gparams: dict[str, Array]) -> None:
    gemm.act_linear_bwd_cublas(ctx, [ins[0], gy], [gins[0], None], params, gparams,
                               _fused_attrs(attrs))


# -- losses ------------------------------------------------------------------------------

CE_WARPS = 8  # rows in flight per block of softmax_ce (a warp per row)
LOSSES = Family("losses.cu")
LAYERNORM = Family("layernorm.cu")
BATCHNORM = Family("batchnorm.cu")
DROPOUT = Family("dropout.cu")


def _softmax_ce(attrs: dict[str, Any], logits: Array, labels: Array, gy: Array | None,
                eps: float, loss: Array | None, glogits: Array | None) -> None:
    m, c = logits.shape
    blocks = max(1, min(-(-m // CE_WARPS), 4 * device().sms))
    partials = scratch(attrs, "ce_partials", (blocks,), "float64")
    counter = scratch(attrs, "ce_counter", (1,), "uint32", zero=True)
    fn = function(LOSSES, f"softmax_ce<{ctype(logits.dtype)}>")
    fn((blocks,), (32 * CE_WARPS,), (i32(m), i32(c), logits, labels, ptr(gy), f64(eps),
                                     ptr(loss), ptr(glogits), partials, counter))


def softmax_ce(ctx: OpContext, ins: Sequence[Array], outs: Sequence[Array | None],
               params: dict[str, Array], gparams: dict[str, Array],
               attrs: dict[str, Any]) -> None:
    logits, labels = ins[0], ins[1]
    gy = ins[2] if len(ins) > 2 else None  # absent: the loss is the root (gradient 1)
    _softmax_ce(attrs, logits, labels, gy, float(attrs.get("label_smoothing", 0.0)), outs[0],
                outs[1])


def cross_entropy_fwd(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array],
                      attrs: dict[str, Any], out: Array) -> None:
    _softmax_ce(attrs, ins[0], ins[1], None, float(attrs["label_smoothing"]), out, None)


def cross_entropy_vjp(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array], y: Array,
                      gy: Array, attrs: dict[str, Any], needs: Sequence[bool],
                      gins: Sequence[Array | None], gparams: dict[str, Array]) -> None:
    if gins[0] is not None:
        _softmax_ce(attrs, ins[0], ins[1], gy, float(attrs["label_smoothing"]), None, gins[0])


def mse_fwd(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array],
            attrs: dict[str, Any], out: Array) -> None:
    p = ins[0]
    fn = function(LOSSES, f"mse_fwd<{ctype(p.dtype)}>")
    fn((1,), (1024,), (i64(p.size), p, ins[1].reshape(p.shape), out))


def mse_vjp(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array], y: Array, gy: Array,
            attrs: dict[str, Any], needs: Sequence[bool], gins: Sequence[Array | None],
            gparams: dict[str, Array]) -> None:
    g = gins[0]
    if g is not None:
        p = ins[0]
        fn = function(LOSSES, f"mse_vjp<{ctype(p.dtype)}>")
        fn((grid_1d(p.size),), (256,), (i64(p.size), p, ins[1].reshape(p.shape), gy, g))


# -- layernorm ---------------------------------------------------------------------------

def layernorm_fwd(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array],
                  attrs: dict[str, Any], out: Array) -> None:
    x = rows(ins[0])
    m, d = x.shape
    fn = function(LAYERNORM, f"layernorm_fwd<{ctype(x.dtype)}>")
    fn(((m + 7) // 8,), (256,), (i32(m), i32(d), x, ptr(params.get("weight")),
                                ptr(params.get("bias")), f64(attrs["eps"]), rows(out)))


def layernorm_vjp(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array], y: Array,
                  gy: Array, attrs: dict[str, Any], needs: Sequence[bool],
                  gins: Sequence[Array | None], gparams: dict[str, Array]) -> None:
    x, g = rows(ins[0]), rows(gy)
    m, d = x.shape
    t = ctype(x.dtype)
    want_params = "weight" in gparams
    stats = scratch(attrs, "stats", (m, 2), x.dtype) if want_params else None
    gx = rows(gins[0]) if gins[0] is not None else None
    fn = function(LAYERNORM, f"layernorm_bwd<{t}>")
    fn(((m + 7) // 8,), (256,), (i32(m), i32(d), x, ptr(params.get("weight")), g,
                                f64(attrs["eps"]), ptr(gx), ptr(stats)))
    if not want_params:
        return
    cols = (d + 31) // 32
    chunks, per = row_chunks(m, cols)
    partial = scratch(attrs, "partial", (chunks, 2, d), x.dtype)
    fn = function(LAYERNORM, f"ln_bwd_params<{t}>")
    fn((cols, chunks), (32, 32), (i32(m), i32(d), i32(per), x, g, stats, partial))
    gemm.colsum_finalize(partial[:, 0, :], 2 * d, gparams["weight"])
    gemm.colsum_finalize(partial[:, 1, :], 2 * d, gparams["bias"])


# -- batchnorm ---------------------------------------------------------------------------

BN_THREADS = 128  # feature columns per block
BN_EVAL_ROWS = 256  # rows per block in eval mode (the running statistics: no reduction)


def batchnorm_fwd(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array],
                  attrs: dict[str, Any], out: Array) -> None:
    """Normalise over the batch axis; in training the running statistics move in place
    (the reference hands them back as ctx.state_updates, which the plan then copies)."""
    x = ins[0]
    m, d = x.shape
    per = m if ctx.training else BN_EVAL_ROWS
    fn = function(BATCHNORM, f"batchnorm_fwd<{ctype(x.dtype)}>")
    fn(((d + BN_THREADS - 1) // BN_THREADS, (m + per - 1) // per), (BN_THREADS,),
       (i32(m), i32(d), i32(per), x, ptr(params.get("weight")), ptr(params.get("bias")),
        params["running_mean"], params["running_var"], f64(attrs["eps"]),
        f64(attrs["momentum"]), i32(int(ctx.training)), out))


def batchnorm_vjp(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array], y: Array,
                  gy: Array, attrs: dict[str, Any], needs: Sequence[bool],
                  gins: Sequence[Array | None], gparams: dict[str, Array]) -> None:
    x = ins[0]
    m, d = x.shape
    fn = function(BATCHNORM, f"batchnorm_bwd<{ctype(x.dtype)}>")
    fn(((d + BN_THREADS - 1) // BN_THREADS,), (BN_THREADS,),
       (i32(m), i32(d), x, ptr(params.get("weight")), gy, params["running_mean"],
        params["running_var"], f64(attrs["eps"]), i32(int(ctx.training)), ptr(gins[0]),
        ptr(gparams.get("weight")), ptr(gparams.get("bias"))))


# -- dropout -----------------------------------------------------------------------------

def _dropout(ctx: OpContext, x: Array, out: Array, p: float) -> None:
    if not ctx.training or p == 0.0:
        ctx.xp.copyto(out, x)
        return
    n = x.size
    fn = function(DROPOUT, f"dropout_apply<{ctype(x.dtype)}>")
    fn((grid_1d((n + 3) // 4),), (256,),
       (i64(n), x, out, f64(p), scalar(x.dtype, 1.0 / (1.0 - p)), *rng_args(ctx)))


def dropout_fwd(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array],
                attrs: dict[str, Any], out: Array) -> None:
    _dropout(ctx, ins[0], out, float(attrs["p"]))


def dropout_vjp(ctx: OpContext, ins: Sequence[Array], params: dict[str, Array], y: Array,
                gy: Array, attrs: dict[str, Any], needs: Sequence[bool],
                gins: Sequence[Array | None], gparams: dict[str, Array]) -> None:
    if gins[0] is not None:
        _dropout(ctx, gy, gins[0], float(attrs["p"]))
