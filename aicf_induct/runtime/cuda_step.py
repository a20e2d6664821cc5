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

When the program is a plain MLP chain (`compiler.chain`), the forward, loss and backward
may instead run as one persistent kernel (`kernels.cuda.mlp_step`, three schedules, the
third on sm_90+): `whole_step="auto"` times the plan and the kernel's schedules once per
batch shape (the choice is kept by the registry's autotuner, in the warehouse when it has
one) and keeps the fastest; a schedule whose lower bound (kernels.cuda.step_floor) is over
the plan's time is never compiled or run. "plan", "mlp_layers", "mlp_rows" or
"mlp_clusters" forces one.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from aicf_induct.runtime.executor import Executor
from aicf_induct.runtime.optimizers import SGD, Adam, Optimizer, _check_number
from aicf_induct.runtime.plan import Plan

HYPER_FIXED = 4  # lr, lr*weight_decay, step (as int64 bits), dp weight; then 2 per segment
DP_WEIGHT = 3  # data parallel: this rank's rows over the global batch's (1 alone)
WHOLE_STEP = ("auto", "plan", "mlp_layers", "mlp_rows", "mlp_clusters")


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
    step_kernel: Any = None  # kernels.cuda.mlp_step.MlpStepKernel, when chosen over the plan
    chain_reason: str = ""  # why the one-kernel step was not used
    flat: Any = None  # the optimizer's slot dict this entry was built for
    inputs: tuple[Any, Any] = (None, None)  # the plan's static x and label buffers
    static_feed: tuple[int, int] = (0, 0)  # their addresses
    # data parallel: sums the ranks' gradients and losses between backward and update
    reduce: Any = None  # (grad, loss, hyper_dev) -> None, on the current stream

    def gradients(self) -> None:
        """Forward, loss and backward: the one-kernel step or the plan."""
        if self.step_kernel is not None:
            self.step_kernel.launch()
        else:
            self.plan.launch()

    def body(self) -> None:
        self.gradients()
        self.finish()

    def finish(self) -> None:
        """The ranks' sum (data parallel), then the optimizer update."""
        if self.reduce is not None:
            self.reduce(self.update.grad, self.loss, self.hyper_dev)
        self.update.launch(self.hyper_dev, self.seg_dev, len(self.seg_dev), self.loss)


