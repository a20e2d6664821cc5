"""A run's epochs queued on the GPU with no host synchronisation (for runtime.many).

Each run owns a CUDA stream. Its training split stays on the device (`DeviceData`, shared
by every run of the problem). An epoch is queued as: the epoch's row order (the same
permutation `BatchStream` gives the solo run, made on the host: two integers of state) and
a table of the steps' optimizer terms (learning rate, bias corrections, the step for the
dropout key: `cuda_step.fill_hyper`, as the solo step computes them) copied to the device;
then one CUDA graph replay per step, or per MULTI full-batch steps (one graph of MULTI
steps, built from the step's graph as child nodes by kernels.cuda.graph_repeat). A step's
graph holds what the solo step does, around it what the host did per step there: one kernel
gathers the batch's rows into the plan's input buffers and copies the step's terms into the
step's term array (both indexed by a step counter on the device), then the step itself
(`CudaStep`'s body: the plan or the one-kernel step, then the fused optimizer update), and a
copy of the step's statistics (loss, gradient norm, the update ratio's sums) into row
`counter` of a buffer, counter + 1. The validation split is evaluated on the device after
the last step, one more replay (the eval plans' chunks, their losses and predictions copied
into buffers of the run). `collect` copies the statistics and the evaluation back into
page-locked host buffers (the one wait of an epoch) and logs the step records: `step_time_s`
is the epoch's wall time over its steps (one run's share of the GPU is not observable
without a synchronisation per step).
"""

from __future__ import annotations

import ctypes
import functools
import sys
import time
from collections import Counter
from typing import Any

import numpy as np

from aicf_induct.problems.problem import Problem
from aicf_induct.records import StepBatch, send_steps
from aicf_induct.runtime.cuda_step import (
    CudaStep,
    capture,
    fill_hyper_steps,
    kept_buffers,
    warm_up,
)
from aicf_induct.runtime.metrics import score
from aicf_induct.runtime.schedules import lr_range
from aicf_induct.runtime.trainer import EVAL_CHUNK, FitState, Trainer

MULTI = 16  # full-batch steps in one graph replay (at most), as child nodes of the step's graph
MULTI_CAPTURED = 16  # at most, where the driver cannot build that and the steps are captured
# the slower paths this process's runs fell back to, counted a run each: "eager" (a batch
# size's steps not one replay), "multi" (full-batch steps captured k at a time); the first of
# each is said on stderr (the results are the same, the speed is not, and one such fallback
# went unnoticed until a test's order exposed it); a GPU-engine sweep reports the counts
FELL_BACK: Counter[str] = Counter()
STATS = 4  # per step: sum g^2, sum theta^2, sum delta^2, loss (kernels.cuda.optim.STATS)

_STATS_SRC = r"""
extern "C" __global__ void aicf_step_stats(const double* stats, double* out,
                                           long long* counter) {
    long long k = counter[0];
    for (int j = 0; j < 4; ++j) out[k * 4 + j] = stats[j];
    counter[0] = k + 1;
}
"""

# a step's feed in one kernel: its batch's rows (x, then labels) gathered by the epoch's
# row order, and its row of the terms table; `counter` is the step within the epoch
_FEED_SRC = r"""
extern "C" __global__ void NAME(const XT* xs, const YT* ys, const double* table,
        const long long* order, const long long* counter, long long batch, long long rows,
        long long xcols, long long ycols, long long width, XT* bx, YT* by, double* hyper) {
    const long long k = counter[0], nx = rows * xcols, ny = rows * ycols;
    const long long first = k * batch;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < nx + ny + width;
         i += (long long)gridDim.x * blockDim.x) {
        if (i < nx) {
            bx[i] = xs[order[first + i / xcols] * xcols + i % xcols];
        } else if (i < nx + ny) {
            const long long j = i - nx;
            by[j] = ys[order[first + j / ycols] * ycols + j % ycols];
        } else {
            hyper[i - nx - ny] = table[k * width + (i - nx - ny)];
        }
    }
}
"""
_C_TYPES = {"float64": "double", "float32": "float", "int64": "long long", "int32": "int"}
FEED_BLOCK = 256


@functools.cache
def _stats_kernel() -> Any:
    """Keep the step's statistics in row `counter` of the epoch's buffer, counter + 1."""
    import cupy

    return cupy.RawKernel(_STATS_SRC, "aicf_step_stats")


