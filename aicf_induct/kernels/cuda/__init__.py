"""CUDA kernels through CuPy. Importing this package registers them for device "cuda" and
imports nothing from CuPy: sources compile on first use (compile.py), per device.

| op / fused op  | variants (kernel names)                                        |
|----------------|----------------------------------------------------------------|
| linear_act     | .cublas (GEMM, then one fused epilogue), .cublaslt (float32,   |
|                | no activation or ReLU: bias and ReLU in cuBLASLt's epilogue),  |
|                | .tiled64, .tiled32                                             |
|                | (SIMT, epilogue inside), .wmma (tensor cores, tf32 or bf16     |
|                | operands, epilogue inside)                                     |
| act_linear_bwd | .cublas (act' + bias-gradient kernel, two GEMMs), .cublaslt    |
|                | (float32: act' pass, then cuBLASLt GEMMs, the bias gradient in |
|                | the weight gradient's epilogue), .tiled64,                     |
|                | .tiled32 (act' applied on load, bias gradient from the tiles)  |
| softmax_ce     | .cuda (one pass: loss and gradient)                            |
| each activation op (ir.ops.ACTIVATIONS), add, linear, cross_entropy, mse,       |
| layernorm, batchnorm, dropout | .fwd.cuda, .vjp.cuda                            |
| attention (fused core, up to attention.ATTN_MAX tokens and head width),         |
| embedding, numeric_tokenizer (tokens.py), conv2d, pool (image.py), mean, sum,   |
| concat, matmul, reshape, transpose (tensor_ops.py) | .fwd.cuda, .vjp.cuda       |

The optimizer kernel (optim.py) and the one-kernel MLP step (mlp_step.py: a whole forward,
loss and backward of an MLP chain in one persistent launch) are launched by
runtime.cuda_step, not through the registry; it times the latter against the plan per shape.
Without a GPU, `available()` is False and nothing here is ever called. The device code is
in this folder's .cu/.cuh files (sources.py says how each is compiled).
"""

from __future__ import annotations

from aicf_induct.ir.ops import ACTIVATIONS
from aicf_induct.kernels.cuda import attention, gemm, image, ops, tensor_ops, tokens
from aicf_induct.kernels.registry import REGISTRY, Kernel, KernelFn, KernelQuery

FLOATS = ("float32", "float64")
SMALL_GEMM = 1 << 27  # M*N*K up to which the tiled SIMT GEMMs apply (launch-bound sizes)


def available() -> bool:
    """Whether CuPy is installed and sees a GPU."""
    try:
        import cupy

        return bool(cupy.cuda.runtime.getDeviceCount() > 0)
    except Exception:
        return False


def _floats(q: KernelQuery) -> bool:
    return q.dtype in FLOATS


def _gemm_size(q: KernelQuery) -> int:
    m, k = q.shapes[0][0], q.shapes[0][-1]
    for d in q.shapes[0][1:-1]:
        m *= d
    return int(m * k * int(q.attrs.get("out_features", 1)))


def _small(q: KernelQuery) -> bool:
    return _floats(q) and _gemm_size(q) <= SMALL_GEMM


def _wmma(q: KernelQuery) -> bool:
    if q.attrs.get("precision") not in ("tf32", "bf16"):
        return False
    from aicf_induct.kernels.cuda.compile import tensor_cores

    return tensor_cores(q.dtype)


def _lt_bwd(q: KernelQuery) -> bool:
    # not on a batch of no rows, which cuBLASLt refuses (status 7): cuBLAS's variant takes it
    return (q.dtype == "float32" and q.attrs.get("precision", "fp32") in ("fp32", "tf32")
            and _gemm_size(q) > 0)


def _lt(q: KernelQuery) -> bool:
    return _lt_bwd(q) and q.attrs.get("act") in (None, "relu")


