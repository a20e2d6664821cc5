"""`ModelState`: what a live rewrite takes and returns — the graph, every parameter and
buffer by name, the optimizer's state dict (slots and step counts keyed by parameter name)
and, when known, the last step's gradients.

The optimizer state is `Optimizer.state_dict()`'s form:
`{"kind", "config", "slots": {name: {slot: array}}, "steps": {name: int}}`. A parameter
absent from `steps` starts fresh when loaded (zero slots, step 0): that is how a transform
gives new parameters zero moments. The helpers here remap slots by name and along unit
indices; `MOMENT_POWER` says how each slot scales when an entry's gradient scales by f
(Adam's m by f, v by f², SGD's momentum by f).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from aicf_induct.errors import AicfError
from aicf_induct.ir.graph import Graph
from aicf_induct.runtime.executor import Executor, store_for

if TYPE_CHECKING:
    from aicf_induct.runtime.trainer import Trainer

# slot -> power of the gradient scale it follows (m is linear in g, v quadratic)
MOMENT_POWER: dict[str, int] = {"m": 1, "v": 2, "momentum": 1}


@dataclass
class ModelState:
    graph: Graph
    values: dict[str, np.ndarray]  # every parameter and buffer, by name
    optimizer: dict[str, Any] | None = None  # Optimizer.state_dict() form
    grads: dict[str, np.ndarray] | None = None  # last step's gradients (gradient pruning)

    def __repr__(self) -> str:
        # every array would be printed: the sizes instead
        opt = self.optimizer["kind"] if self.optimizer else None
        return (f"ModelState(graph=<{graph_size(self.graph)}>, values=<{len(self.values)} "
                f"arrays>, optimizer={opt!r}, grads={'<kept>' if self.grads else None})")

    def copy(self) -> ModelState:
        """An independent deep copy."""
        return ModelState(self.graph.copy(), {k: v.copy() for k, v in self.values.items()},
                          copy.deepcopy(self.optimizer),
                          None if self.grads is None else
                          {k: v.copy() for k, v in self.grads.items()})

    def check(self) -> None:
        """Values and optimizer slots agree with the graph's parameter table."""
        names = set(self.graph.params)
        if set(self.values) != names:
            extra, missing = sorted(set(self.values) - names), sorted(names - set(self.values))
            raise AicfError(f"model state values do not match the graph: extra {extra[:5]}, "
                            f"missing {missing[:5]}")
        for name, spec in self.graph.params.items():
            if tuple(self.values[name].shape) != tuple(spec.shape):
                raise AicfError(f"value of '{name}' has shape {self.values[name].shape}, "
                                f"the graph says {spec.shape}")
        opt = self.optimizer or {}
        for name, slots in opt.get("slots", {}).items():
            if name not in opt.get("steps", {}):
                continue
            for slot, arr in slots.items():
                if name not in names or tuple(arr.shape) != tuple(self.graph.params[name].shape):
                    raise AicfError(f"optimizer slot '{slot}' of '{name}' does not match the "
                                    "graph")

    # -- optimizer slots -------------------------------------------------------------------
    def has_opt(self, name: str) -> bool:
        return self.optimizer is not None and name in self.optimizer.get("steps", {})

    def opt_slots(self, name: str) -> dict[str, np.ndarray]:
        assert self.optimizer is not None
        slots: dict[str, np.ndarray] = self.optimizer["slots"][name]
        return slots

    def drop_opt(self, name: str) -> None:
        """Forget `name`'s optimizer state: loaded, it starts with zero slots at step 0."""
        if self.optimizer is not None:
            self.optimizer.get("slots", {}).pop(name, None)
            self.optimizer.get("steps", {}).pop(name, None)

    def rename_opt(self, old: str, new: str) -> None:
        if self.has_opt(old):
            assert self.optimizer is not None
            self.optimizer["slots"][new] = self.optimizer["slots"].pop(old)
            self.optimizer["steps"][new] = self.optimizer["steps"].pop(old)

    def remap_units(self, name: str, index: np.ndarray, axis: int,
                    grad_scale: np.ndarray | None = None,
                    slot_scale: Mapping[str, np.ndarray] | None = None) -> None:
        """New slots of `name` = old slots taken at `index` along `axis`, times a per-unit
        factor: `slot_scale[slot]` when given, else `grad_scale ** MOMENT_POWER[slot]`
        (the slots an entry would hold had its gradients always been `grad_scale` times
        larger). The step count is kept."""
        if not self.has_opt(name):
            return
        slots = self.opt_slots(name)
        for slot, arr in list(slots.items()):
            new = np.take(arr, index, axis=axis)
            factor = None
            if slot_scale is not None and slot in slot_scale:
                factor = slot_scale[slot]
            elif grad_scale is not None:
                factor = grad_scale ** MOMENT_POWER.get(slot, 1)
            if factor is not None:
                shape = [1] * new.ndim
                shape[axis] = len(index)
                new = new * np.reshape(factor, shape)
            slots[slot] = new


def graph_size(graph: Graph) -> str:
    """A graph's size in a few words, for reprs that would print every node."""
    return f"{len(graph.nodes)} nodes, {graph.param_count():,} parameters"


def _host(tree: Any) -> Any:
    """NumPy copies of the arrays in a nested dict (device arrays come back from the GPU)."""
    if isinstance(tree, dict):
        return {k: _host(v) for k, v in tree.items()}
    get = getattr(tree, "get", None)  # cupy.ndarray.get() copies to the host
    return np.asarray(get()) if callable(get) and not isinstance(tree, np.ndarray) else tree


def capture(trainer: Trainer, with_grads: bool = False) -> ModelState:
    """The trainer's current model state (host copies, also on the GPU backend)."""
    grads = None
    if with_grads:
        grads = _host({n: g.copy() for n, g in trainer.store.grads.items()})
    return ModelState(trainer.graph.copy(), _host(trainer.store.state_arrays()),
                      _host(trainer.optimizer.state_dict()), grads)


def install(trainer: Trainer, state: ModelState, compile_batch: int = 0) -> None:
    """Rebind `trainer` to `state`: a new store and executor for its graph, the optimizer
    state loaded by parameter name. `compile_batch` > 0 compiles the training plan for that
    batch size now, so the next step pays no compile time."""
    state.check()
    old = trainer.executor
    # check=False: the run's own state (state.check() matched it to the graph), installed
    # as it is, a diverged one included
    store = store_for(state.graph, state.values, seed=trainer.config.seed, xp=old.xp,
                      dtype=old.store.dtype, check=False)
    trainer.executor = Executor(state.graph, store, loss=old.loss,
                                label_smoothing=old.label_smoothing, seed=old.seed,
                                device=old.device, xp=old.xp, registry=old.registry,
                                fuse=old.fuse, precision=old.precision, rank=old.rank)
    trainer.graph = state.graph
    if state.optimizer is not None:
        trainer.optimizer.load_state_dict(state.optimizer, store)
    else:
        trainer.optimizer.bind(store)
    if compile_batch > 0:
        trainer.executor.plan("train", compile_batch)
