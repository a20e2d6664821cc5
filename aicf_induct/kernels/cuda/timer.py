"""The autotuner's clock on the GPU: run a kernel variant on fresh random operands of the
query's shapes, capture launches in a CUDA graph and time its replays with events (so
Python's launch overhead, which a captured step never pays, stays out), median of several
replays, in microseconds per launch.

It costs little: one warm-up launch (which compiles), one timed launch that sizes the
rounds (about ROUND_US each, at most `reps` launches), and it stops early, returning the
time seen so far, when a launch is clearly over the tuner's `Limit.us` (the best so far)
or the candidate's `Limit.seconds` run out."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from aicf_induct.ir.ops import OpContext, activation
from aicf_induct.kernels.autotune import Limit
from aicf_induct.kernels.registry import Kernel, KernelQuery

ROUND_US = 2000.0  # a timed round: about this long, so a slow candidate costs few launches
# what one eager launch may cost over a replayed one (Python, the launch itself): the
# timed single launch abandons only when over twice the limit plus this
EAGER_SLACK_US = 100.0


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
        act = q.attrs.get("act")  # the pre-activation is kept where act' needs its input
        keep_z = act is not None and not activation(act, q.attrs.get("act_attrs")).from_output
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


def round_reps(probe_us: float, reps: int) -> int:
    """Launches a timed round: about ROUND_US of them at `probe_us` each, 1 to `reps`."""
    return max(1, min(reps, int(ROUND_US // max(probe_us, 1e-3))))


def clearly_over(probe_us: float, limit: Limit) -> bool:
    """Whether one eager launch of `probe_us` is clearly slower than the limit."""
    return probe_us > 2 * limit.us + EAGER_SLACK_US


def median_rounds(replay: Callable[[], float], rounds: int, limit: Limit, started: float,
                  clock: Callable[[], float] = time.perf_counter) -> float:
    """Median microseconds per launch over `rounds` calls of `replay` (each returns one
    round's), after one uncounted round; stops at the first round over `limit.us` (returned),
    or when `limit.seconds` since `started` have run out (the median so far)."""
    first = replay()  # the graph's own first replay (upload) is slower: not counted
    samples: list[float] = []
    for _ in range(rounds):
        if clock() - started >= limit.seconds:
            break
        t = replay()
        if t > limit.us:
            return t
        samples.append(t)
    return statistics.median(samples) if samples else first


def time_kernel(call: Callable[[], None], reps: int = 20, rounds: int = 5,
                graph_ok: bool = True, limit: Limit | None = None,
                clock: Callable[[], float] = time.perf_counter) -> float:
    """Median microseconds per call of `call`, replayed from a CUDA graph when `graph_ok`
    and the capture works, else launched eagerly; within `limit` (see the module)."""
    import cupy

    limit = limit or Limit()
    started = clock()
    call()  # compile and warm up, outside any capture
    cupy.cuda.get_current_stream().synchronize()
    stream = cupy.cuda.Stream(non_blocking=True)
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()

    def timed(run: Callable[[], None], n: int) -> float:
        start.record(stream)
        run()
        stop.record(stream)
        stop.synchronize()
        return float(cupy.cuda.get_elapsed_time(start, stop)) * 1e3 / n

    with stream:
        probe = timed(call, 1)
        if clearly_over(probe, limit) or clock() - started >= limit.seconds:
            return probe
        n = round_reps(probe, reps)

        def eager() -> None:
            for _ in range(n):
                call()

        graph = None
        if graph_ok:
            try:
                stream.begin_capture()
                try:
                    eager()
                finally:
                    graph = stream.end_capture()
            except Exception:
                graph = None
        run = eager if graph is None else (lambda: graph.launch(stream))
        return median_rounds(lambda: timed(run, n), rounds, limit, started, clock)


def cuda_timer(kernel: Kernel, q: KernelQuery, limit: Limit | None = None) -> float:
    """The Autotuner's timer: microseconds per launch of `kernel` on q's shapes."""
    return time_kernel(operands(q)(kernel), graph_ok=kernel.capturable, limit=limit)

