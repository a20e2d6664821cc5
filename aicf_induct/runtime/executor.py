"""The executor: a graph, its parameter store and a loss, with compiled plans cached by
batch shape. It runs training steps (forward + backward into `store.grad`) and evaluation;
optimizers and the trainer sit on top."""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from aicf_induct.compiler.training_graph import TrainingGraph, with_loss
from aicf_induct.errors import ConfigError
from aicf_induct.ir.graph import Graph, Node, TensorType
from aicf_induct.ir.init import initial_values
from aicf_induct.ir.validate import infer_types
from aicf_induct.kernels import REGISTRY, KernelRegistry
from aicf_induct.runtime.data import least_rows
from aicf_induct.runtime.params import ParamStore
from aicf_induct.runtime.plan import Plan, as_array, check_feed, compile_plan


def check_values(graph: Graph, values: Mapping[str, Any], source: str = "values"
                 ) -> tuple[dict[str, np.ndarray], list[str]]:
    """`values` checked against `graph` and made arrays of its parameters' dtypes, and the
    names of the graph's parameters and buffers they lack (the store draws those from their
    initializers: the caller may report them). Each name must be the graph's, each value
    numeric, finite and of the parameter's shape; else a ConfigError that begins with
    `source` (e.g. the file the values came from) and names the parameter."""
    out: dict[str, np.ndarray] = {}
    for name, v in values.items():
        spec = graph.params.get(name)
        if spec is None:
            known = list(graph.params)
            close = difflib.get_close_matches(str(name), known, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            shown = ", ".join(known[:8]) + (f", ... ({len(known)} in all)"
                                            if len(known) > 8 else "")
            raise ConfigError(f"{source}: '{name}' is no parameter of the graph ({hint}"
                              f"parameters: {shown or 'none'})")
        try:
            arr = np.asarray(v)
        except (TypeError, ValueError) as err:
            raise ConfigError(f"{source}: '{name}' is not an array ({err})") from None
        if arr.dtype.kind not in "biuf":  # strings, objects, complex: no parameter values
            kind = {"U": "text", "S": "bytes", "O": "Python object", "c": "complex"}.get(
                arr.dtype.kind, arr.dtype.name)
            raise ConfigError(f"{source}: '{name}' holds {kind} values, not numbers")
        if tuple(arr.shape) != tuple(spec.shape):
            raise ConfigError(f"{source}: '{name}' has shape {list(arr.shape)}, the graph says "
                              f"{list(spec.shape)}")
        arr = arr.astype(spec.dtype)
        if not np.isfinite(arr).all():  # checked in the parameter's dtype: 1e39 is inf in float32
            raise ConfigError(f"{source}: '{name}' has non-finite values (NaN or infinity "
                              f"in {spec.dtype})")
        out[name] = arr
    return out, [k for k in graph.params if k not in out]


def check_size(graph: Graph, source: str = "the graph",
               types: Mapping[str, TensorType] | None = None) -> None:
    """A ConfigError that begins with `source` if `graph` is past the ceilings a model spec
    has (frontend.specs): trainable parameters, one node's values per example. Checked
    before anything is allocated: an IR file past them allocated until the machine ran out
    of memory (a 70M-parameter IR reached 23 GB on iris). `types`: the graph's inferred
    types, where the caller has them."""
    from aicf_induct.frontend.specs import MAX_PARAMS, MAX_VALUES_PER_EXAMPLE

    count = graph.param_count()
    if count > MAX_PARAMS:
        raise ConfigError(f"{source}: {count:,} trainable parameters; the ceiling is "
                          f"{MAX_PARAMS:,}")
    for node_id, t in (types if types is not None else infer_types(graph)).items():
        size = math.prod(d for d in t.shape[1:] if d is not None)
        if size > MAX_VALUES_PER_EXAMPLE:
            raise ConfigError(f"{source}: node '{node_id}' computes {size:,} values per "
                              f"example; the ceiling is {MAX_VALUES_PER_EXAMPLE:,}")


def store_for(graph: Graph, values: Mapping[str, Any] | None = None, seed: int = 0,
              xp: ModuleType = np, dtype: Any = None, check: bool = True) -> ParamStore:
    """A parameter store for `graph`: given values where present, else initializers.
    `dtype`: of the flat parameter buffer; by default the graph's parameter dtype, so a
    float32 graph computes in float32 (mixed operands would make every GEMM convert).
    `check`: apply `check_values` to `values` (a caller that did already, or that restores
    a state of its own, passes False)."""
    if dtype is None:
        kinds = {p.dtype for p in graph.params.values() if p.trainable}
        dtype = np.float32 if kinds == {"float32"} else np.float64
    init = initial_values(graph.params.values(), seed)
    if check:
        init.update(check_values(graph, values or {})[0])
    else:
        for k, v in (values or {}).items():
            if k in graph.params:
                init[k] = np.asarray(v, dtype=graph.params[k].dtype)
    trainable = {k: v for k, v in init.items() if graph.params[k].trainable}
    buffers = {k: v for k, v in init.items() if not graph.params[k].trainable}
    return ParamStore.from_arrays(trainable, buffers, xp=xp, dtype=dtype)


def _input_spec(node: Node) -> tuple[tuple[int | None, ...], np.dtype[Any]]:
    """An input node's declared shape (None: the batch axis) and dtype."""
    return tuple(node.attrs["shape"]), np.dtype(node.attrs.get("dtype", "float64"))


@dataclass
class Executor:
    graph: Graph  # the model (no loss)
    store: ParamStore
    loss: str = "cross_entropy"
    label_smoothing: float = 0.0
    seed: int = 0
    device: str = "cpu"
    xp: ModuleType = np
    registry: KernelRegistry = REGISTRY  # a TunedRegistry on the GPU (kernels.autotune)
    fuse: bool = False  # run the fusion pass (compiler.fusion); the GPU backend does
    precision: str = "fp32"  # GEMM compute of fused kernels: fp32 | tf32 | bf16
    rank: int = 0  # data-parallel rank: keys the dropout masks beside seed, step and node
    training_graph: TrainingGraph = field(init=False)
    _plans: dict[tuple[str, int], Plan] = field(default_factory=dict, init=False)
    _x_spec: tuple[tuple[int | None, ...], np.dtype[Any]] = field(init=False)
    _y_spec: tuple[tuple[int | None, ...], np.dtype[Any]] = field(init=False)
    _n_classes: int | None = field(init=False)
    _least_rows: int = field(init=False)  # the fewest rows of a training batch (data.least_rows)

    def __post_init__(self) -> None:
        if len(self.graph.inputs) != 1:  # a batch feeds one: another input would go unfed
            raise ConfigError(
                f"graph '{self.graph.name}': a batch feeds one input; the graph has "
                f"{len(self.graph.inputs)} ({', '.join(repr(n.id) for n in self.graph.inputs)})")
        self.training_graph = with_loss(self.graph, self.loss, self.label_smoothing)
        missing = [p for p in self.graph.params if p not in self.store.params
                   and p not in self.store.buffers]
        if missing:
            raise ConfigError(f"parameter store lacks {missing[:5]}")
        # what a batch must look like, checked before a plan is compiled for its size
        by_id = self.training_graph.graph.node_map()
        self._x_spec = _input_spec(by_id[self.input_id])
        self._y_spec = _input_spec(by_id[self.training_graph.labels])
        self._n_classes = None
        self._least_rows = least_rows(self.graph)
        if self.loss == "cross_entropy":
            pred = infer_types(self.graph)[self.training_graph.prediction]
            self._n_classes = pred.shape[-1]

    @property
    def input_id(self) -> str:
        return self.graph.inputs[0].id

    @property
    def n_classes(self) -> int | None:
        """The class scores the graph outputs under cross entropy; None under another loss."""
        return self._n_classes

    def plan(self, mode: str, batch: int) -> Plan:
        """The compiled plan for ("train" | "eval" | "predict", batch size), cached."""
        key = (mode, batch)
        if key not in self._plans:
            tg = self.training_graph
            training = mode == "train"
            roots = [tg.loss, tg.prediction] if mode != "predict" else [tg.prediction]
            graph = tg.graph if mode != "predict" else self.graph
            self._plans[key] = compile_plan(graph, batch, store=self.store, training=training,
                                            loss=tg.loss if training else None, roots=roots,
                                            device=self.device, xp=self.xp, seed=self.seed,
                                            registry=self.registry, fuse=self.fuse,
                                            precision=self.precision, rank=self.rank)
        return self._plans[key]

    def cached_plan(self, mode: str, batch: int) -> Plan | None:
        """The plan for (mode, batch) if compiled already, else None (compiles nothing)."""
        return self._plans.get((mode, batch))

    def check_batch(self, x: Any, y: Any | None = None, *, training: bool = False
                    ) -> tuple[Any, Any | None]:
        """(x, y) as arrays (array-likes converted on the host) if they fit the model: x
        (N, *per-example shape) of a dtype that casts to the input's, y as many labels (class
        indices in [0, classes) for cross entropy); else a ConfigError naming `x` or `labels`.
        Shapes and dtypes only, except a min/max over the class labels. `training`: x is a
        training batch, which must have rows (batch statistics and the mean loss of none
        are NaN: batchnorm's running statistics would stay NaN) and, where the model has
        batchnorm, 2 or more (its variance over one row is 0; PyTorch refuses it).
        Evaluation and prediction take any number of rows, 0 included."""
        x = check_feed("x", x, *self._x_spec)
        n = int(x.shape[0])
        if training and n == 0:
            raise ConfigError("x: a training batch of no rows: its mean loss and batch "
                              "statistics are NaN; feed 1 row or more")
        if training and n < self._least_rows:
            raise ConfigError("x: a training batch of one row: the model has batchnorm, whose "
                              "variance over one row is 0; feed 2 rows or more")
        if y is None:
            return x, None
        y = as_array("labels", y)
        if self._n_classes is not None and y.dtype.kind not in "biu":
            raise ConfigError(f"labels: cross_entropy takes integer class indices, got "
                              f"{y.dtype.name} values")
        y = check_feed("labels", y, *self._y_spec, batch=n)
        if self._n_classes is not None and n:
            lo, hi = int(y.min()), int(y.max())  # a negative index would wrap to the last class
            if lo < 0 or hi >= self._n_classes:
                raise ConfigError(f"labels: class indices must lie in [0, {self._n_classes}), "
                                  f"got {lo if lo < 0 else hi}")
        return x, y

    def _feeds(self, x: Any, y: Any | None) -> dict[str, Any]:
        feeds = {self.input_id: x}
        if y is not None:
            feeds[self.training_graph.labels] = y
        return feeds

    def train_step(self, x: Any, y: Any, step: int) -> float:
        """Forward and backward on one batch; gradients land in `store.grad`. Returns the loss."""
        x, y = self.check_batch(x, y, training=True)
        plan = self.plan("train", int(x.shape[0]))
        plan.run(self._feeds(x, y), step)
        return float(plan.value(self.training_graph.loss))

    def evaluate(self, x: Any, y: Any) -> tuple[float, Any]:
        """Eval-mode loss and predictions (a view valid until the next call). No rows: a NaN
        loss (a mean over none) and no predictions, without the loss kernel's warning."""
        x, y = self.check_batch(x, y)
        if x.shape[0] == 0:
            return float("nan"), self.predict(x)
        plan = self.plan("eval", int(x.shape[0]))
        plan.run(self._feeds(x, y))
        tg = self.training_graph
        return float(plan.value(tg.loss)), plan.value(tg.prediction)

    def predict(self, x: Any) -> Any:
        x, _ = self.check_batch(x)
        plan = self.plan("predict", int(x.shape[0]))
        plan.run(self._feeds(x, None))
        return plan.value(self.training_graph.prediction).copy()

    def invalidate(self) -> None:
        """Drop compiled plans (after the graph or the store changed)."""
        self._plans.clear()