class CudaStep:
    """Training steps of `executor` + `optimizer` on the GPU, one graph replay each."""

    def __init__(self, executor: Executor, optimizer: Optimizer, *, clip_norm: float = 0.0,
                 graphs: bool = True, whole_step: str = "auto", reduce: Any = None) -> None:
        """`reduce`: data parallel's sum over the ranks (runtime.parallel.device_reduce),
        run in the step between backward and update, scaled by `run`'s `weight`."""
        if whole_step not in WHOLE_STEP:
            raise ValueError(f"whole_step must be one of {', '.join(WHOLE_STEP)}, "
                             f"got {whole_step!r}")
        self.executor, self.optimizer = executor, optimizer
        self.clip_norm = float(clip_norm)
        self.graphs = graphs
        self.whole_step = whole_step
        self.graph_error: str | None = None
        self.reduce = reduce
        self._entries: dict[int, _Entry] = {}

    # -- one step ----------------------------------------------------------------------------
    def run(self, x: Any, y: Any, step: int, lr: float, *, fetch: bool = True,
            weight: float = 1.0) -> StepStats | None:
        """One step on batch (x, y) at learning rate lr. `fetch`: read the loss, gradient norm
        and update ratio back (one small copy, which waits for the step). `weight`: data
        parallel's share of the global batch this rank's rows are (its gradient's scale)."""
        _check_number("learning rate", lr)
        opt = self.optimizer
        e = self._entries.get(int(x.shape[0]))
        # Fast path, the common case: nothing rebound since this shape's entry was built
        # (bind and load_state_dict replace opt._flat; a new plan means a new executor).
        if e is None or e.flat is not opt._flat or e.plan is not self.executor.cached_plan(
                "train", int(x.shape[0])):
            e = self._prepare(x, y, step)
        else:
            self._feed(e, x, y, step)
        opt._steps += 1
        h = e.hyper_host
        fill_hyper(h, opt, self.executor.store, e.signature[-1], float(lr), step)
        h[DP_WEIGHT] = weight
        e.hyper_dev.data.copy_from_host_async(h.ctypes.data_as(ctypes.c_void_p), h.nbytes)
        if e.graph is not None:
            import cupy

            e.graph.launch(cupy.cuda.get_current_stream())
        else:
            e.body()
        return self.stats(e) if fetch else None

    def run_empty(self, step: int, lr: float) -> StepStats:
        """Data parallel, a rank whose share of the batch is empty: no forward or backward,
        a zero gradient into the ranks' sum, then the update every rank takes."""
        if not self._entries:
            raise ValueError("a rank's first batch share is empty: nothing to build the "
                             "step from (use a batch of at least one row per rank)")
        e = next(reversed(self._entries.values()))
        opt = self.optimizer
        opt._steps += 1
        h = e.hyper_host
        fill_hyper(h, opt, self.executor.store, e.signature[-1], float(lr), step)
        h[DP_WEIGHT] = 0.0
        e.hyper_dev.data.copy_from_host_async(h.ctypes.data_as(ctypes.c_void_p), h.nbytes)
        e.update.grad.fill(0)
        e.loss.fill(0)
        e.finish()
        return self.stats(e)

    def _prepare(self, x: Any, y: Any, step: int) -> _Entry:
        """The entry for x's batch shape, (re)built when its buffers moved, fed with (x, y)."""
        store, opt = self.executor.store, self.optimizer
        if opt._layout is None:
            opt.bind(store)
        elif store.layout != opt._layout:
            raise ValueError("parameter layout changed since the optimizer was bound; "
                             "remap with load_state_dict(state_dict(), store)")
        plan = self.executor.plan("train", int(x.shape[0]))
        plan.feed({self.executor.input_id: x, self.executor.training_graph.labels: y}, step)
        with kept_buffers(store):  # a capture's warm-up and the timings run on this batch
            entry, _ = self._entry(plan)
        self._feed(entry, x, y, step)  # again: the warm-up reused the inputs' arena bytes
        return entry

    def prepare(self, x: Any, y: Any, step: int) -> _Entry:
        """The entry (plan, update, step body, graph) for x's batch shape, built now: for a
        caller that captures steps of its own (runtime.many)."""
        return self._prepare(x, y, step)

    def _feed(self, e: _Entry, x: Any, y: Any, step: int) -> None:
        """The batch to the step: the one-kernel step reads device arrays where they are
        (their addresses travel with the step's other terms); otherwise one device copy each
        into the plan's static buffers, or through plan.feed from the host."""
        import cupy

        plan = e.plan
        bx, by = e.inputs
        on_device = (type(x) is cupy.ndarray and type(y) is cupy.ndarray
                     and x.dtype == bx.dtype and y.dtype == by.dtype and x.shape == bx.shape
                     and y.shape == by.shape and x.flags.c_contiguous and y.flags.c_contiguous)
        feed = e.static_feed
        if on_device and e.step_kernel is not None:
            feed = (x.data.ptr, y.data.ptr)
        elif on_device:
            bx.data.copy_from_device_async(x.data, bx.nbytes)
            by.data.copy_from_device_async(y.data, by.nbytes)
        else:
            plan.feed({self.executor.input_id: x, self.executor.training_graph.labels: y}, step)
        e.hyper_host.view(np.int64)[-2:] = feed
        plan.ctx.step = step

    def stats(self, entry: _Entry | None = None) -> StepStats:
        """The last step's loss, gradient norm and update ratio."""
        e = entry or next(iter(self._entries.values()))
        s = e.update.stats.get()
        ratio = 0.0 if s[1] == 0 else math.sqrt(s[2] / s[1])
        return StepStats(float(s[3]), math.sqrt(s[0]), ratio)

    @property
    def built(self) -> bool:
        """Whether a step has been built (`run_empty` needs one)."""
        return bool(self._entries)

    @property
    def captured(self) -> bool:
        return any(e.graph is not None for e in self._entries.values())

    def step_body(self, batch: int) -> str:
        """What runs the forward/backward of batch size `batch`: "plan", "mlp_layers",
        "mlp_rows" or "mlp_clusters"."""
        e = self._entries[batch]
        return "plan" if e.step_kernel is None else "mlp_" + e.step_kernel.schedule

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
        # the learning-rate terms, then the addresses of the batch (x, labels): see _feed
        hyper_host = np.zeros(HYPER_FIXED + 2 * len(segs) + 2, dtype=np.float64)
        hyper_dev = cupy.zeros_like(hyper_host)
        plan.ctx.device_step = hyper_dev[2:3].view(cupy.int64)
        loss = plan.value(self.executor.training_graph.loss)
        e = _Entry(plan, sig, update, cupy.asarray(np.array(segs, dtype=np.int64)),
                   hyper_host, hyper_dev, loss)
        e.flat = opt._flat
        e.reduce = self.reduce
        hyper_host[DP_WEIGHT] = 1.0
        bx: Any = plan.inputs[self.executor.input_id]
        by: Any = plan.inputs[self.executor.training_graph.labels]
        e.inputs, e.static_feed = (bx, by), (int(bx.data.ptr), int(by.data.ptr))
        hyper_host.view(np.int64)[-2:] = e.static_feed
        hyper_dev.set(hyper_host)
        self._pick_step_body(e)
        if not self.graphs:
            e.eager_reason = "graphs off"
        elif not plan.capturable:
            e.eager_reason = "a kernel of the plan cannot be captured: " + ", ".join(
                sorted({n for n in plan.kernel_names if n.endswith(".reference")}))
        else:
            e.graph = self._capture(e)
        return e

    def _pick_step_body(self, e: _Entry) -> None:
        """Use the one-kernel step where the program is an MLP chain and, unless forced,
        where one of its schedules is the fastest of all on this device (timed once per
        shape)."""
        if self.whole_step == "plan":
            e.chain_reason = "forced: plan"
            return
        from aicf_induct.compiler.chain import match_mlp_chain
        from aicf_induct.kernels.cuda.mlp_step import schedules_for

        plan, store = e.plan, self.executor.store
        chain = match_mlp_chain(plan.program, plan.inputs)
        if isinstance(chain, str):
            e.chain_reason = chain
        elif sorted(chain.params) != sorted(store.names):
            e.chain_reason = "the store holds parameters outside the chain"
        if e.chain_reason:
            if self.whole_step != "auto":
                raise ValueError(f"no one-kernel step for this model: {e.chain_reason}")
            return
        assert not isinstance(chain, str)
        spec = step_spec(chain, self.executor.store)
        if self.whole_step != "auto":
            e.step_kernel = self._chain_kernel(e, spec, self.whole_step.removeprefix("mlp_"))
            return
        schedules = schedules_for(spec)
        if not schedules:
            e.chain_reason = "too large for the one-kernel step"
            return
        # the precision policy changes both the plan's GEMMs and the one-kernel step's; a
        # choice made before a schedule existed (or on a device without it) is made again
        bodies = ",".join(f"mlp_{s}" for s in schedules)
        built: dict[str, Any] = {}  # schedule -> its kernel, compiled when timed
        chosen = self._fastest(
            e, f"{chain.key()};precision={self.executor.precision};bodies={bodies}", spec,
            schedules, built)
        if chosen == "plan":
            e.chain_reason = "the fused-kernel plan timed faster"
        else:
            e.step_kernel = built.get(chosen) or self._chain_kernel(e, spec, chosen)

    def _fastest(self, e: _Entry, key: str, spec: Any, schedules: list[str],
                 built: dict[str, Any]) -> str:
        """"plan" or the schedule of the one-kernel step that runs fastest, by the registry's
        autotuner (its choice kept across runs) or, without one, timed for this run. The plan
        is timed first; a schedule is compiled only when timed, and never where its floor
        (kernels.cuda.step_floor) says it cannot beat the time measured already."""
        from aicf_induct.kernels.autotune import Autotuner, Limit
        from aicf_induct.kernels.cuda.compile import device
        from aicf_induct.kernels.cuda.step_floor import step_floor_us
        from aicf_induct.kernels.cuda.timer import time_kernel

        def time_us(name: str, limit: Limit) -> float:
            body = name.removeprefix("train_step.")
            if body == "plan":
                return time_kernel(e.plan.launch, graph_ok=e.plan.capturable, limit=limit)
            schedule = body.removeprefix("mlp_")
            built[schedule] = k = self._chain_kernel(e, spec, schedule)
            return time_kernel(k.launch, limit=limit)

        widths = [(ly.in_features, ly.out_features) for ly in spec.layers]
        floors = {f"train_step.mlp_{s}": step_floor_us(
            spec.batch, widths, s, str(e.loss.dtype), bool(self._mma()), device().sms)
            for s in schedules}
        tuner = getattr(self.executor.registry, "tuner", None)
        if not isinstance(tuner, Autotuner):
            tuner = Autotuner(lambda k, q, limit: math.inf, device().name)
        names = ["train_step.plan", *floors]
        widest = max(o for _, o in widths)
        chosen = tuner.pick("train_step", key, str(e.loss.dtype), names, time_us, floors=floors,
                            label=f"the training step for batch {spec.batch} (widest layer "
                                  f"{widest}, {e.loss.dtype})")
        return chosen.removeprefix("train_step.").removeprefix("mlp_")

    def _chain_kernel(self, e: _Entry, spec: Any, schedule: str) -> Any:
        import cupy

        from aicf_induct.kernels.cuda.mlp_step import MlpStepKernel

        store = self.executor.store
        feed = e.hyper_dev[-2:].view(cupy.int64)
        return MlpStepKernel(spec, feed, store.data, store.grad, e.loss, schedule,
                             mma=self._mma())

    def _mma(self) -> int:
        """The one-kernel step's products: TF32 tensor cores (1) under the tf32 and bf16
        policies (TF32 is the more exact of the two), where the device has them; SIMT in the
        parameters' dtype (0) otherwise."""
        from aicf_induct.kernels.cuda.compile import tensor_cores

        return int(self.executor.precision != "fp32"
                   and tensor_cores(self.executor.store.data.dtype))

    def _capture(self, e: _Entry) -> Any:
        warm_up(e)
        graph, error = capture(e.body)
        if error:  # run eagerly, say why
            self.graph_error = error
            e.eager_reason = "capture failed: " + error
        return graph