def _register() -> None:
    fused: list[tuple[str, str, KernelFn, int, object]] = [
        ("linear_act", "cublas", gemm.linear_act_cublas, 3, _floats),
        ("linear_act", "cublaslt", gemm.linear_act_cublaslt, 3, _lt),
        ("linear_act", "tiled64", gemm.linear_act_tiled("tiled64"), 2, _small),
        ("linear_act", "tiled32", gemm.linear_act_tiled("tiled32"), 1, _small),
        ("linear_act", "wmma", gemm.linear_act_wmma, 0, _wmma),
        ("act_linear_bwd", "cublas", gemm.act_linear_bwd_cublas, 3, _floats),
        ("act_linear_bwd", "cublaslt", gemm.act_linear_bwd_cublaslt, 3, _lt_bwd),
        ("act_linear_bwd", "tiled64", gemm.act_linear_bwd_tiled("tiled64"), 2, _small),
        ("act_linear_bwd", "tiled32", gemm.act_linear_bwd_tiled("tiled32"), 1, _small),
        ("softmax_ce", "cuda", ops.softmax_ce, 1, _floats),
    ]
    for op, variant, fn, prio, applies in fused:
        REGISTRY.register(Kernel(f"{op}.{variant}", op, "fused", "cuda", fn, prio,
                                 applies, capturable=True))  # type: ignore[arg-type]
    plain: dict[tuple[str, str], KernelFn] = {
        ("add", "fwd"): ops.add_fwd, ("add", "vjp"): ops.add_vjp,
        ("linear", "fwd"): ops.linear_fwd, ("linear", "vjp"): ops.linear_vjp,
        ("cross_entropy", "fwd"): ops.cross_entropy_fwd,
        ("cross_entropy", "vjp"): ops.cross_entropy_vjp,
        ("mse", "fwd"): ops.mse_fwd, ("mse", "vjp"): ops.mse_vjp,
        ("layernorm", "fwd"): ops.layernorm_fwd, ("layernorm", "vjp"): ops.layernorm_vjp,
        ("batchnorm", "fwd"): ops.batchnorm_fwd, ("batchnorm", "vjp"): ops.batchnorm_vjp,
        ("dropout", "fwd"): ops.dropout_fwd, ("dropout", "vjp"): ops.dropout_vjp,
    }
    for act in ACTIVATIONS:  # each activation op of the op table
        plain[(act, "fwd")] = ops.act_fwd_kernel(act)
        plain[(act, "vjp")] = ops.act_vjp_kernel(act)
    for (op, direction), fn in plain.items():
        REGISTRY.register(Kernel(f"{op}.{direction}.cuda", op, direction, "cuda", fn, 1,
                                 _floats, capturable=True))
    mean, total = tensor_ops.reduce_kernels(True), tensor_ops.reduce_kernels(False)
    beyond: dict[str, tuple[KernelFn, KernelFn, object]] = {  # op: fwd, vjp, applies
        "attention": (attention.attention_fwd, attention.attention_vjp, attention.applies),
        "embedding": (tokens.embedding_fwd, tokens.embedding_vjp, tokens.embedding_applies),
        "numeric_tokenizer": (tokens.tokenizer_fwd, tokens.tokenizer_vjp, _floats),
        "conv2d": (image.conv2d_fwd, image.conv2d_vjp, _floats),
        "pool": (image.pool_fwd, image.pool_vjp, _floats),
        "mean": (*mean, _floats), "sum": (*total, _floats),
        "concat": (tensor_ops.concat_fwd, tensor_ops.concat_vjp, _floats),
        "matmul": (tensor_ops.matmul_fwd, tensor_ops.matmul_vjp, tensor_ops.matmul_applies),
        "reshape": (tensor_ops.copy_fwd, tensor_ops.copy_vjp, _floats),
        "transpose": (tensor_ops.transpose_fwd, tensor_ops.transpose_vjp, _floats),
    }
    for op, (fwd, vjp, applies) in beyond.items():
        for direction, fn in (("fwd", fwd), ("vjp", vjp)):
            REGISTRY.register(Kernel(f"{op}.{direction}.cuda", op, direction, "cuda", fn, 1,
                                     applies, capturable=True))  # type: ignore[arg-type]


_register()
