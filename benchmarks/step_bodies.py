"""Not a test: our GPU step at the small sizes of benchmarks/step_gpu.py with each of its
bodies forced in turn — the fused-kernel plan, and the one-kernel MLP step's "layers",
"rows" and (sm_90+) "clusters" schedules (kernels/cuda/mlp_step.py) — to show what the
autotuner chooses between.

Per body, µs: the body alone and the optimizer kernel alone (each replayed from a CUDA
graph, timed with events); the whole captured step replayed back to back; the host's side
of `CudaStep.run` (many steps, no sync: Python, feeds and launch); and a step as
step_gpu.py times it (steps back to back, one sync at the end). For the one-kernel step:
its grid, blocks resident a multiprocessor, registers a thread, and the K splits of each
layer's forward, weight-gradient and data-gradient GEMMs.

With --phases, each one-kernel body is also run built with its phase timer
(`MlpStepKernel.profiled`): per phase, µs until the last and the median block finished, and
the grid barrier after it (medians over 50 launches).

    python3 benchmarks/step_bodies.py [--sizes 0,1] [--precision fp32] [--phases]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from script_errors import comma_list, run_main
from step_gpu import SIZE_INDICES, SIZES, our_step

from aicf_induct.compiler.fusion import PRECISIONS

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
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--sizes", type=comma_list(SIZE_INDICES), default="0,1", metavar="I[,I...]",
                    help=f"indices into step_gpu.py's SIZES, of {','.join(SIZE_INDICES)} "
                         "(default 0,1)")
    ap.add_argument("--precision", choices=PRECISIONS, default="fp32",
                    help=f"GEMM precision, one of {', '.join(PRECISIONS)} (default fp32)")
    ap.add_argument("--phases", action="store_true", help="time each phase of the one-kernel "
                    "step's bodies too")
    args = ap.parse_args()
    import cupy as cp

    from aicf_induct.compiler.chain import match_mlp_chain
    from aicf_induct.kernels.cuda.mlp_step import schedules_for
    from aicf_induct.kernels.cuda.timer import time_kernel
    from aicf_induct.runtime.cuda_step import step_spec

    sync = cp.cuda.Device().synchronize
    phases: list[tuple[int, str, list[tuple[str, float, float, float]]]] = []
    print("| size | body | body µs | optimizer µs | replay µs | host µs | step µs | kernel |")
    print("|---|---|---|---|---|---|---|---|")
    for idx in (int(v) for v in args.sizes.split(",")):
        size = SIZES[idx]
        executor = our_step(size, args.precision)[1]
        plan = executor.plan("train", size[0])  # nothing run
        chain = match_mlp_chain(plan.program, plan.inputs)
        bodies = ["plan"] + ([f"mlp_{s}" for s in schedules_for(step_spec(chain, executor.store))]
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
            if k is not None and args.phases:
                phases.append((idx, body, phase_times(k)))
    for idx, body, rows in phases:
        print(f"\nsize {idx}, {body}: µs per phase (last block done, median block done, "
              "barrier after)")
        for name, last, median, barrier in rows:
            print(f"  {name:<38} {last:7.2f} {median:7.2f} {barrier:6.2f}")
        total = sum(r[1] + r[3] for r in rows)
        print(f"  {'sum':<38} {total:7.2f}")


def phase_times(kernel: Any, launches: int = 50) -> list[tuple[str, float, float, float]]:
    """Medians over `launches` of MlpStepKernel.phase_profile, with a sync between launches."""
    import cupy as cp
    import numpy as np

    timed = kernel.profiled()
    runs = []
    for _ in range(launches + 5):
        timed.launch()
        cp.cuda.Device().synchronize()
        runs.append(timed.phase_profile())
    runs = runs[5:]
    return [(runs[0][p][0], *(float(np.median([r[p][c] for r in runs])) for c in (1, 2, 3)))
            for p in range(len(runs[0]))]


if __name__ == "__main__":
    run_main(main)
