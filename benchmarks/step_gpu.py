"""Training-step time on an NVIDIA GPU: our compiled step (fused kernels, autotuned, the
whole step replayed from one CUDA graph) against PyTorch's eager step, eager with fused
Adam, a CUDA-graph step with capturable Adam, and torch.compile, in one run.

    python3 benchmarks/step_gpu.py [--precisions fp32,tf32] [--sizes 0,1,2,3] [--quick]
                                   [--no-compile] [--json PATH]
    python3 benchmarks/step_gpu.py --gpus 2 [--sizes 2,3] ...     # data parallel
    python3 benchmarks/step_gpu.py --workspaces 1,32 [--sizes 2,3] ...  # ours only

`--workspaces MIB,...`: our step alone with the shipped per-instruction cuBLAS / cuBLASLt
workspaces (`launch.gemm_workspace`: 1 MiB, 32 MiB from 2^30 multiply-adds) and with each
fixed size for every GEMM, alternated twice in one process (a, b, a, b) so that drift shows:
whether a small workspace makes cuBLAS pick slower GEMMs.

`--gpus N`: the same global batch on one GPU and split over N (one process per GPU, our
ranks summing over NCCL inside the captured step, `runtime.ranks`), against PyTorch's
DistributedDataParallel on the same N GPUs (NCCL, fused Adam) in the same run; goal: N = 2
gives >= 1.8x one GPU's throughput at the largest size and is not slower than DDP.

A step is forward + cross-entropy + backward + Adam update of an MLP (batch, in →
hidden × depth → out, ReLU), float32 parameters; "tf32" lets both sides' GEMMs use TF32
tensor cores. Each side copies its batch into static device buffers every step (as a
CUDA-graph step must). Time per step: wall time of a block of steps between two device
synchronisations, median over repeats, after warm-up (compilation, autotuning, capture).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from script_errors import comma_list, run_main

SIZES = [  # (batch, in, hidden, depth, out)
    (256, 16, 64, 2, 2),
    (512, 64, 256, 4, 10),
    (4096, 256, 1024, 4, 10),
    (8192, 1024, 4096, 4, 100),
]
SIZE_INDICES = tuple(str(i) for i in range(len(SIZES)))  # what --sizes takes
TORCH_PRECISIONS = ("fp32", "tf32")  # the ones PyTorch's side has too
SMALL = (0, 1)  # goal: <= 0.5x PyTorch's CUDA-graph step; the others <= 1.05x PyTorch's best


def block_and_repeats(size: tuple[int, ...], quick: bool) -> tuple[int, int]:
    b, i, h, d, o = size
    flops = 6 * b * (i * h + (d - 1) * h * h + h * o)
    block = int(min(500, max(10, 2e10 / flops)))
    return (max(5, block // 4), 3) if quick else (block, 7)


def timeit(step: Callable[[], None], sync: Callable[[], None], block: int,
           repeats: int) -> float:
    """Median seconds per step."""
    for _ in range(max(3, block // 5)):
        step()
    sync()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(block):
            step()
        sync()
        out.append((time.perf_counter() - t0) / block)
    return statistics.median(out)


def our_step(size: tuple[int, ...], precision: str, reduce: Any = None
             ) -> tuple[Any, Any, Any, Any, Any]:
    """Our side of one size: (CudaStep, executor, autotuner, x, y), nothing run yet. The ReLU
    MLP in float32 with fused kernels picked by a fresh autotuner, Adam over the flat buffer."""
    import cupy as cp

    from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
    from aicf_induct.kernels.autotune import Autotuner, TunedRegistry
    from aicf_induct.kernels.cuda.compile import device
    from aicf_induct.kernels.cuda.timer import cuda_timer
    from aicf_induct.runtime.cuda_step import CudaStep
    from aicf_induct.runtime.executor import Executor, store_for
    from aicf_induct.runtime.optimizers import make_optimizer

    b, i, h, d, o = size
    graph = mlp_graph(parse_model_spec(f"mlp:depth={d},width={h},act=relu"), i, o,
                      dtype="float32")
    store = store_for(graph, seed=0, xp=cp, dtype="float32")
    # a benchmark wants the tuner's best choice, however long it takes to find
    tuner = Autotuner(cuda_timer, device().name, budget_s=float("inf"))
    ex = Executor(graph, store, loss="cross_entropy", device="cuda", xp=cp, fuse=True,
                  precision=precision, registry=TunedRegistry(tuner))
    step = CudaStep(ex, make_optimizer("adam", lr=1e-3), reduce=reduce)
    rng = np.random.default_rng(0)
    x = cp.asarray(rng.normal(size=(b, i)).astype(np.float32))
    y = cp.asarray(rng.integers(0, o, size=b))
    return step, ex, tuner, x, y


def ours(size: tuple[int, ...], precision: str, block: int, repeats: int) -> dict[str, object]:
    import cupy as cp

    step, ex, _, x, y = our_step(size, precision)
    t0 = time.perf_counter()
    first = step.run(x, y, 0, 1e-3)
    setup = time.perf_counter() - t0
    k = [0]

    def one() -> None:
        k[0] += 1
        step.run(x, y, k[0], 1e-3, fetch=False)

    sec = timeit(one, cp.cuda.Device().synchronize, block, repeats)
    last = step.stats()
    names = ex.plan("train", size[0]).kernel_names
    return {"ms": sec * 1e3, "setup_s": setup, "captured": step.captured,
            "body": step.step_body(size[0]),
            "graph_error": step.graph_error, "kernels": names,
            "loss_first": first.loss if first else None, "loss_last": last.loss}


def torch_setup(size: tuple[int, ...]) -> tuple[Any, Any, Any, Any, Any]:
    """PyTorch's side of one size: (model, x, y, static x, static y) on the GPU."""
    import torch

    b, i, h, d, o = size
    dev = torch.device("cuda")
    layers: list[torch.nn.Module] = []
    w = i
    for _ in range(d):
        layers += [torch.nn.Linear(w, h), torch.nn.ReLU()]
        w = h
    model = torch.nn.Sequential(*layers, torch.nn.Linear(w, o)).to(dev)
    gen = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(b, i, device=dev, generator=gen)
    y = torch.randint(0, o, (b,), device=dev, generator=gen)
    return model, x, y, torch.empty_like(x), torch.empty_like(y)


