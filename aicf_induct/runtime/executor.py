"""The executor: a graph, its parameter store and a loss, with compiled plans cached by
batch shape. It runs training steps (forward + backward into `store.grad`) and evaluation;
optimizers and the trainer sit on top."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from aicf_induct.compiler.training_graph import TrainingGraph, with_loss
from aicf_induct.errors import ConfigError
from aicf_induct.ir.graph import Graph
from aicf_induct.ir.init import initial_values
from aicf_induct.kernels import REGISTRY, KernelRegistry
from aicf_induct.runtime.params import ParamStore
from aicf_induct.runtime.plan import Plan, compile_plan


def store_for(graph: Graph, values: Mapping[str, np.ndarray] | None = None, seed: int = 0,
              xp: ModuleType = np, dtype: Any = None) -> ParamStore:
    """A parameter store for `graph`: given values where present, else initializers.
    `dtype`: of the flat parameter buffer; by default the graph's parameter dtype, so a
    float32 graph computes in float32 (mixed operands would make every GEMM convert)."""
    if dtype is None:
        kinds = {p.dtype for p in graph.params.values() if p.trainable}
        dtype = np.float32 if kinds == {"float32"} else np.float64
    init = initial_values(graph.params.values(), seed)
    for k, v in (values or {}).items():
        if k in graph.params:
            init[k] = np.asarray(v, dtype=graph.params[k].dtype)
    trainable = {k: v for k, v in init.items() if graph.params[k].trainable}
    buffers = {k: v for k, v in init.items() if not graph.params[k].trainable}
    return ParamStore.from_arrays(trainable, buffers, xp=xp, dtype=dtype)


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
    training_graph: TrainingGraph = field(init=False)
    _plans: dict[tuple[str, int], Plan] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.training_graph = with_loss(self.graph, self.loss, self.label_smoothing)
        missing = [p for p in self.graph.params if p not in self.store.params
                   and p not in self.store.buffers]
        if missing:
            raise ConfigError(f"parameter store lacks {missing[:5]}")

    @property
    def input_id(self) -> str:
        return self.graph.inputs[0].id

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
                                            precision=self.precision)
        return self._plans[key]

    def cached_plan(self, mode: str, batch: int) -> Plan | None:
        """The plan for (mode, batch) if compiled already, else None (compiles nothing)."""
        return self._plans.get((mode, batch))

    def _feeds(self, x: Any, y: Any | None) -> dict[str, Any]:
        feeds = {self.input_id: x}
        if y is not None:
            feeds[self.training_graph.labels] = y
        return feeds

    def train_step(self, x: Any, y: Any, step: int) -> float:
        """Forward and backward on one batch; gradients land in `store.grad`. Returns the loss."""
        plan = self.plan("train", int(x.shape[0]))
        plan.run(self._feeds(x, y), step)
        return float(plan.value(self.training_graph.loss))

    def evaluate(self, x: Any, y: Any) -> tuple[float, Any]:
        """Eval-mode loss and predictions (a view valid until the next call)."""
        plan = self.plan("eval", int(x.shape[0]))
        plan.run(self._feeds(x, y))
        tg = self.training_graph
        return float(plan.value(tg.loss)), plan.value(tg.prediction)

    def predict(self, x: Any) -> Any:
        plan = self.plan("predict", int(x.shape[0]))
        plan.run(self._feeds(x, None))
        return plan.value(self.training_graph.prediction).copy()

    def invalidate(self) -> None:
        """Drop compiled plans (after the graph or the store changed)."""
        self._plans.clear()
