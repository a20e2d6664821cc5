"""The whole training step on the GPU, captured once as a CUDA graph and replayed.

A step is: copy the batch into the plan's static input buffers, then (in the graph) zero
the gradients, run the compiled plan (fused forward, loss, backward), and the fused
optimizer kernel (gradient norm, clipping, SGD/Adam/AdamW over the flat buffer, the sums
behind the update ratio). What changes from step to step without a recapture travels in a
small device array, `hyper`, written before each replay: the learning-rate terms (computed
on the host exactly as runtime/optimizers.py computes them) and the step (the dropout
RNG's key). One graph per batch shape; a graph is recaptured when its buffers move (a
rewrite, an optimizer state load) or the parameters' step counts split into other segments.

The optimizer object stays the source of truth: its slots are the buffers the kernel
updates and its per-parameter step counts advance here, so `state_dict`, rewrites and
snapshots work as on the CPU. Plans with a kernel that cannot be captured (a reference
fallback) run the same step eagerly; `graph_error` says why a capture failed.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from aicf_induct.compiler.plan import Plan
from aicf_induct.runtime.executor import Executor
from aicf_induct.runtime.optimizers import SGD, Adam, Optimizer, _check_number

HYPER_FIXED = 4  # lr, lr*weight_decay, step (as int64 bits), spare; then 2 per segment


@dataclass
class StepStats:
    loss: float
    grad_norm: float  # before clipping
    update_ratio: float  # ||delta theta|| / ||theta||


def update_rule(opt: Optimizer) -> Any:
    from aicf_induct.kernels.cuda.optim import UpdateRule

    c = opt.config
    if isinstance(opt, Adam):
        return UpdateRule("adam", betas=c.betas, eps=c.eps, weight_decay=c.weight_decay,
                          decoupled=c.decoupled)
    if isinstance(opt, SGD):
        return UpdateRule("sgd", weight_decay=c.weight_decay, momentum=c.momentum,
                          dampening=c.dampening, nesterov=c.nesterov)
    raise TypeError(f"no fused GPU update for {type(opt).__name__}")


@dataclass
class _Entry:
    plan: Plan
    signature: tuple[Any, ...]
    update: Any  # kernels.cuda.optim.FusedUpdate
    seg_dev: Any  # (segments,) int64 exclusive ends, on the device
    hyper_host: np.ndarray  # float64
    hyper_dev: Any
    loss: Any
    graph: Any = None
    eager_reason: str = ""

    def body(self) -> None:
        self.plan.launch()
        self.update.launch(self.hyper_dev, self.seg_dev, len(self.seg_dev), self.loss)


class CudaStep:
    """Training steps of `executor` + `optimizer` on the GPU, one graph replay each."""

    def __init__(self, executor: Executor, optimizer: Optimizer, *, clip_norm: float = 0.0,
                 graphs: bool = True) -> None:
        self.executor, self.optimizer = executor, optimizer
        self.clip_norm = float(clip_norm)
        self.graphs = graphs
        self.graph_error: str | None = None
        self._entries: dict[int, _Entry] = {}

    # -- one step ----------------------------------------------------------------------------
    def run(self, x: Any, y: Any, step: int, lr: float, *, fetch: bool = True
            ) -> StepStats | None:
        """One step on batch (x, y) at learning rate lr. `fetch`: read the loss, gradient norm
        and update ratio back (one small copy, which waits for the step)."""
        store, opt = self.executor.store, self.optimizer
        if opt._layout is None:
            opt.bind(store)
        elif store.layout != opt._layout:
            raise ValueError("parameter layout changed since the optimizer was bound; "
                             "remap with load_state_dict(state_dict(), store)")
        _check_number("learning rate", lr)
        plan = self.executor.plan("train", int(x.shape[0]))
        self._feed(plan, x, y, step)  # first: the capture's warm-up runs on this batch
        entry, fresh = self._entry(plan)
        if fresh:  # the warm-up reused the inputs' arena bytes for later values: refeed
            self._feed(plan, x, y, step)
        opt._steps += 1
        h = entry.hyper_host
        fill_hyper(h, opt, store, entry.signature[-1], float(lr), step)
        entry.hyper_dev.data.copy_from_host_async(h.ctypes.data_as(ctypes.c_void_p), h.nbytes)
        if entry.graph is not None:
            import cupy

            entry.graph.launch(cupy.cuda.get_current_stream())
        else:
            entry.body()
        return self.stats(entry) if fetch else None

    def _feed(self, plan: Plan, x: Any, y: Any, step: int) -> None:
        """The batch into the plan's static buffers: one device copy each when it is on the
        GPU already in the right dtype and layout, else through plan.feed."""
        import cupy

        ex = self.executor
        pairs: tuple[tuple[Any, Any], ...] = (
            (plan.inputs[ex.input_id], x), (plan.inputs[ex.training_graph.labels], y))
        if all(isinstance(src, cupy.ndarray) and src.dtype == buf.dtype
               and src.shape == buf.shape and src.flags.c_contiguous for buf, src in pairs):
            for buf, src in pairs:
                buf.data.copy_from_device_async(src.data, buf.nbytes)
            plan.ctx.step = step
        else:
            plan.feed({ex.input_id: x, ex.training_graph.labels: y}, step)

    def stats(self, entry: _Entry | None = None) -> StepStats:
        """The last step's loss, gradient norm and update ratio."""
        e = entry or next(iter(self._entries.values()))
        s = e.update.stats.get()
        ratio = 0.0 if s[1] == 0 else math.sqrt(s[2] / s[1])
        return StepStats(float(s[3]), math.sqrt(s[0]), ratio)

    @property
    def captured(self) -> bool:
        return any(e.graph is not None for e in self._entries.values())

    # -- setup -------------------------------------------------------------------------------
    def _signature(self, plan: Plan) -> tuple[Any, ...]:
        store, opt = self.executor.store, self.optimizer
        slots = tuple(int(opt._flat[s].data.ptr) for s in opt.slot_names)
        return (id(plan), int(store.data.data.ptr), int(store.grad.data.ptr), slots,
                segments(opt, store))

    def _entry(self, plan: Plan) -> tuple[_Entry, bool]:
        """The entry for this plan's batch shape, and whether it was (re)built just now."""
        sig = self._signature(plan)
        e = self._entries.get(plan.batch)
        if e is not None and e.signature == sig:
            return e, False
        e = self._build(plan, sig)
        self._entries[plan.batch] = e
        return e, True

    def _build(self, plan: Plan, sig: tuple[Any, ...]) -> _Entry:
        import cupy

        from aicf_induct.kernels.cuda.optim import FusedUpdate

        store, opt = self.executor.store, self.optimizer
        segs = sig[-1]
        update = FusedUpdate(update_rule(opt), store.data, store.grad, dict(opt._flat),
                             self.clip_norm)
        hyper_host = np.zeros(HYPER_FIXED + 2 * len(segs), dtype=np.float64)
        hyper_dev = cupy.zeros_like(hyper_host)
        plan.ctx.device_step = hyper_dev[2:3].view(cupy.int64)
        loss = plan.value(self.executor.training_graph.loss)
        e = _Entry(plan, sig, update, cupy.asarray(np.array(segs, dtype=np.int64)),
                   hyper_host, hyper_dev, loss)
        if not self.graphs:
            e.eager_reason = "graphs off"
        elif not plan.capturable:
            e.eager_reason = "a kernel of the plan cannot be captured: " + ", ".join(
                sorted({n for n in plan.kernel_names if n.endswith(".reference")}))
        else:
            e.graph = self._capture(e)
        return e

    def _capture(self, e: _Entry) -> Any:
        import cupy

        cupy.cuda.get_current_stream().synchronize()
        stream = cupy.cuda.Stream(non_blocking=True)
        graph = None
        with stream:
            e.plan.launch()  # warm-up: compiles, sizes scratch; parameters are not touched
            e.update.compile()
            stream.synchronize()
            try:
                stream.begin_capture()
                try:
                    e.body()
                finally:
                    graph = stream.end_capture()
            except Exception as err:  # run eagerly, say why
                self.graph_error = f"{type(err).__name__}: {err}"
                e.eager_reason = "capture failed: " + self.graph_error
                graph = None
            stream.synchronize()
        return graph


