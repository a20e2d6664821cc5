"""A lower bound on the one-kernel step's time (kernels.cuda.mlp_step), from its shape
alone, so the autotuner can rule out a schedule that cannot beat the time already measured
without compiling or launching it (at width 2048 and batch 32, "clusters" in float64 runs
one row tile's whole forward and backward on the 8 blocks of one cluster: far slower than
the plan's GEMMs, and once it stalled the tuner for minutes).

The bound: a block runs on one multiprocessor, so the multiply-adds one block must do in
turn take at least that many over the multiprocessor's peak rate (MAX_FMA_PER_CLOCK) at
MAX_CLOCK_GHZ. What one block must do, per schedule:
- "layers": each phase's work spread evenly over the largest grid (it never rules out);
- "rows": a row tile's forward and data gradients on one block, then the weight
  gradients spread over the grid;
- "clusters": the same row tile's work over the CLUSTER blocks of a cluster.
Row tiles beyond the grid's run in turn. Barriers, loads and the loss are left out, so the
true time is above the bound."""

from __future__ import annotations

from collections.abc import Sequence

from aicf_induct.kernels.cuda.mlp_step import CLUSTER, TILE, cdiv

MAX_BLOCKS_PER_SM = 8  # 2048 threads a multiprocessor over the kernel's 256 a block
MAX_CLOCK_GHZ = 2.5  # no NVIDIA GPU's SM clock is faster
# multiply-adds a multiprocessor completes a clock at most: FP64 and FP32 SIMT units (64 and
# 128 on sm_80/sm_90, fewer elsewhere), TF32 tensor cores (1024 dense on an H100's SM)
MAX_FMA_PER_CLOCK = {"float64": 64, "float32": 128, "tf32": 1024}


def step_floor_us(batch: int, widths: Sequence[tuple[int, int]], schedule: str, dtype: str,
                  mma: bool, sms: int) -> float:
    """Microseconds the one-kernel step of `schedule` takes at least, for layers of
    (in_features, out_features) `widths` over `batch` rows, parameters of `dtype`
    (TF32 tensor cores when `mma`), on a device of `sms` multiprocessors."""
    rate = MAX_FMA_PER_CLOCK["tf32" if mma else dtype] * MAX_CLOCK_GHZ * 1e3  # FMA per us
    grid = max(1, sms) * MAX_BLOCKS_PER_SM
    fwd = sum(i * o for i, o in widths)  # per row
    dgrad = sum(i * o for i, o in widths[1:])  # the first layer's input needs no gradient
    if schedule == "layers":  # forward, weight and data gradients, each spread over the grid
        return batch * (2 * fwd + dgrad) / grid / rate
    rows = cdiv(batch, TILE)
    per_tile = min(batch, TILE) * (fwd + dgrad)
    if schedule == "rows":
        tiles = float(per_tile * cdiv(rows, grid))
    elif schedule == "clusters":
        tiles = per_tile / CLUSTER * cdiv(rows * CLUSTER, grid)
    else:
        raise ValueError(f"unknown schedule {schedule!r}")
    return (tiles + batch * fwd / grid) / rate