def warm_up(e: _Entry, sync: bool = True) -> None:
    """Compile the step's kernels and size their scratch before a capture: the gradients
    are computed once (parameters are not touched; batchnorm's running statistics are, so
    callers keep them: `kept_buffers`). `sync`: wait for the stream before and after (the
    GPU engine, whose runs share a busy GPU, orders by its run's stream instead)."""
    import cupy

    stream = cupy.cuda.get_current_stream()
    if sync:
        stream.synchronize()
    e.gradients()
    e.update.compile()
    if sync:
        stream.synchronize()


def capture(body: Any, sync: bool = True) -> tuple[Any, str]:
    """`body()` captured as a CUDA graph on a stream of its own: (graph, "") or (None, why
    the capture failed). `sync`: wait for the current stream first (a capture runs nothing,
    so the GPU engine, which launches the graph on that stream, does not)."""
    import cupy

    if sync:
        cupy.cuda.get_current_stream().synchronize()
    stream = cupy.cuda.Stream(non_blocking=True)
    graph, error = None, ""
    with stream:
        try:
            stream.begin_capture()
            try:
                body()
            finally:
                graph = stream.end_capture()
        except Exception as err:
            error, graph = f"{type(err).__name__}: {err}", None
        stream.synchronize()
    return graph, error


