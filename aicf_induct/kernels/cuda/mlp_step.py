"""The whole training step of an MLP chain (forward, softmax cross-entropy, backward) in one
persistent kernel launch (mlp_step.cu, its tiles in mlp_tile.cuh).

A small model's step is a few dozen launches of a few microseconds each, every one bound
by latency; one launch whose phases are separated by a grid-wide barrier removes all but
one. It writes every gradient (no memset) and the loss; the optimizer kernel follows as
usual. Its products are SIMT in the parameters' dtype (fp32 or fp64), or TF32 tensor cores
(mma.sync) under the tf32 and bf16 policies. Operand tiles stream into shared memory by
cp.async through a few stages, the layers' meta is read once into shared memory, and with
-DMLP_PROFILE (`profiled`) the kernel records when each block finished each phase.

Three schedules (see mlp_step.cu): "layers", a phase per layer and direction, for
batches wide enough to fill the device a layer at a time; "rows", where each block runs
the forward and data gradients of its own rows with no barrier and one phase computes
every weight gradient, for narrow models; and "clusters" (sm_90+), "rows" with a row tile's
columns spread over a thread-block cluster of CLUSTER blocks that meet at the cluster's
hardware barrier between layers, so a wide layer is not one block's work and only the
weight gradients wait for the whole grid. `runtime.cuda_step` times those offered here
(`schedules_for`) against the fused-kernel plan per batch shape and keeps the fastest
(`Autotuner.pick`). The kernel takes its own description of the chain (`StepSpec`), which
the caller builds from the compiler's.

The constants below that the CUDA code shares (tile, padding, threads, meta fields, cluster
size, reduction space) are defined here only: `MLP_STEP` passes them as -D, and the source
checks what it assumes of them with static_assert.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from aicf_induct.ir.ops import activation
from aicf_induct.kernels.cuda.compile import device, function, max_active_clusters, tensor_cores
from aicf_induct.kernels.cuda.launch import act_id, ctype, f64, i32
from aicf_induct.kernels.cuda.sources import Family

THREADS = 256
TILE = 32  # output tile side and K chunk
PART = TILE * TILE + TILE  # one partial tile and its partial bias sums
ALIGN_BYTES = 256  # every work buffer starts on its own cache lines
FIELDS = 16  # meta fields per layer, see mlp_step.cu
# K chunks' worth of time a split-K reduction costs (split_counts). On an H100 at size 1 of
# step_gpu.py, 6 timed best of 0, 6, 10 and 14 (benchmarks/RESULTS.md)
SPLIT_COST = 6
SCHEDULES = {"layers": 0, "rows": 1, "clusters": 2}
CLUSTER = 8  # blocks a cluster under "clusters"
CLUSTERS_FROM = 90  # thread-block clusters: sm_90 and newer
# K-chunk stages (mlp_tile.cuh: Stages): a tile's chunks all resident when they fit
PAD = TILE + 8  # row stride of a stage's operand tiles (float4 rows, no bank conflicts)
MAX_STAGES = 8
# products (mlp_tile.cuh): 0 SIMT in the parameters' dtype; 1 TF32 tensor cores
# (mma.sync, inputs rounded to TF32, fp32 sums), for the tf32 and bf16 policies
MMA_MODES = {0: "simt", 1: "tf32"}
# bytes a block: 4, 3 and 4 stages in fp32
STAGE_BUDGET = {"layers": 40 << 10, "rows": 42 << 10, "clusters": 40 << 10}
MAX_FLOPS = 2e9  # per step: above this, cuBLAS's GEMMs win by far, so nothing is timed
MAX_ROW_CHUNKS = 64  # "rows": most K chunks one block may run in a row
REDUCE = 3 * TILE * (TILE + 1) + 4 * TILE  # elements of tile32's `red` and `rsum`
MLP_STEP = Family("mlp_step.cu", defines={
    "T_NT": THREADS, "T_BM": TILE, "T_BK": TILE, "T_PAD": PAD, "T_PART": PART, "MF": FIELDS,
    "T_CLUSTER": CLUSTER, "T_REDUCE": REDUCE})


@dataclass(frozen=True)
class StepLayer:
    """A linear layer of the chain: its widths, and where its weight (out, in) and bias
    start in the flat parameter and gradient buffers."""

    in_features: int
    out_features: int
    weight: int
    bias: int | None  # None: no bias


@dataclass(frozen=True)
class StepSpec:
    """The step the kernel runs: `layers` in order, `act` (an activation op with `act_attrs`,
    or None) after every layer but the last, then softmax cross-entropy with
    `label_smoothing`, over a batch of `batch` rows."""

    batch: int
    layers: tuple[StepLayer, ...]
    act: str | None
    act_attrs: dict[str, Any]
    label_smoothing: float


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def split_counts(gemms: list[tuple[int, int]], grid: int,
                 split_cost: int | None = None) -> list[int]:
    """Splits S per GEMM (tiles, K chunks) running in one phase, by a cost model in K chunks:
    an item costs its chunks, plus `split_cost` when its GEMM is split (the partials' store,
    fence, ticket and reload); a phase costs its dearest item. The cheapest splits whose
    items fit one wave of `grid`; none when even the unsplit items overflow it."""
    cost = SPLIT_COST if split_cost is None else split_cost
    longest = max(ch for _, ch in gemms)
    for limit in range(1, longest + 1):  # the phase's cost; `longest` is the unsplit plan's
        per = limit - cost  # chunks a split may run within the limit
        if limit < longest and per < 1:
            continue
        counts = [1 if ch <= limit else cdiv(ch, per) for _, ch in gemms]
        if sum(t * s for (t, _), s in zip(gemms, counts, strict=True)) <= grid:
            return counts
    return [1] * len(gemms)


def stage_elements(nj: int) -> int:
    """Elements of one K-chunk stage of a TILE x (TILE * nj) tile: A (k, i) and B (k, j)."""
    return TILE * PAD + TILE * (TILE * nj + PAD - TILE)


def shared_layout(itemsize: int, budget: int, schedule: str) -> tuple[int, int, int]:
    """(stages for 32-wide tiles, stages for 64-wide ones, dynamic shared bytes a block): as
    many stages as fit `budget`, at most MAX_STAGES; the tiles' reductions reuse them. Only
    "rows" has 64-wide tiles."""
    widths = (1, 2) if schedule == "rows" else (1,)
    n = {nj: max(1, min(MAX_STAGES, budget // (stage_elements(nj) * itemsize)))
         if nj in widths else 1 for nj in (1, 2)}
    need = max(REDUCE, *(n[nj] * stage_elements(nj) for nj in widths))
    return n[1], n[2], need * itemsize


def step_flops(chain: StepSpec) -> float:
    return 6.0 * chain.batch * sum(ly.in_features * ly.out_features for ly in chain.layers)


def row_chunks(chain: StepSpec) -> int:
    """K chunks one block runs in a row under "rows": the forward and data gradients of its
    rows, in tiles 2 * TILE wide."""
    fwd = sum(cdiv(ly.out_features, 2 * TILE) * cdiv(ly.in_features, TILE)
              for ly in chain.layers)
    back = sum(cdiv(ly.in_features, 2 * TILE) * cdiv(ly.out_features, TILE)
               for ly in chain.layers[1:])
    return fwd + back


def schedules_for(chain: StepSpec, capability: int | None = None) -> list[str]:
    """The schedules worth timing for this chain on a device of `capability` (e.g. 90 for
    sm_90; the current device's by default): none for large models."""
    if step_flops(chain) > MAX_FLOPS:
        return []
    cap = device().capability if capability is None else capability
    return (["layers"] + (["rows"] if row_chunks(chain) <= MAX_ROW_CHUNKS else [])
            + (["clusters"] if cap >= CLUSTERS_FROM else []))


class MlpStepKernel:
    """The step `chain` describes over the flat `params` / `grads` buffers, writing the mean
    loss into `loss`. The batch is read from the addresses in `feed` (a device int64 pair:
    x, labels), which the caller writes before each launch (`set_inputs`, or with its own
    per-step copy). Buffers are bound once; a CUDA graph may capture `launch`."""

    def __init__(self, chain: StepSpec, feed: Any, params: Any, grads: Any, loss: Any,
                 schedule: str = "layers",
                 grid: int | None = None, profile: bool = False,
                 stage_budget: int | None = None, mma: int = 0) -> None:
        import cupy

        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
        dt = np.dtype(params.dtype)
        if mma not in MMA_MODES:
            raise ValueError(f"mma must be one of {sorted(MMA_MODES)}, got {mma!r}")
        if schedule == "clusters" and device().capability < CLUSTERS_FROM:
            raise ValueError(f"the clusters schedule needs sm_{CLUSTERS_FROM} or newer, got "
                             f"sm_{device().capability}")
        if mma and not tensor_cores(dt):
            raise ValueError(f"TF32 tensor-core products need float32 parameters and sm_80 or "
                             f"newer, got {dt} on sm_{device().capability}")
        if grads.dtype != dt or loss.dtype != dt:
            raise TypeError(f"mixed dtypes: params {dt}, grads {grads.dtype}, loss {loss.dtype}")
        self.dtype = dt
        self.chain, self.schedule = chain, schedule
        act = chain.act
        keep_z = act is not None and not activation(act, chain.act_attrs).from_output
        self.stage_budget = min(stage_budget or STAGE_BUDGET[schedule], device().smem_optin)
        n1, n2, self.smem_bytes = shared_layout(dt.itemsize, self.stage_budget, schedule)
        head = f"{ctype(dt)},{act_id(chain.act, chain.act_attrs)},{str(keep_z).lower()}"
        name = (f"mlp_step_clusters<{head},{n1},{mma}>" if schedule == "clusters" else
                f"mlp_step<{head},{SCHEDULES[schedule]},{n1},{n2},{mma}>")
        self.mma = mma
        self.fn = function(MLP_STEP, name, ("-DMLP_PROFILE",) if profile else ())
        self.fn.max_dynamic_shared_size_bytes = self.smem_bytes
        most = self.most_blocks()
        self.grid = grid or self._grid(most)
        if schedule == "clusters" and self.grid % CLUSTER:
            raise ValueError(f"the clusters schedule runs whole clusters of {CLUSTER} blocks: "
                             f"grid {self.grid} is not a multiple")
        if self.grid > most:  # it would wait at its first grid barrier for ever
            raise ValueError(f"grid {self.grid} is more blocks than this device keeps resident "
                             f"at once for this kernel ({most}); the grid barrier needs every "
                             f"block running")
        # timestamps per phase and block (mlp_step.cu: MARK), when profiling
        self.prof = (cupy.zeros((2 * len(self.phase_names()) + 2, self.grid), dtype=np.uint64)
                     if profile else None)
        meta, work, part, tickets = self._layout(keep_z, ALIGN_BYTES // dt.itemsize)
        self.meta = cupy.asarray(meta)
        self.work = cupy.empty(max(work, 1), dtype=dt)
        self.part = cupy.empty(max(part, 1), dtype=dt)
        self.tickets = cupy.zeros(max(tickets, 1), dtype=np.uint32)
        self.partials = cupy.zeros(self.grid, dtype=np.float64)
        self.barrier = cupy.zeros(2, dtype=np.uint32)
        self.feed, self.params, self.grads, self.loss = feed, params, grads, loss

    # -- sizing ------------------------------------------------------------------------------
    def _phases(self, grid: int) -> list[list[tuple[int, str, int, int]]]:
        """Per phase, its GEMMs as (layer, kind, tiles, splits); kind: f, w or d (r: the
        "rows" schedule's first phase, a row tile per item; c: the "clusters" schedule's, a
        block per row tile and cluster rank)."""
        m, layers = self.chain.batch, self.chain.layers
        rows = cdiv(m, TILE)

        def gemms(spec: list[tuple[int, str, int, int]]) -> list[tuple[int, str, int, int]]:
            counts = split_counts([(t, ch) for _, _, t, ch in spec], grid)
            return [(k, kind, t, s) for (k, kind, t, _), s in zip(spec, counts, strict=True)]

        def wgrad(k: int) -> tuple[int, str, int, int]:
            ly = layers[k]
            return (k, "w", cdiv(ly.out_features, TILE) * cdiv(ly.in_features, TILE),
                    cdiv(m, TILE))

        if self.schedule == "rows":  # a block per row tile, then every weight gradient
            return [[(-1, "r", rows, 1)], gemms([wgrad(k) for k in range(len(layers))])]
        if self.schedule == "clusters":  # a cluster per row tile, then the same
            return [[(-1, "c", rows * CLUSTER, 1)],
                    gemms([wgrad(k) for k in range(len(layers))])]
        phases = [gemms([(k, "f", rows * cdiv(ly.out_features, TILE),
                          cdiv(ly.in_features, TILE))]) for k, ly in enumerate(layers)]
        for k in reversed(range(len(layers))):
            spec = [wgrad(k)]
            if k > 0:
                ly = layers[k]
                spec.append((k, "d", rows * cdiv(ly.in_features, TILE),
                             cdiv(ly.out_features, TILE)))
            phases.append(gemms(spec))
        return phases

    def _grid(self, most: int) -> int:
        """Blocks: as many as the largest phase has items, at most `most`, what the device
        keeps resident at once (the barrier needs every block running)."""
        need = max(sum(t * s for _, _, t, s in ph) for ph in self._phases(most))
        grid = max(1, min(most, need))
        return cdiv(grid, CLUSTER) * CLUSTER if self.schedule == "clusters" else grid

    def most_blocks(self) -> int:
        """The largest grid the device keeps resident at once: blocks a multiprocessor times
        multiprocessors, or under "clusters" whole clusters, as many as run at once."""
        most = device().sms * self.resident()
        return CLUSTER * self._resident_clusters(most) if self.schedule == "clusters" else most

    def _resident_clusters(self, blocks: int) -> int:
        """Clusters the device runs at once: the driver's figure, or, where it cannot say,
        a cluster per 2 * CLUSTER multiprocessors (GPCs need not divide evenly)."""
        grid = max(CLUSTER, blocks // CLUSTER * CLUSTER)
        n = max_active_clusters(self.fn, grid, THREADS, self.smem_bytes)
        return max(1, n if n is not None else device().sms // (2 * CLUSTER))

    def resident(self) -> int:
        """Blocks of this kernel one multiprocessor holds at once (its registers, shared
        memory and threads against the device's)."""
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())
        regs = cdiv(max(int(self.fn.num_regs), 1), 8) * 8 * THREADS
        # static and dynamic, and the 1 KB a block the runtime reserves
        smem = int(self.fn.shared_size_bytes) + self.smem_bytes + 1024
        return max(1, min(int(props["regsPerMultiprocessor"]) // regs,
                          int(props["sharedMemPerMultiprocessor"]) // smem,
                          int(props["maxThreadsPerMultiProcessor"]) // THREADS))

    def _layout(self, keep_z: bool, align: int) -> tuple[np.ndarray, int, int, int]:
        """meta (layers, FIELDS) and the sizes of the work, partial-tile and ticket buffers."""
        layers, m = self.chain.layers, self.chain.batch
        meta = np.full((len(layers), FIELDS), -1, dtype=np.int64)
        top = {"work": 0, "part": 0, "tickets": 0}

        def alloc(buf: str, n: int) -> int:
            at = top[buf]
            top[buf] += cdiv(n, align) * align if buf != "tickets" else n
            return at

        for k, ly in enumerate(layers):
            meta[k, :4] = (ly.in_features, ly.out_features, ly.weight,
                           ly.bias if ly.bias is not None else -1)
            meta[k, 4] = alloc("work", m * ly.out_features)
            if k < len(layers) - 1 and keep_z:
                meta[k, 5] = alloc("work", m * ly.out_features)
            meta[k, 6] = alloc("work", m * ly.out_features)
            meta[k, 7:] = (1, 1, 1, 0, 0, 0, 0, 0, 0)
        column = {"f": 0, "w": 1, "d": 2}
        for phase in self._phases(self.grid):
            for k, kind, tiles, s in phase:
                if kind not in column:
                    continue
                c = column[kind]
                meta[k, 7 + c] = s
                if s > 1:
                    meta[k, 10 + c] = alloc("part", tiles * s * PART)
                    meta[k, 13 + c] = alloc("tickets", tiles)
        return meta, top["work"], top["part"], top["tickets"]

    def set_inputs(self, x: Any, labels: Any) -> None:
        """Point the kernel at a batch: x (batch, in) of the parameters' dtype, int64 labels
        (batch,), both contiguous device arrays that stay alive while it runs."""
        m, n_in = self.chain.batch, self.chain.layers[0].in_features
        if x.dtype != self.dtype or tuple(x.shape) != (m, n_in) or not x.flags.c_contiguous:
            raise ValueError(f"x must be a contiguous ({m}, {n_in}) {self.dtype} array, "
                             f"got {tuple(x.shape)} {x.dtype}")
        if labels.dtype != np.int64 or tuple(labels.shape) != (m,):
            raise ValueError(f"labels must be ({m},) int64, got {tuple(labels.shape)} "
                             f"{labels.dtype}")
        self.feed.set(np.array([x.data.ptr, labels.data.ptr], dtype=np.int64))

    def launch(self) -> None:
        c = self.chain
        prof = self.prof if self.prof is not None else np.uint64(0)
        self.fn((self.grid,), (THREADS,),
                (i32(len(c.layers)), i32(c.batch), self.meta, self.feed, self.params,
                 self.grads, self.work, f64(c.label_smoothing), self.loss, self.partials,
                 self.barrier, self.part, self.tickets, prof), shared_mem=self.smem_bytes)

    # -- profiling ---------------------------------------------------------------------------
    def profiled(self) -> MlpStepKernel:
        """The same step on the same buffers and grid, built to record phase times."""
        return MlpStepKernel(self.chain, self.feed, self.params, self.grads, self.loss,
                             self.schedule, self.grid, profile=True,
                             stage_budget=self.stage_budget, mma=self.mma)

    def phase_names(self) -> list[str]:
        """The kernel's phases in order (each ends at a grid barrier but the last)."""
        n = len(self.chain.layers)
        if self.schedule in ("rows", "clusters"):
            return [f"{self.schedule}: forward, loss, data gradients", "weight gradients"]
        loss = [] if self.chain.layers[-1].out_features <= TILE else ["loss"]
        return ([f"forward {k}" for k in range(n)] + loss
                + [f"backward {k}" for k in reversed(range(n))])

    def phase_profile(self) -> list[tuple[str, float, float, float]]:
        """Per phase of the last launch (the kernel built with profile=True): its name, the
        µs until the last block finished its work, until the median block did, and the
        barrier after it (last arrival to first release; 0 after the last phase). Stamps
        are ns since the epoch, ~1.7e18: differences are taken in integers, since a float64
        holds such a stamp only to 256 ns (a median computed on the stamps themselves came
        out before the phase's start, or after its last block)."""
        if self.prof is None:
            raise RuntimeError("build the kernel with profile=True to read phase times")
        t = self.prof.get().astype(np.int64)
        names = self.phase_names()
        out, start = [], int(t[0].min())
        for p, name in enumerate(names):
            done = t[1 + 2 * p] - start  # ns since the phase began
            last = p == len(names) - 1
            release = start if last else int(t[2 + 2 * p].min())
            out.append((name, int(done.max()) / 1e3, float(np.median(done)) / 1e3,
                        0.0 if last else (release - start - int(done.max())) / 1e3))
            start = release
        return out
