"""Not a test: on the GPU, run a tuned fused plan one kernel at a time with a device sync
after each, and report the kernels chosen, which call faults, and whether the whole step
captures (python3 tests/kernels/gpu_diag.py)."""

from __future__ import annotations

import sys

import cupy as cp
import numpy as np

from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
from aicf_induct.kernels.autotune import Autotuner, TunedRegistry
from aicf_induct.kernels.cuda.compile import device
from aicf_induct.kernels.cuda.timer import cuda_timer
from aicf_induct.runtime.cuda_step import CudaStep
from aicf_induct.runtime.executor import Executor, store_for
from aicf_induct.runtime.optimizers import make_optimizer


def run(spec: str, n_in: int, n_out: int, batch: int, dtype: str, precision: str) -> None:
    graph = mlp_graph(parse_model_spec(spec), n_in, n_out, dtype=dtype)
    store = store_for(graph, seed=0, xp=cp, dtype=dtype)
    tuner = Autotuner(cuda_timer, device().name)
    ex = Executor(graph, store, loss="cross_entropy", device="cuda", xp=cp, fuse=True,
                  precision=precision, registry=TunedRegistry(tuner))
    plan = ex.plan("train", batch)
    cp.cuda.runtime.deviceSynchronize()
    print(f"== {spec} {dtype} {precision} b={batch}: {plan.kernel_names}", flush=True)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch, n_in)).astype(dtype)
    y = rng.integers(0, n_out, size=batch)
    plan.feed({"x": x, "labels": y}, 0)
    for ins, call, name in zip(plan.program, plan._calls, plan.kernel_names, strict=True):
        try:
            call()
            cp.cuda.runtime.deviceSynchronize()
        except Exception as err:
            print(f"   FAULT at {ins.kind} {ins.op} {ins.node_id} [{name}]: {err}", flush=True)
            sys.exit(1)
    step = CudaStep(ex, make_optimizer("adam", lr=1e-3))
    s = step.run(x, y, 0, 1e-3)
    print(f"   step ok: captured={step.captured} error={step.graph_error} {s}", flush=True)


if __name__ == "__main__":
    run("mlp:depth=2,width=64,act=relu", 16, 2, 256, "float32", "fp32")
    run("mlp:depth=2,width=32,act=relu", 8, 3, 32, "float64", "fp32")
    run("mlp:depth=2,width=64,act=relu", 16, 2, 256, "float32", "tf32")
    run("mlp:depth=4,width=256,act=relu", 64, 10, 512, "float32", "tf32")