def torch_graph_step(size: tuple[int, ...]) -> tuple[Callable[[], None], Callable[[], None]]:
    """PyTorch's whole step (forward, loss, backward, capturable Adam) as one CUDA graph:
    (step: copy the batch in and replay, replay alone)."""
    import torch
    import torch.nn.functional as F

    model, x, y, sx, sy = torch_setup(size)
    try:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=True, fused=True)
    except (RuntimeError, TypeError):
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=True, foreach=True)
    sx.copy_(x)
    sy.copy_(y)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up on a side stream, as graph capture requires
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(sx), sy).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        F.cross_entropy(model(sx), sy).backward()
        opt.step()

    def step() -> None:
        sx.copy_(x)
        sy.copy_(y)
        g.replay()

    return step, g.replay


def pytorch(size: tuple[int, ...], variant: str, block: int, repeats: int) -> float:
    import torch
    import torch.nn.functional as F

    if variant == "graph":
        step, _ = torch_graph_step(size)
    else:
        model, x, y, sx, sy = torch_setup(size)
        fused = variant in ("fused", "compile")
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=fused or None)
        fwd = torch.compile(model) if variant == "compile" else model

        def step() -> None:
            sx.copy_(x)
            sy.copy_(y)
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(fwd(sx), sy).backward()
            opt.step()

    return timeit(step, torch.cuda.synchronize, block, repeats)


def our_rank(comm: Any, payload: tuple[Any, ...]) -> float:
    """One rank of our data-parallel step: its share of the global batch, the ranks' sum
    inside the captured step; seconds per step (every rank's steps done, by a barrier)."""
    import cupy as cp

    from aicf_induct.runtime.parallel import device_reduce, shard_bounds

    size, precision, block, repeats = payload
    step, _, _, x, y = our_step(size, precision, reduce=device_reduce(comm))
    lo, hi = shard_bounds(size[0], comm.rank, comm.size)
    xs, ys, w = x[lo:hi], y[lo:hi], (hi - lo) / size[0]
    step.run(xs, ys, 0, 1e-3, weight=w)
    k = [0]

    def one() -> None:
        k[0] += 1
        step.run(xs, ys, k[0], 1e-3, fetch=False, weight=w)

    def sync() -> None:
        cp.cuda.Device().synchronize()
        comm.barrier()

    return timeit(one, sync, block, repeats)


def ours_on_gpus(n: int, size: tuple[int, ...], precision: str, block: int,
                 repeats: int) -> float:
    from aicf_induct.runtime.ranks import run_ranks

    payload = (size, precision, block, repeats)
    return run_ranks(n, lambda comm: our_rank(comm, payload), our_rank, payload, gpus=True)


