"""Launch helpers shared by the CUDA kernels: argument packing, grid sizes, per-instruction
scratch. CuPy is imported inside functions only."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from aicf_induct.ir.ops import CUDA_NONE, OpContext, activation
from aicf_induct.ir.ops.base import node_stream
from aicf_induct.kernels.cuda.compile import device

NULL = np.uint64(0)  # a null pointer argument
THREADS = 256


def ctype(dtype: Any) -> str:
    """The C++ type of a float dtype."""
    name = np.dtype(dtype).name
    if name == "float32":
        return "float"
    if name == "float64":
        return "double"
    raise TypeError(f"CUDA kernels take float32 or float64, got {name}")


def ptr(a: Any) -> Any:
    """A device array, or the null pointer for None (CuPy packs an ndarray as its pointer)."""
    return NULL if a is None else a


def scalar(dtype: Any, v: float) -> Any:
    return np.dtype(dtype).type(v)


def i32(v: int) -> np.int32:
    return np.int32(v)


def i64(v: int) -> np.int64:
    return np.int64(v)


def f64(v: float) -> np.float64:
    return np.float64(v)


def act_id(act: str | None, act_attrs: dict[str, Any] | None = None) -> int:
    """The CUDA kernels' ACT for activation op `act` with `act_attrs` (None: no activation),
    from the op table."""
    return CUDA_NONE if act is None else activation(act, act_attrs).cuda_id


def grid_1d(n: int, threads: int = THREADS, waves: int = 4) -> int:
    """Blocks for a grid-stride loop over n items: enough to fill the device a few times."""
    return max(1, min(math.ceil(n / threads), waves * device().sms))


def row_chunks(m: int, col_blocks: int) -> tuple[int, int]:
    """(chunks, rows per chunk) for a column reduction over m rows: enough blocks in all to
    fill the device, each chunk at least 256 rows; up to 1024 rows, one chunk (one launch,
    no second pass over partial sums: such sizes are bound by launches, not bandwidth)."""
    if m <= 1024:
        return 1, max(m, 1)
    want = max(1, (2 * device().sms) // max(col_blocks, 1))
    chunks = max(1, min(want, math.ceil(m / 256)))
    per = math.ceil(m / chunks)
    return math.ceil(m / per), per


def scratch(attrs: dict[str, Any], key: str, shape: tuple[int, ...], dtype: Any,
            zero: bool = False) -> Any:
    """A device buffer owned by one bound instruction (kept in its attrs under '_scratch',
    allocated on the first call, which the CUDA step makes before any graph capture);
    `zero`: zeroed when allocated (a counter that its kernel resets after each use)."""
    import cupy

    store = attrs.setdefault("_scratch", {})
    buf = store.get(key)
    if buf is None or buf.shape != shape or buf.dtype != np.dtype(dtype):
        buf = (cupy.zeros if zero else cupy.empty)(shape, dtype=dtype)
        store[key] = buf
    return buf


GEMM_WORKSPACE_BYTES = 1 << 20  # each GEMM instruction's own cuBLAS / cuBLASLt workspace
# ... and a large GEMM's: at 32 MiB cuBLAS picks faster split-K algorithms for a 4096-row
# batch through 1024-wide layers (3.6-5.3 % of the step on an H200; 2-8 MiB gain nothing),
# while the GPU engine's many small runs keep 1 MiB each (benchmarks/RESULTS.md, "GPU step")
LARGE_GEMM_WORKSPACE_BYTES = 32 << 20
LARGE_GEMM_MACS = 1 << 30  # multiply-adds of one GEMM (batched: all of them) from which


def gemm_workspace(attrs: dict[str, Any], macs: int = 0) -> Any:
    """The bound instruction's own workspace for its cuBLAS and cuBLASLt calls (`macs`: the
    multiply-adds of its largest GEMM, which sizes it). Not one shared buffer: the GPU
    engine runs many runs' steps on concurrent streams, and two GEMMs that keep split-K
    partials or counters in one workspace would race. Set explicitly on every call because
    cublasSetStream resets a handle's workspace, after which cuBLAS allocates its own inside
    a capture (memory nodes: a graph that cannot be repeated as child nodes). It only grows:
    an instruction keeps the larger of two sizes, so a buffer a captured graph holds is never
    replaced by a smaller one."""
    want = LARGE_GEMM_WORKSPACE_BYTES if macs >= LARGE_GEMM_MACS else GEMM_WORKSPACE_BYTES
    have = attrs.get("_scratch", {}).get("gemm_workspace")
    if have is not None and have.nbytes >= want:
        return have
    return scratch(attrs, "gemm_workspace", (want,), "uint8")


def capturing() -> bool:
    """Whether the current stream is capturing a CUDA graph."""
    import cupy

    return bool(cupy.cuda.get_current_stream().is_capturing())


def rows(a: Any) -> Any:
    """a as (rows, last axis), a view."""
    return a.reshape(-1, a.shape[-1])


def rng_args(ctx: OpContext) -> tuple[Any, Any, Any, Any]:
    """The dropout RNG's key as a kernel takes it (dropout.cu, attention.cu): the key's high
    word (the seed), the node's stream (`ir.ops.base.node_stream`), and the step: a device pointer
    while a CUDA graph captures (the replay reads the current step), else the host value."""
    step_ptr = ctx.device_step if ctx.device_step is not None and capturing() else NULL
    return (scalar("uint64", (ctx.seed & 0xFFFFFFFF) << 32),
            scalar("uint64", node_stream(ctx)), step_ptr, i64(ctx.step))