@contextlib.contextmanager
def kept_buffers(store: Any) -> Iterator[None]:
    """The store's non-trainable buffers (batchnorm's running statistics) as they were
    before the block: warm-ups and autotuning timings run training-mode forwards, which
    would move them by a number of updates that depends on the timings, so the model a run
    evaluates would depend on them."""
    saved = {name: buf.copy() for name, buf in store.buffers.items()}
    try:
        yield
    finally:
        for name, value in saved.items():
            store.buffers[name][...] = value


def segments(opt: Optimizer, store: Any) -> tuple[int, ...]:
    """Exclusive element ends of the runs of parameters that share a step count."""
    ends: list[int] = []
    names = store.names
    for i, name in enumerate(names):
        if i == len(names) - 1 or opt._steps[i] != opt._steps[i + 1]:
            ends.append(store.slices[name].stop)
    return tuple(ends) or (store.numel(),)


def _segment_firsts(store: Any, segs: tuple[int, ...]) -> list[int]:
    """Index (in `store.names`) of each segment's first parameter."""
    firsts, first = [], 0
    for end in segs:
        firsts.append(first)
        while first < len(store.names) and store.slices[store.names[first]].stop <= end:
            first += 1
    return firsts


def fill_hyper(h: np.ndarray, opt: Optimizer, store: Any, segs: tuple[int, ...], lr: float,
               step: int) -> None:
    """The update's step terms (after `opt._steps` advanced): lr, lr*wd, the step, and per
    segment what torch's update uses (Adam: -lr/bc1 and sqrt(bc2); SGD: first step?)."""
    c = opt.config
    h[0] = lr
    h[1] = lr * c.weight_decay
    h.view(np.int64)[2] = step
    for s, first in enumerate(_segment_firsts(store, segs)):
        t = int(opt._steps[first])
        if isinstance(opt, Adam):
            b1, b2 = c.betas
            h[HYPER_FIXED + 2 * s] = -(lr / (1 - b1**t))
            h[HYPER_FIXED + 2 * s + 1] = (1 - b2**t) ** 0.5
        else:
            h[HYPER_FIXED + 2 * s] = 1.0 if t == 1 else 0.0