def ddp_rank(rank: int, n: int, size: tuple[int, ...], precision: str, block: int,
             repeats: int, port: int, out: Any) -> None:
    """One rank of PyTorch's DistributedDataParallel step (NCCL, fused Adam)."""
    import os

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=n)
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    from aicf_induct.runtime.parallel import shard_bounds

    model, x, y, _, _ = torch_setup(size)
    lo, hi = shard_bounds(size[0], rank, n)
    x, y = x[lo:hi].contiguous(), y[lo:hi].contiguous()
    sx, sy = torch.empty_like(x), torch.empty_like(y)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3, fused=True)

    def step() -> None:
        sx.copy_(x)
        sy.copy_(y)
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(ddp(sx), sy).backward()
        opt.step()

    def sync() -> None:
        torch.cuda.synchronize()
        dist.barrier()

    sec = timeit(step, sync, block, repeats)
    if rank == 0:
        out.put(sec)
    dist.destroy_process_group()


def ddp_on_gpus(n: int, size: tuple[int, ...], precision: str, block: int,
                repeats: int) -> float:
    import socket

    import torch.multiprocessing as tmp

    with socket.socket() as s:  # a free port for the ranks' rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp.get_context("spawn").SimpleQueue()
    tmp.spawn(ddp_rank, args=(n, size, precision, block, repeats, port, out), nprocs=n)
    return float(out.get())


def data_parallel(args: argparse.Namespace) -> None:
    """The --gpus N table: one GPU against N, ours and DDP, the same global batch."""
    import cupy as cp

    n = args.gpus
    print("| batch | model | precision | ours 1 GPU ms | ours " + str(n) + " GPUs ms | "
          "speed-up | DDP " + str(n) + " GPUs ms | ours / DDP | goal |")
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    rows = []
    for prec in args.precisions.split(","):
        for idx in (int(s) for s in args.sizes.split(",")):
            size = SIZES[idx]
            block, repeats = block_and_repeats(size, args.quick)
            one = float(ours(size, prec, block, repeats)["ms"])  # type: ignore[arg-type]
            cp.get_default_memory_pool().free_all_blocks()
            many = ours_on_gpus(n, size, prec, block, repeats) * 1e3
            ddp = ddp_on_gpus(n, size, prec, block, repeats) * 1e3
            goal = one / many >= 0.9 * n and many <= ddp
            b, i, h, d, o = size
            print(f"| {b} | {i}→{h}×{d}→{o} | {prec} | {one:.3f} | {many:.3f} | "
                  f"{one / many:.2f}× | {ddp:.3f} | {many / ddp:.2f}× | "
                  f"{'met' if goal else 'missed'} |", flush=True)
            rows.append({"size": size, "precision": prec, "gpus": n, "ours_1_ms": one,
                         "ours_n_ms": many, "ddp_n_ms": ddp, "goal_met": goal})
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=1, default=str))


