"""Not a test: where a training step's time goes on the GPU, ours against PyTorch's
CUDA-graph step, per size and precision of benchmarks/step_gpu.py:

- host µs/step: the Python side of one step (launch only: many steps, no sync between);
- replay µs: the captured graph alone, timed with events (no host work in between);
- step µs: as the benchmark times it (steps back to back, one sync at the end);
- per kernel: torch.profiler (CUPTI sees CuPy's kernels too), count and µs per step;
- the autotuner's measurements (every variant, per shape).

    python3 benchmarks/gpu_profile.py [--sizes 0,1,2,3] [--precisions fp32,tf32]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from script_errors import comma_list, run_main
from step_gpu import SIZE_INDICES, SIZES, TORCH_PRECISIONS, our_step, torch_graph_step


def per_kernel(fn: Any, steps: int) -> list[tuple[str, float, float]]:
    """(kernel name, launches per step, µs per step) from torch.profiler, largest first."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
    agg: dict[str, list[float]] = defaultdict(list)
    for ev in prof.events():
        if ev.device_type.name == "CUDA" and ev.device_time_total > 0:
            agg[ev.name].append(ev.device_time_total)
    rows = [(name[:90], len(v) / steps, sum(v) / steps) for name, v in agg.items()]
    return sorted(rows, key=lambda r: -r[2])


def eager_breakdown(step: Any, reps: int = 7) -> list[tuple[str, float]]:
    """Our step's instructions one at a time (not captured), each between two events:
    (instruction, median µs), in program order; launch gaps included."""
    import cupy

    entry = next(iter(step._entries.values()))
    plan = entry.plan
    calls = [("zero grads", lambda: plan._grad.fill(0.0))]
    calls += [(f"{ins.op} {ins.node_id} [{name}]", call) for ins, call, name in
              zip(plan.program, plan._calls, plan.kernel_names, strict=True)]
    calls.append(("optimizer", lambda: entry.update.launch(entry.hyper_dev, entry.seg_dev,
                                                          len(entry.seg_dev), entry.loss)))
    s = cupy.cuda.get_current_stream()
    ev = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in calls]
    got: list[list[float]] = [[] for _ in calls]
    for _ in range(reps):
        for (a, b), (_, call) in zip(ev, calls, strict=True):
            a.record(s)
            call()
            b.record(s)
        s.synchronize()
        for k, (a, b) in enumerate(ev):
            got[k].append(cupy.cuda.get_elapsed_time(a, b) * 1e3)
    return [(name, statistics.median(v)) for (name, _), v in zip(calls, got, strict=True)]


def timings(run: Any, replay: Any, sync: Any, steps: int) -> dict[str, float]:
    import cupy

    for _ in range(10):
        run()
    sync()
    host = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(steps):
            run()
        host.append((time.perf_counter() - t0) / steps)
        sync()
    step = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(steps):
            run()
        sync()
        step.append((time.perf_counter() - t0) / steps)
    s = cupy.cuda.get_current_stream()
    e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
    rep = []
    for _ in range(5):
        e0.record(s)
        for _ in range(steps):
            replay()
        e1.record(s)
        e1.synchronize()
        rep.append(cupy.cuda.get_elapsed_time(e0, e1) * 1e3 / steps)
    return {"host_us": statistics.median(host) * 1e6, "step_us": statistics.median(step) * 1e6,
            "replay_us": statistics.median(rep)}


def ours(size: tuple[int, ...], precision: str) -> tuple[Any, Any, Any, list[str]]:
    import cupy as cp

    step, ex, tuner, x, y = our_step(size, precision)
    step.run(x, y, 0, 1e-3)
    k = [0]

    def run() -> None:
        k[0] += 1
        step.run(x, y, k[0], 1e-3, fetch=False)

    entry = next(iter(step._entries.values()))

    def replay() -> None:
        entry.graph.launch(cp.cuda.get_current_stream())

    breakdown = eager_breakdown(step)
    tune = [f"{r.op} {r.shape_key[:60]} {r.kernel}={r.time_us:.1f}{'*' if r.chosen else ''}"
            for r in tuner.store.rows]  # type: ignore[attr-defined]
    return run, replay, ex.plan("train", size[0]).kernel_names, tune + [
        f"eager {us:8.2f} µs  {name}" for name, us in breakdown]


def report(side: str, run: Any, replay: Any, sync: Any, steps: int, prof_steps: int) -> None:
    """One side's timings, then its 25 busiest kernels per step."""
    t = timings(run, replay, sync, steps)
    print(f"{side:<6}" + "  ".join(f"{k}={v:.1f}" for k, v in t.items()), flush=True)
    rows = per_kernel(run, prof_steps)
    print(f"  {side} per kernel ({sum(r[1] for r in rows):.1f} launches, "
          f"{sum(r[2] for r in rows):.1f} µs busy per step):")
    for name, n, us in rows[:25]:
        print(f"    {us:9.2f} µs  x{n:4.1f}  {name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--sizes", type=comma_list(SIZE_INDICES), default="0,1,2,3",
                    metavar="I[,I...]", help=f"indices into step_gpu.py's SIZES, of "
                                             f"{','.join(SIZE_INDICES)} (default all)")
    ap.add_argument("--precisions", type=comma_list(TORCH_PRECISIONS), default="fp32,tf32",
                    metavar="P[,P...]", help="GEMM precisions, of fp32 and tf32 (default both)")
    args = ap.parse_args()
    import cupy as cp
    import torch

    def sync() -> None:
        cp.cuda.Device().synchronize()

    for prec in args.precisions.split(","):
        torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
        for idx in (int(v) for v in args.sizes.split(",")):
            size = SIZES[idx]
            steps = 200 if idx < 2 else (50 if idx == 2 else 5)
            prof_steps = 20 if idx < 3 else 3
            print(f"\n#### size {idx} {size} {prec}", flush=True)
            run, replay, names, tune = ours(size, prec)
            print("ours kernels:", ",".join(names))
            for line in tune:
                print("  tune", line)
            report("ours", run, replay, sync, steps, prof_steps)
            cp.get_default_memory_pool().free_all_blocks()
            trun, treplay = torch_graph_step(size)
            report("torch", trun, treplay, sync, steps, prof_steps)
            torch.cuda.empty_cache()
            sys.stdout.flush()


if __name__ == "__main__":
    run_main(main)
