"""Training-step time on the CPU: our compiled NumPy step vs PyTorch eager, same model, same
batch, same optimizer (Adam), same dtype, measured in one run.

    .venv/bin/python benchmarks/step_cpu.py [--dtype float64|float32] [--quick]

A step is forward + cross-entropy + backward + Adam update. Ours runs through the compiled
plan (`Executor.train_step`) and the flat-buffer optimizer; PyTorch through nn.Sequential,
F.cross_entropy, autograd and torch.optim.Adam (default and foreach=True, the faster reported).
Within a process a figure is the median over repeats of the mean step time of a block of
steps; each measure runs in its own process (so NumPy's BLAS threads and PyTorch's never
compete), in ABBA rounds, and the table gives the median over processes and their range. Run
it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import date

import numpy as np
from machine import cpu_model

from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
from aicf_induct.runtime.executor import Executor, store_for
from aicf_induct.runtime.optimizers import make_optimizer

SIZES = [  # (batch, in, width, depth, classes)
    (64, 32, 64, 2, 10),
    (256, 64, 256, 4, 10),
    (512, 128, 512, 4, 10),
    (1024, 256, 1024, 2, 10),
]


def timeit(step: Callable[[], None], block: int, repeats: int) -> float:
    for _ in range(max(block // 2, 3)):
        step()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(block):
            step()
        samples.append((time.perf_counter() - t0) / block)
    return statistics.median(samples)


def ours(batch: int, n_in: int, width: int, depth: int, classes: int, dtype: str,
         x: np.ndarray, y: np.ndarray) -> Callable[[], None]:
    spec = parse_model_spec(f"mlp:depth={depth},width={width},act=relu")
    graph = mlp_graph(spec, n_in, classes, dtype=dtype)
    store = store_for(graph, seed=0)
    ex = Executor(graph, store, loss="cross_entropy")
    opt = make_optimizer("adam", lr=1e-3)

    def step() -> None:
        ex.train_step(x, y, 0)
        opt.step(store, 1e-3)

    return step


def pytorch(batch: int, n_in: int, width: int, depth: int, classes: int, dtype: str,
            x: np.ndarray, y: np.ndarray, foreach: bool | None) -> Callable[[], None]:
    import torch
    import torch.nn.functional as F

    tdtype = torch.float64 if dtype == "float64" else torch.float32
    layers: list[torch.nn.Module] = []
    d = n_in
    for _ in range(depth):
        layers += [torch.nn.Linear(d, width), torch.nn.ReLU()]
        d = width
    model = torch.nn.Sequential(*layers, torch.nn.Linear(d, classes)).to(tdtype)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=foreach)
    tx, ty = torch.tensor(x, dtype=tdtype), torch.tensor(y)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(tx), ty).backward()
        opt.step()

    return step


def measure(side: str, size: tuple[int, int, int, int, int], dtype: str, repeats: int) -> float:
    """Seconds per step of one side, in this process."""
    batch, n_in, width, depth, classes = size
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch, n_in)).astype(dtype)
    y = rng.integers(0, classes, size=batch)
    block = max(5, int(2e8 // (batch * width * width * max(depth, 1) * 6)))
    if side == "ours":
        return timeit(ours(batch, n_in, width, depth, classes, dtype, x, y), block, repeats)
    return min(timeit(pytorch(batch, n_in, width, depth, classes, dtype, x, y, fe), block,
                      repeats) for fe in (None, True))


def in_subprocess(side: str, index: int, dtype: str, repeats: int) -> float:
    out = subprocess.run([sys.executable, __file__, "--child", side, str(index), "--dtype",
                          dtype, "--repeats", str(repeats)], check=True, capture_output=True,
                         text=True).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    from aicf_induct.cli.options import positive_int  # (0 rounds: no median)

    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    ap.add_argument("--quick", action="store_true", help="fewer repeats (smoke run)")
    ap.add_argument("--rounds", type=positive_int, default=3,
                    help="ABBA rounds per size, each side measured in 2 processes a round")
    ap.add_argument("--repeats", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--child", nargs=2, metavar=("SIDE", "SIZE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    repeats = args.repeats or (3 if args.quick else 7)
    if args.child:
        side, index = args.child
        print(measure(side, SIZES[int(index)], args.dtype, repeats))
        return
    import torch

    load = os.getloadavg()[0]
    print(f"# step_cpu: {date.today()}, {cpu_model()}, {os.cpu_count()} cores, load {load:.1f}, "
          f"numpy {np.__version__}, torch {torch.__version__} ({torch.get_num_threads()} "
          f"threads), {args.dtype}")
    print("| batch | model (in→width×depth→out) | ours ms | PyTorch ms (best) | ratio | "
          "range over processes, ours | PyTorch |")
    print("|---|---|---|---|---|---|---|")
    for k, (batch, n_in, width, depth, classes) in enumerate(SIZES):
        # ABBA rounds, each measure in a fresh process: a drift in machine load hits both
        # sides alike, and the median over processes absorbs the per-process spread seen on
        # this VM (the same step measures ~6.3 ms in some processes, ~10 ms in others)
        ours_t: list[float] = []
        torch_t: list[float] = []
        for _ in range(args.rounds):
            ours_t.append(in_subprocess("ours", k, args.dtype, repeats))
            torch_t += [in_subprocess("torch", k, args.dtype, repeats) for _ in range(2)]
            ours_t.append(in_subprocess("ours", k, args.dtype, repeats))
        t_ours, t_torch = statistics.median(ours_t), statistics.median(torch_t)
        spread = (f"{min(ours_t) * 1e3:.2f}–{max(ours_t) * 1e3:.2f} | "
                  f"{min(torch_t) * 1e3:.2f}–{max(torch_t) * 1e3:.2f}")
        print(f"| {batch} | {n_in}→{width}×{depth}→{classes} | {t_ours * 1e3:.3f} | "
              f"{t_torch * 1e3:.3f} | {t_ours / t_torch:.2f}× | {spread} |", flush=True)


if __name__ == "__main__":
    main()