@functools.cache
def _feed_kernel(x_dtype: str, y_dtype: str) -> Any:
    """The step's feed (`_FEED_SRC`) for inputs of `x_dtype` and labels of `y_dtype`."""
    import cupy

    name = f"aicf_step_feed_{x_dtype}_{y_dtype}"
    src = (_FEED_SRC.replace("NAME", name).replace("XT", _C_TYPES[x_dtype])
           .replace("YT", _C_TYPES[y_dtype]))
    return cupy.RawKernel(src, name)


def _pinned(like: Any) -> np.ndarray:
    """A host array in page-locked memory for `like`'s copies back (asynchronous)."""
    import cupyx

    return cupyx.empty_pinned(like.shape, like.dtype)


def _copy_back(src: Any, dst: np.ndarray, stream: Any) -> None:
    """Queue src's bytes into dst (page-locked) on `stream`; read once the stream is done."""
    src.data.copy_to_host_async(ctypes.c_void_p(dst.ctypes.data), src.nbytes, stream)


def _repeat(body: Any, k: int) -> None:
    for _ in range(k):
        body()


class DeviceData:
    """A problem's training and validation splits on the device, one copy per dtype, shared
    by the runs of the problem."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self._arrays: dict[tuple[str, str, str], Any] = {}

    def array(self, split: str, part: str, dtype: Any) -> Any:
        key = (split, part, np.dtype(dtype).str)
        a = self._arrays.get(key)
        if a is None:
            import cupy

            host = getattr(getattr(self.problem, split), part)
            null = cupy.cuda.Stream.null
            with null:  # every run's stream reads it: uploaded, and waited for, once
                a = self._arrays[key] = cupy.asarray(np.ascontiguousarray(host, dtype=dtype))
            null.synchronize()
        return a


class DeviceEpochs:
    """The epochs of one GPU run, queued on its own stream (see the module docstring)."""

    def __init__(self, trainer: Trainer, data: DeviceData) -> None:
        import cupy

        self.trainer, self.data = trainer, data
        cupy.cuda.Stream.null.synchronize()  # the trainer's parameters, the data's upload
        self.stream = cupy.cuda.Stream(non_blocking=True)
        cfg = trainer.config
        self.batch = cfg.batch_size
        n = len(trainer.problem.train)
        # the solo run's batches (no last batch of one row): step k feeds rows
        # [k * batch, k * batch + sizes[k]) of the epoch's order
        self.sizes = trainer.stream.sizes()
        self.n_batches = len(self.sizes)
        self.cuda_step = CudaStep(trainer.executor, trainer.optimizer,
                                  clip_norm=cfg.clip_norm, graphs=False)
        with self.stream:
            self.order = cupy.zeros(n, dtype=np.int64)
            self.counter = cupy.zeros(1, dtype=np.int64)
            self.stats = cupy.zeros((self.n_batches, STATS), dtype=np.float64)
            self._build()
        # page-locked host twins: an epoch's order and terms go up, its statistics come back,
        # as truly asynchronous copies (no staging of pageable memory by the driver); each
        # is rewritten only after `collect` waited for the run's stream
        self.stats_host = _pinned(self.stats)
        self.order_host = _pinned(self.order)
        self.table_host = _pinned(self.table)
        self._queued: tuple[int, int, float, np.ndarray, list[int], Any] | None = None

    # -- setup -------------------------------------------------------------------------------
    def _build(self) -> None:
        """One entry (plan, update, step body) per batch size, each captured with its step
        graph before the next is built: building an entry points the plan context's device
        step (the dropout key) at the entry's own term array, and a captured launch keeps
        the pointer it saw."""
        import cupy

        tr = self.trainer
        train = tr.problem.train
        self.entries: dict[int, Any] = {}
        self.graphs: dict[int, Any] = {}
        self.eager: dict[int, str] = {}  # batch size -> why its steps are not one replay
        self.fell_back: set[str] = set()  # the slower paths this run took (`FELL_BACK`)
        # (k, a graph of k full-batch steps), largest first: the step's graph repeated MULTI
        # times and the rest of an epoch's full batches, or the steps captured k at a time
        self.repeats: list[tuple[int, Any]] = []
        self._sequences: dict[int, list[tuple[Any, int]]] = {}
        self.multi_error = ""  # why the step's graph could not be repeated as child nodes
        for size in sorted(set(self.sizes), reverse=True):
            e = self.entries[size] = self.cuda_step.prepare(train.X[:size], train.y[:size],
                                                            tr.step_count)
            bx, by = e.inputs
            if size == self.sizes[0]:
                self.x = self.data.array("train", "X", bx.dtype)
                self.y = self.data.array("train", "y", by.dtype)
                self.width = len(e.hyper_host)
                self.table = cupy.zeros((self.n_batches, self.width), dtype=np.float64)
            with kept_buffers(tr.store):
                warm_up(e, sync=False)
            # compile the small kernels before a capture (not the body: its update would
            # move the parameters)
            feed, keep = self._feed(e), self._keep(e)
            feed()
            keep()
            self.counter.fill(0)
            if not e.plan.capturable:
                self._run_eagerly(size, "a kernel of the plan cannot be captured")
                continue
            graph, error = capture(self._body(e), sync=False)
            if graph is None:
                self._run_eagerly(size, "capture failed: " + error)
                continue
            self.graphs[size] = graph
            full = self.sizes.count(size) if size == self.sizes[0] else 0
            if full >= 2:
                self.repeats = self._repeats(graph, e, full)
        # each step's static input buffers (x, labels), by the entry of its batch size
        self.feeds = np.array([self.entries[size].static_feed for size in self.sizes],
                              dtype=np.int64).reshape(-1, 2)
        self._build_eval()

    def _run_eagerly(self, size: int, why: str) -> None:
        """Steps of batch `size` launched one kernel at a time (`why`), said once."""
        self.eager[size] = why
        self._fall_back("eager", f"GPU engine: a run's steps of batch {size} run eagerly, "
                                 f"not as one graph ({why}): slower")

    def _fall_back(self, kind: str, line: str) -> None:
        """A slower path taken: counted once for this run; `line` said for the process's
        first."""
        if kind in self.fell_back:
            return
        self.fell_back.add(kind)
        FELL_BACK[kind] += 1
        if FELL_BACK[kind] == 1:
            print(line, file=sys.stderr, flush=True)

    def _repeats(self, graph: Any, e: Any, full: int) -> list[tuple[int, Any]]:
        """The graphs of k full-batch steps each: the step's graph repeated as child nodes (no
        second capture), MULTI steps and the rest of `full` past a multiple of MULTI; else
        the steps captured MULTI_CAPTURED at a time."""
        from aicf_induct.kernels.cuda.graph_repeat import repeated

        out = []
        for k in sorted({min(MULTI, full), full % MULTI if full > MULTI else 0}, reverse=True):
            if k < 2:
                continue
            many, self.multi_error = repeated(graph, k)
            if many is None:
                break
            out.append((k, many))
        else:
            return out
        k = min(MULTI_CAPTURED, full)
        self._fall_back("multi", f"GPU engine: a step's graph cannot be repeated as child "
                                 f"nodes ({self.multi_error}); its full-batch steps are "
                                 f"captured {k} at a time instead: slower, the same results")
        captured, _ = capture(functools.partial(_repeat, self._body(e), k), sync=False)
        return [(k, captured)] if captured is not None else []

    @property
    def multi(self) -> tuple[int, Any] | None:
        """The graph of the most full-batch steps, (k, graph), if any."""
        return self.repeats[0] if self.repeats else None

    def _build_eval(self) -> None:
        """The validation split's evaluation as one graph (after an eager pass that
        compiles its kernels), its chunks' losses and predictions copied into buffers of the
        run; left eager (`eval_graph` None) where a kernel cannot be captured."""
        import cupy

        ex = self.trainer.executor
        tg = ex.training_graph
        chunks = self._chunks("val")
        self.eval_graph: Any = None
        if not chunks or not all(plan.capturable for _, plan, _, _ in chunks):
            return
        pred = chunks[0][1].value(tg.prediction)
        rows = sum(len(xs) for _, _, xs, _ in chunks)
        self.val_losses = cupy.zeros(len(chunks), dtype=np.float64)
        self.val_preds = cupy.zeros((rows, *pred.shape[1:]), dtype=pred.dtype)
        self.val_host = (_pinned(self.val_losses), _pinned(self.val_preds))

        def evaluate() -> None:
            for k, (start, plan, xs, ys) in enumerate(chunks):
                plan.feed({ex.input_id: xs, tg.labels: ys})
                plan.launch()
                cupy.copyto(self.val_losses[k:k + 1], plan.value(tg.loss).reshape(1),
                            casting="same_kind")
                cupy.copyto(self.val_preds[start:start + len(xs)], plan.value(tg.prediction))

        evaluate()
        self.eval_graph, _ = capture(evaluate, sync=False)
        self.eval_rows = [len(xs) for _, _, xs, _ in chunks]

    def _feed(self, e: Any) -> Any:
        """The entry's step feed (`_FEED_SRC`) as a call."""
        import cupy

        bx, by = e.inputs
        rows = bx.shape[0]
        kernel = _feed_kernel(bx.dtype.name, by.dtype.name)
        total = bx.size + by.size + self.width
        grid = (min((total + FEED_BLOCK - 1) // FEED_BLOCK, 1024),)
        args = (self.x, self.y, self.table, self.order, self.counter, cupy.int64(self.batch),
                cupy.int64(rows), cupy.int64(bx.size // rows), cupy.int64(by.size // rows),
                cupy.int64(self.width), bx, by, e.hyper_dev)
        return functools.partial(kernel, grid, (FEED_BLOCK,), args)

    def _keep(self, e: Any) -> Any:
        """The entry's step statistics kept in the epoch's buffer, as a call."""
        return functools.partial(_stats_kernel(), (1,), (1,),
                                 (e.update.stats, self.stats, self.counter))

    def _body(self, e: Any) -> Any:
        feed, keep = self._feed(e), self._keep(e)

        def body() -> None:
            feed()
            e.body()
            keep()

        return body

    # -- an epoch ----------------------------------------------------------------------------
    def launch(self, fit: FitState, epoch: int) -> None:
        tr = self.trainer
        cfg = tr.config
        n = self.n_batches
        if cfg.max_steps:
            n = min(n, cfg.max_steps - tr.step_count)
        first = tr.step_count
        table = self.table_host[:max(n, 1)]
        table.fill(0.0)
        lrs = lr_range(tr.schedule, first, n)
        # the segments (parameters sharing a step count) are one for every entry: a run
        # trained here is never rewritten
        segs = self.entries[self.sizes[0]].signature[-1]
        fill_hyper_steps(table, tr.optimizer, tr.store, segs, lrs, first)
        table.view(np.int64)[:n, -2:] = self.feeds[:n]
        order = self.order_host
        order[...] = tr.stream.order(epoch)
        with self.stream:
            t0 = time.perf_counter()
            self.order.data.copy_from_host_async(order.ctypes.data_as(ctypes.c_void_p),
                                                 order.nbytes)
            self.table.data.copy_from_host_async(table.ctypes.data_as(ctypes.c_void_p),
                                                 n * self.width * 8)
            self.counter.fill(0)
            k = 0
            for graph, count in self._sequence(n):
                if graph is not None:
                    graph.launch(self.stream)
                else:  # eager: kernels read the dropout key's step from the host
                    e = self.entries[self.sizes[k]]
                    e.plan.ctx.step = first + k
                    self._body(e)()
                k += count
            tr.step_count += n
            if self.eval_graph is not None:
                self.eval_graph.launch(self.stream)
                evals = None
            else:
                evals = self._evaluate("val")
        self._queued = (epoch, first, t0, lrs, self.sizes[:n], evals)

    def _sequence(self, n: int) -> list[tuple[Any, int]]:
        """The replays that run an epoch's first `n` steps: (graph, steps it runs), a graph of
        None for one eager step; the largest repeated graph first, then the rest's, then one
        replay per step (kept for a full epoch: every epoch but a truncated last one)."""
        seq = self._sequences.get(n)
        if seq is not None:
            return seq
        seq, k = [], 0
        while k < n:
            size = self.sizes[k]
            for reps, graph in self.repeats:
                if size == self.sizes[0] and k + reps <= n and self.sizes[k + reps - 1] == size:
                    seq.append((graph, reps))
                    k += reps
                    break
            else:
                seq.append((self.graphs.get(size), 1))
                k += 1
        if n == self.n_batches:
            self._sequences[n] = seq
        return seq

    def _chunks(self, split: str) -> list[tuple[int, Any, Any, Any]]:
        """A split on the device in chunks of EVAL_CHUNK rows, as `Trainer.evaluate` runs
        it: (first row, the eval plan of the chunk's size, its rows, its labels)."""
        ex = self.trainer.executor
        x = self.data.array(split, "X", self.x.dtype)
        y = self.data.array(split, "y", self.y.dtype)
        return [(start, ex.plan("eval", len(x[start:start + EVAL_CHUNK])),
                 x[start:start + EVAL_CHUNK], y[start:start + EVAL_CHUNK])
                for start in range(0, len(x), EVAL_CHUNK)]

    def _evaluate(self, split: str) -> list[tuple[int, Any, Any]]:
        """Queue a split's evaluation in eval mode, chunk by chunk, each chunk's loss and
        predictions copied aside on the device: [(rows, loss, predictions)]."""
        ex = self.trainer.executor
        tg = ex.training_graph
        out = []
        for _, plan, xs, ys in self._chunks(split):
            plan.feed({ex.input_id: xs, tg.labels: ys})
            plan.launch()
            out.append((len(xs), plan.value(tg.loss).copy(), plan.value(tg.prediction).copy()))
        return out

    def _split_result(self, split: str, rows: list[int], losses: list[float],
                      preds: np.ndarray) -> tuple[float, float]:
        """(mean loss, score) of a split from its chunks' rows, losses and predictions."""
        data = getattr(self.trainer.problem, split)
        total = sum(loss * n for n, loss in zip(rows, losses, strict=True))
        return total / max(len(data), 1), score(self.trainer.problem.task, preds, data.y)

    def _read_val(self) -> tuple[list[int], list[float], np.ndarray]:
        """The eval graph's validation results, copied back (with what else is queued)
        after the run's stream is done: (rows, losses, predictions)."""
        losses, preds = self.val_host
        _copy_back(self.val_losses, losses, self.stream)
        _copy_back(self.val_preds, preds, self.stream)
        self.stream.synchronize()
        return self.eval_rows, losses.tolist(), preds

    @staticmethod
    def _read(chunks: list[tuple[int, Any, Any]]) -> tuple[list[int], list[float], np.ndarray]:
        """The host's copy of `_evaluate`'s chunks: (rows, losses, predictions)."""
        return ([rows for rows, _, _ in chunks], [float(loss.get()) for _, loss, _ in chunks],
                np.concatenate([pred.get() for _, _, pred in chunks]))

    # -- the run's end -----------------------------------------------------------------------
    def launch_final(self, fit: FitState) -> None:
        """Restore the best state and queue the evaluation of every split on the run's
        stream; `collect_final` reads it (the host does not wait here)."""
        self.trainer.restore_best(fit)
        # the validation split by the epochs' eval graph where there is one
        splits = ("train", "test") if self.eval_graph is not None else ("train", "val", "test")
        self._final = {split: self._evaluate(split) for split in splits}
        if self.eval_graph is not None:
            self.eval_graph.launch(self.stream)

    def collect_final(self) -> dict[str, float]:
        """The final metrics `launch_final` queued: what `Trainer.final_metrics` gives."""

        def read(split: str) -> tuple[float, float]:
            chunks = self._final.get(split)
            got = self._read_val() if chunks is None else self._read(chunks)
            return self._split_result(split, *got)

        return self.trainer.final_metrics(read)

    def collect(self, fit: FitState, epoch: int) -> tuple[list[float], float, float]:
        assert self._queued is not None and self._queued[0] == epoch, "collect before launch"
        _, first, t0, lrs, sizes, evals = self._queued
        self._queued = None
        tr = self.trainer
        with self.stream:
            _copy_back(self.stats[:len(sizes)], self.stats_host[:len(sizes)], self.stream)
            if evals is None:  # the eval graph's buffers
                rows, losses, preds = self._read_val()  # one wait for both
            else:
                self.stream.synchronize()  # this run's stream only
                rows, losses, preds = self._read(evals)
            stats = self.stats_host[:len(sizes)]
        per_step = (time.perf_counter() - t0) / max(len(sizes), 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(stats[:, 1] == 0, 0.0, np.sqrt(stats[:, 2] / stats[:, 1]))
        batch = StepBatch(run_id=tr.run_id, epoch=epoch,
                          step=first + np.arange(len(sizes), dtype=np.int64),
                          loss=stats[:, 3].copy(), grad_norm=np.sqrt(stats[:, 0]),
                          update_ratio=ratio, lr=lrs, step_time_s=per_step,
                          batch_size=np.asarray(sizes, dtype=np.int64))
        send_steps(tr.recorder, batch)
        return (batch.loss.tolist(), *self._split_result("val", rows, losses, preds))