def segments(opt: Optimizer, store: Any) -> tuple[int, ...]:
    """Exclusive element ends of the runs of parameters that share a step count."""
    ends: list[int] = []
    names = store.names
    for i, name in enumerate(names):
        if i == len(names) - 1 or opt._steps[i] != opt._steps[i + 1]:
            ends.append(store.slices[name].stop)
    return tuple(ends) or (store.numel(),)


def fill_hyper(h: np.ndarray, opt: Optimizer, store: Any, segs: tuple[int, ...], lr: float,
               step: int) -> None:
    """The update's step terms (after `opt._steps` advanced): lr, lr*wd, the step, and per
    segment what torch's update uses (Adam: -lr/bc1 and sqrt(bc2); SGD: first step?)."""
    c = opt.config
    h[0] = lr
    h[1] = lr * c.weight_decay
    h.view(np.int64)[2] = step
    first = 0  # index of the segment's first parameter
    for s, end in enumerate(segs):
        t = int(opt._steps[first])
        if isinstance(opt, Adam):
            b1, b2 = c.betas
            h[HYPER_FIXED + 2 * s] = -(lr / (1 - b1**t))
            h[HYPER_FIXED + 2 * s + 1] = (1 - b2**t) ** 0.5
        else:
            h[HYPER_FIXED + 2 * s] = 1.0 if t == 1 else 0.0
        while first < len(store.names) and store.slices[store.names[first]].stop <= end:
            first += 1
