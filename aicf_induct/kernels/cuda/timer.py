"""The autotuner's clock on the GPU: run a kernel variant on fresh random operands of the
query's shapes, capture `reps` launches in a CUDA graph and time its replays with events
(so Python's launch overhead, which a captured step never pays, stays out), median of
several replays, in microseconds per launch."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import numpy as np

from aicf_induct.ir.ops import OpContext
from aicf_induct.kernels.registry import Kernel, KernelQuery


def operands(q: KernelQuery) -> Callable[[Kernel], Callable[[], None]]:
    """For a fused query: a factory binding a kernel to random operands of its shapes."""
    import cupy

    rng = cupy.random.default_rng(0)
    dt = np.dtype(q.dtype)

    def rand(*shape: int) -> Any:
        return rng.standard_normal(shape, dtype=np.float64).astype(dt)

    ctx = OpContext(xp=cupy, training=True)
    attrs = {k: v for k, v in q.attrs.items() if not k.startswith("_")}
    if q.op == "linear_act":
        (m, k), n = q.shapes[0], int(q.attrs["out_features"])
        params = {"weight": rand(n, k) * (1.0 / k**0.5)}
        if q.attrs.get("bias", True):
            params["bias"] = rand(n)
        keep_z = q.attrs.get("act") in ("gelu", "silu")
        ins, outs = [rand(m, k)], [rand(m, n), rand(m, n) if keep_z else None]
        grads: dict[str, Any] = {}
    elif q.op == "act_linear_bwd":
        (m, k), n = q.shapes[0], int(q.attrs["out_features"])
        params = {"weight": rand(n, k)}
        grads = {"weight": rand(n, k)}
        if q.attrs.get("bias", True):
            params["bias"], grads["bias"] = rand(n), rand(n)
        has_act = q.attrs.get("act") is not None
        ins = [rand(m, k), rand(m, n)] + ([rand(m, n)] if has_act else [])
        outs = [rand(m, k), rand(m, n) if has_act else None]
    elif q.op == "softmax_ce":
        m, c = q.shapes[0]
        ins = [rand(m, c), rng.integers(0, c, size=m, dtype=np.int64), cupy.ones((), dt)]
        outs, params, grads = [cupy.zeros((), dt), rand(m, c)], {}, {}
    else:
        raise NotImplementedError(f"no operands for {q.op}.{q.direction}")

    def bind(kernel: Kernel) -> Callable[[], None]:
        return lambda: kernel.fn(ctx, ins, outs, params, grads, attrs)

    return bind


def time_kernel(call: Callable[[], None], reps: int = 20, rounds: int = 5,
                graph_ok: bool = True) -> float:
    """Median microseconds per call of `call`, replayed from a CUDA graph when `graph_ok`
    and the capture works, else launched eagerly."""
    import cupy

    call()  # compile and warm up, outside any capture
    stream = cupy.cuda.Stream(non_blocking=True)
    graph = None
    with stream:
        try:
            if not graph_ok:
                raise RuntimeError("not capturable")
            stream.begin_capture()
            try:
                for _ in range(reps):
                    call()
            finally:
                graph = stream.end_capture()
        except Exception:
            graph = None
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    samples = []
    with stream:
        for _ in range(rounds + 1):
            start.record(stream)
            if graph is not None:
                graph.launch(stream)
            else:
                for _ in range(reps):
                    call()
            stop.record(stream)
            stop.synchronize()
            samples.append(cupy.cuda.get_elapsed_time(start, stop) * 1e3 / reps)
    return statistics.median(samples[1:])


def cuda_timer(kernel: Kernel, q: KernelQuery) -> float:
    """The Autotuner's timer: microseconds per launch of `kernel` on q's shapes."""
    return time_kernel(operands(q)(kernel), graph_ok=kernel.capturable)