def workspace_sweep(args: argparse.Namespace) -> None:
    """`--workspaces`: our step's time with the shipped GEMM workspaces (1 MiB, 32 MiB from
    `LARGE_GEMM_MACS`) and with each fixed size for every GEMM."""
    import cupy as cp

    from aicf_induct.kernels.cuda import launch

    shipped = (launch.GEMM_WORKSPACE_BYTES, launch.LARGE_GEMM_WORKSPACE_BYTES)
    variants = {"shipped": shipped, **{f"{m} MiB": (m << 20, m << 20)
                                       for m in (int(x) for x in args.workspaces.split(","))}}
    names = list(variants)
    print(f"| batch | model | precision | {' | '.join(f'ours ms, {v}' for v in names)} | "
          f"{names[0]} / {names[1]} |")
    print("|---|---|---|" + "---|" * (len(names) + 1), flush=True)
    rows = []
    for prec in args.precisions.split(","):
        for idx in (int(s) for s in args.sizes.split(",")):
            size = SIZES[idx]
            block, repeats = block_and_repeats(size, args.quick)
            times: dict[str, list[float]] = {v: [] for v in names}
            for _ in range(2):  # a, b, a, b: drift shows
                for v in names:
                    launch.GEMM_WORKSPACE_BYTES, launch.LARGE_GEMM_WORKSPACE_BYTES = variants[v]
                    times[v].append(float(ours(size, prec, block, repeats)["ms"]))  # type: ignore[arg-type]
                    cp.get_default_memory_pool().free_all_blocks()
            launch.GEMM_WORKSPACE_BYTES, launch.LARGE_GEMM_WORKSPACE_BYTES = shipped
            med = {v: statistics.median(t) for v, t in times.items()}
            b, i, h, d, o = size
            cells = " | ".join(f"{med[v]:.3f} ({', '.join(f'{t:.3f}' for t in times[v])})"
                               for v in names)
            print(f"| {b} | {i}→{h}×{d}→{o} | {prec} | {cells} | "
                  f"{med[names[0]] / med[names[1]]:.3f} |", flush=True)
            rows.append({"size": size, "precision": prec, "ms": times})
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=1, default=str))


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--precisions", type=comma_list(TORCH_PRECISIONS), default="fp32,tf32",
                    metavar="P[,P...]", help="GEMM precisions, of fp32 and tf32 (default both)")
    ap.add_argument("--sizes", type=comma_list(SIZE_INDICES), default=None, metavar="I[,I...]",
                    help=f"indices into SIZES, of {','.join(SIZE_INDICES)} (default 0,1,2,3; "
                         "with --gpus: 2,3)")
    ap.add_argument("--gpus", type=int, default=0,
                    help="data parallel over N GPUs against one GPU and PyTorch's DDP")
    ap.add_argument("--quick", action="store_true", help="fewer steps (smoke run)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--json", default="", help="write every figure here")
    ap.add_argument("--workspaces", default="", metavar="MIB,...",
                    help="our step alone at each per-instruction GEMM workspace size (MiB)")
    args = ap.parse_args()
    import cupy as cp
    import torch

    from aicf_induct.kernels.cuda.compile import device

    info = device()
    print(f"# step_gpu: {date.today()}, {info.name} (sm_{info.capability}, {info.sms} SMs), "
          f"cupy {cp.__version__}, torch {torch.__version__}", flush=True)
    args.sizes = args.sizes or ("2,3" if args.gpus or args.workspaces else "0,1,2,3")
    if args.workspaces:
        workspace_sweep(args)
        return
    if args.gpus:
        data_parallel(args)
        return
    print("| batch | model | precision | ours ms | eager | fused Adam | CUDA graph | "
          "compile | ours / graph | ours / best | goal |")
    print("|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    rows = []
    for prec in args.precisions.split(","):
        torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
        torch.backends.cudnn.allow_tf32 = prec == "tf32"
        for idx in (int(s) for s in args.sizes.split(",")):
            size = SIZES[idx]
            block, repeats = block_and_repeats(size, args.quick)
            mine = ours(size, prec, block, repeats)
            cp.get_default_memory_pool().free_all_blocks()
            theirs: dict[str, float] = {}
            for variant in ("eager", "fused", "graph", "compile"):
                if variant == "compile" and args.no_compile:
                    continue
                try:
                    theirs[variant] = pytorch(size, variant, block, repeats) * 1e3
                except Exception as err:  # report, go on
                    print(f"# torch {variant} failed: {type(err).__name__}: {err}",
                          file=sys.stderr)
                torch.cuda.empty_cache()
            best = min(theirs.values())
            ms = float(mine["ms"])  # type: ignore[arg-type]
            graph_ms = theirs.get("graph", float("nan"))
            goal = (ms <= 0.5 * graph_ms) if idx in SMALL else (ms <= 1.05 * best)
            b, i, h, d, o = size
            cells = [f"{theirs[v]:.3f}" if v in theirs else "-"
                     for v in ("eager", "fused", "graph", "compile")]
            print(f"| {b} | {i}→{h}×{d}→{o} | {prec} | {ms:.3f} | {' | '.join(cells)} | "
                  f"{ms / graph_ms:.2f}× | {ms / best:.2f}× | "
                  f"{'met' if goal else 'missed'} |", flush=True)
            print(f"#   ours: captured={mine['captured']} body={mine['body']} "
                  f"error={mine['graph_error']} "
                  f"setup={mine['setup_s']:.1f}s kernels={','.join(mine['kernels'])}",
                  file=sys.stderr, flush=True)
            rows.append({"size": size, "precision": prec, "ours": mine, "torch_ms": theirs,
                         "goal_met": goal})
    if args.json:
        Path(args.json).write_text(json.dumps({"device": info.name, "rows": rows}, indent=1,
                                              default=str))


if __name__ == "__main__":
    run_main(main)