_BIAS_TERMS: dict[tuple[float, bool], np.ndarray] = {}


def _bias_terms(beta: float, root: bool, upto: int) -> np.ndarray:
    """[1 - beta**t (its square root when `root`) for t in 0..upto at least], each made by
    Python's float power as `fill_hyper` makes it (NumPy's vectorised power may round
    differently in the last bit); kept, and grown as steps pass."""
    have = _BIAS_TERMS.get((beta, root))
    if have is None or len(have) <= upto:
        size = max(2 * upto, 1024)
        terms = [1 - beta**t for t in range(size + 1)]
        have = _BIAS_TERMS[(beta, root)] = np.array([v ** 0.5 for v in terms] if root
                                                    else terms)
    return have


def fill_hyper_steps(table: np.ndarray, opt: Optimizer, store: Any, segs: tuple[int, ...],
                     lrs: np.ndarray, step: int) -> None:
    """`fill_hyper` for the next `len(lrs)` steps at once, row k for step `step + k` at
    learning rate `lrs[k]`, advancing `opt._steps` by as many: the rows are the ones the
    per-step loop (raise the counts, fill a row) writes, bit for bit, without its Python
    cost per step (the GPU engine fills an epoch's table this way)."""
    n = len(lrs)
    if n == 0:
        return
    c = opt.config
    table[:n, 0] = lrs
    table[:n, 1] = lrs * c.weight_decay
    table[:n].view(np.int64)[:, 2] = step + np.arange(n, dtype=np.int64)
    for s, first in enumerate(_segment_firsts(store, segs)):
        t = int(opt._steps[first]) + 1 + np.arange(n)
        if isinstance(opt, Adam):
            b1, b2 = c.betas
            table[:n, HYPER_FIXED + 2 * s] = -(lrs / _bias_terms(b1, False, t[-1])[t])
            table[:n, HYPER_FIXED + 2 * s + 1] = _bias_terms(b2, True, t[-1])[t]
        else:
            table[:n, HYPER_FIXED + 2 * s] = (t == 1).astype(np.float64)
    opt._steps += n


def step_spec(chain: Any, store: Any) -> Any:
    """The one-kernel step's own description (kernels.cuda.mlp_step.StepSpec) of `chain`, a
    compiler.chain.MlpChain, each parameter as its first element in `store`'s flat buffers."""
    from aicf_induct.kernels.cuda.mlp_step import StepLayer, StepSpec

    at = {n: int(s.start) for n, s in store.slices.items()}
    layers = tuple(StepLayer(ly.in_features, ly.out_features, at[ly.weight],
                             None if ly.bias is None else at[ly.bias]) for ly in chain.layers)
    return StepSpec(chain.batch, layers, chain.act, chain.act_attrs, chain.label_smoothing)
