"""Not a test: our GPU step at the small sizes of benchmarks/step_gpu.py with each of its
bodies forced in turn — the fused-kernel plan, and the one-kernel MLP step's "layers" and
"rows" schedules (kernels/cuda/mlp_step.py) — to show what the autotuner chooses between.

Per body, µs: the body alone and the optimizer kernel alone (each replayed from a CUDA
graph, timed with events); the whole captured step replayed back to back; the host's side
of `CudaStep.run` (many steps, no sync: Python, feeds and launch); and a step as
step_gpu.py times it (steps back to back, one sync at the end). For the one-kernel step:
its grid, blocks resident a multiprocessor, registers a thread, and the K splits of each
layer's forward, weight-gradient and data-gradient GEMMs.

    python3 benchmarks/step_bodies.py [--sizes 0,1] [--precision fp32]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from step_gpu import SIZES, our_step

STEPS = 200


def per_step_us(fn: Callable[[int], object], steps: int,
                sync: Callable[[], None] | None) -> float:
    t0 = time.perf_counter()
    for k in range(steps):
        fn(k)
    if sync is not None:
        sync()
    return (time.perf_counter() - t0) / steps * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default="0,1")
    ap.add_argument("--precision", default="fp32")
    args = ap.parse_args()
    import cupy as cp

    from aicf_induct.compiler.chain import match_mlp_chain
    from aicf_induct.kernels.cuda.mlp_step import schedules_for
    from aicf_induct.kernels.cuda.timer import time_kernel

    sync = cp.cuda.Device().synchronize
    print("| size | body | body µs | optimizer µs | replay µs | host µs | step µs | kernel |")
    print("|---|---|---|---|---|---|---|---|")
    for idx in (int(v) for v in args.sizes.split(",")):
        size = SIZES[idx]
        plan = our_step(size, args.precision)[1].plan("train", size[0])  # nothing run
        chain = match_mlp_chain(plan.program, plan.inputs)
        bodies = ["plan"] + ([f"mlp_{s}" for s in schedules_for(chain)]
                             if not isinstance(chain, str) else [])
        for body in bodies:
            step, _, _, x, y = our_step(size, args.precision)
            step.whole_step = body
            step.run(x, y, 0, 1e-3)
            e = step._entries[size[0]]
            t_body = time_kernel(e.step_kernel.launch if e.step_kernel else e.plan.launch)
            t_opt = time_kernel(lambda e=e: e.update.launch(e.hyper_dev, e.seg_dev,
                                                            len(e.seg_dev), e.loss))
            stream = cp.cuda.get_current_stream()
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            for _ in range(STEPS):
                e.graph.launch(stream)
            stop.record()
            stop.synchronize()
            replay = cp.cuda.get_elapsed_time(start, stop) * 1e3 / STEPS
            sync()
            run = lambda k, step=step, x=x, y=y: step.run(x, y, k, 1e-3, fetch=False)  # noqa: E731
            host = per_step_us(run, STEPS, None)
            sync()
            wall = per_step_us(run, STEPS, sync)
            k = e.step_kernel
            kernel = "" if k is None else (
                f"grid {k.grid}, {k.resident()} resident, {k.fn.num_regs} registers, splits "
                f"{k.meta[:, 7:10].get().tolist()}")
            print(f"| {idx} | {body} | {t_body:.1f} | {t_opt:.1f} | {replay:.1f} | {host:.1f} "
                  f"| {wall:.1f} | {kernel or '—'} |", flush=True)


if __name__ == "__main__":
    main()
