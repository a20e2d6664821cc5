"""The executable plan: "compile once, train many".

`compile_plan` runs the compiler's passes (`compiler.program`: shape inference at the
concrete batch size, autodiff, fusion, dead-code elimination, the liveness-based memory plan)
and binds the result: the memory plan realised as one arena, a kernel selected through the
registry for every instruction, every operand bound in advance. Running the plan copies
the batch into its input buffers and calls the kernels in order; nothing is allocated by the
plan itself and nothing is looked up. Plans are specialised to one batch size; the executor
caches one per shape.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from aicf_induct.compiler.autodiff import Instr
from aicf_induct.compiler.memory import MemoryPlan, ValueInfo
from aicf_induct.compiler.program import compile_program
from aicf_induct.errors import AicfError, ConfigError, ExecutionError
from aicf_induct.ir.graph import Graph
from aicf_induct.ir.ops import OPS, OpContext
from aicf_induct.kernels import REGISTRY, KernelQuery, KernelRegistry


@dataclass
class Plan:
    graph: Graph
    batch: int
    training: bool
    program: list[Instr]
    memory: MemoryPlan
    inputs: dict[str, np.ndarray]  # input node id -> its static buffer
    values: dict[str, np.ndarray]  # every planned value -> its view into the arena
    ctx: OpContext
    kernel_names: list[str]
    _calls: list[Callable[[], None]] = field(default_factory=list)
    _grad: np.ndarray | None = None  # the flat gradient buffer, zeroed at the start of a step
    capturable: bool = False  # every kernel may be captured in a CUDA graph

    def run(self, feeds: Mapping[str, np.ndarray], step: int = 0) -> None:
        self.feed(feeds, step)
        self.launch()

    def feed(self, feeds: Mapping[str, Any], step: int = 0) -> None:
        """Copy the batch into the static input buffers (host or device arrays)."""
        xp = self.ctx.xp
        for name, buf in self.inputs.items():
            src = feeds[name]
            # exact shape, not copyto's broadcasting (one row would fill the whole batch);
            # the full check only off the common case of the buffer's own shape and dtype
            if getattr(src, "shape", None) != buf.shape or getattr(src, "dtype", None) != buf.dtype:
                src = check_feed(f"input '{name}'", src, buf.shape, buf.dtype)
            xp.copyto(buf, src if xp is np else xp.asarray(src), casting="same_kind")
        self.ctx.step = step

    def launch(self) -> None:
        """Zero the gradients and call every kernel, in order, on the fed buffers."""
        if self._grad is not None:
            self._grad.fill(0.0)
        for k, call in enumerate(self._calls):
            try:
                call()
            except AicfError:
                raise
            except Exception as err:  # name the node, keep the cause
                ins = self.program[k]
                raise ExecutionError(f"{ins.kind} of node '{ins.node_id}' ({ins.op}) failed: "
                                     f"{type(err).__name__}: {err}") from err

    def value(self, vid: str) -> np.ndarray:
        return self.values[vid]


def as_array(what: str, value: Any) -> Any:
    """`value` if an array (NumPy or CuPy: NumPy dtypes), else made a NumPy array (a list,
    a CPU torch tensor); a ConfigError naming `what` if it cannot be."""
    if isinstance(getattr(value, "dtype", None), np.dtype) and hasattr(value, "shape"):
        return value
    try:
        return np.asarray(value)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ConfigError(f"{what}: not an array ({err})") from None


def check_feed(what: str, value: Any, shape: Sequence[int | None], dtype: Any,
               batch: int | None = None) -> Any:
    """`value` (an array, or an array-like made one on the host) if it has exactly `shape`
    (None: the batch axis, `batch` rows, by default as many as `value` has) and a dtype that
    casts to `dtype` within its kind; else a ConfigError naming `what`. O(1) on arrays: it
    reads shape and dtype only, of NumPy and CuPy arrays alike."""
    value = as_array(what, value)
    got = tuple(value.shape)
    n = batch if batch is not None else (got[0] if got else 0)
    want = tuple([n if d is None else d for d in shape])
    if got != want:
        shown = ", ".join("N" if d is None and batch is None else str(e)
                          for d, e in zip(shape, want, strict=True))
        comma = "," if len(want) == 1 else ""
        raise ConfigError(f"{what}: expected shape ({shown}{comma}), got {got}")
    if value.dtype != dtype and not np.can_cast(value.dtype, dtype, "same_kind"):
        raise ConfigError(f"{what}: expected {np.dtype(dtype).name} values, got "
                          f"{np.dtype(value.dtype).name}")
    return value


def compile_plan(graph: Graph, batch: int, *, store: Any, training: bool, loss: str | None,
                 roots: list[str], device: str = "cpu", xp: ModuleType = np, seed: int = 0,
                 registry: KernelRegistry = REGISTRY, fuse: bool = False,
                 precision: str = "fp32", rank: int = 0) -> Plan:
    """Compile `graph` for one batch size.

    `roots`: values the caller reads after a run (predictions, the loss); `loss`: when given
    with `training`, the backward program is appended and gradients land in `store.grad`.
    `store` is a ParamStore (params, grads, buffers by name). `fuse` runs the fusion pass
    (compiler.fusion), whose GEMMs compute in `precision` ("fp32" | "tf32" | "bf16").
    """
    compiled = compile_program(graph, batch, training=training, loss=loss, roots=roots,
                               fuse=fuse, precision=precision)
    program, feeds, infos, memory = (compiled.program, compiled.feeds, compiled.infos,
                                     compiled.memory)
    by_id = graph.node_map()
    arena = xp.empty(max(memory.arena_bytes, 1), dtype=np.uint8)
    values = memory.views(arena, infos)
    ctx = OpContext(xp=xp, training=training, seed=seed, rank=rank)
    calls: list[Callable[[], None]] = []
    names: list[str] = []
    capturable = True
    for ins in program:
        call, name, safe = _bind(ins, values, infos, store, by_id, ctx, device, registry)
        calls.append(call)
        names.append(name)
        capturable = capturable and safe
    grad = store.grad if training and loss is not None else None
    return Plan(graph, batch, training, program, memory, {f: values[f] for f in feeds}, values,
                ctx, names, calls, grad, capturable)


def _param_views(ins: Instr, store: Any) -> dict[str, Any]:
    out = {}
    for role, pname in ins.params.items():
        out[role] = store.params[pname] if pname in store.params else store.buffers[pname]
    return out


def _bind(ins: Instr, values: dict[str, Any], infos: dict[str, ValueInfo], store: Any,
          by_id: dict[str, Any], ctx: OpContext, device: str,
          registry: KernelRegistry) -> tuple[Callable[[], None], str, bool]:
    """The call for one instruction, its kernel's name, and whether it is capturable."""
    if ins.kind == "seed":
        out = values[ins.outs[0]]  # type: ignore[index]
        return (lambda: out.fill(1.0)), "seed", True
    if ins.kind == "acc":
        a, b = (values[v] for v in ins.ins)
        out = values[ins.outs[0]]  # type: ignore[index]
        xp = ctx.xp
        return (lambda: xp.add(a, b, out=out)), "acc", True
    if ins.kind == "fused":
        return _bind_fused(ins, values, infos, store, ctx, device, registry)
    operands = [values[v] for v in ins.ins]
    params = _param_views(ins, store)
    attrs = OPS[ins.op].full_attrs(ins.attrs)
    shapes = tuple(infos[v].shape for v in ins.ins)
    q = KernelQuery(ins.op, ins.kind, device, infos[ins.ins[0]].dtype if ins.ins else "float64",
                    shapes, attrs)
    kernel = registry.select(q)
    fn, node_id = kernel.fn, ins.node_id
    if ins.kind == "fwd":
        out = values[ins.outs[0]]  # type: ignore[index]
        buffers = {role: store.buffers[p] for role, p in ins.params.items() if p in store.buffers}

        def fwd() -> None:
            ctx.node_id = node_id
            fn(ctx, operands, params, attrs, out)
            if buffers and ctx.state_updates:  # e.g. batchnorm's running statistics
                for role, new in ctx.state_updates.items():
                    buffers[role][...] = new
                ctx.state_updates.clear()

        return fwd, kernel.name, kernel.capturable
    xs, y, gy = operands[:-2], operands[-2], operands[-1]
    gins = [values[v] if v is not None else None for v in ins.outs]
    gparams = {role: store.grads[p] for role, p in ins.params.items() if p in store.grads}
    needs = ins.needs

    def vjp() -> None:
        ctx.node_id = node_id
        fn(ctx, xs, params, y, gy, attrs, needs, gins, gparams)
        ctx.state_updates.clear()

    return vjp, kernel.name, kernel.capturable


def _bind_fused(ins: Instr, values: dict[str, Any], infos: dict[str, ValueInfo], store: Any,
                ctx: OpContext, device: str,
                registry: KernelRegistry) -> tuple[Callable[[], None], str, bool]:
    """A fused instruction (compiler.fusion): fn(ctx, ins, outs, params, gparams, attrs)."""
    operands = [values[v] for v in ins.ins]
    outs = [values[v] if v is not None else None for v in ins.outs]
    params = _param_views(ins, store)
    gparams = {role: store.grads[p] for role, p in ins.params.items() if p in store.grads}
    attrs = dict(ins.attrs)
    q = KernelQuery(ins.op, "fused", device, infos[ins.ins[0]].dtype,
                    tuple(infos[v].shape for v in ins.ins), attrs)
    kernel = registry.select(q)
    fn, node_id = kernel.fn, ins.node_id

    def fused() -> None:
        ctx.node_id = node_id
        fn(ctx, operands, outs, params, gparams, attrs)

    return fused, kernel.name, kernel.capturable
