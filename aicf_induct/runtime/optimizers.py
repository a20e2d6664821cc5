"""SGD (momentum, Nesterov), Adam and AdamW over a ParamStore's flat buffers.

Semantics are torch.optim's (single-tensor path, same operation order, so float64 runs
agree to rounding). Each state slot (`momentum`; `m`, `v`) is one flat buffer laid out
like `store.data`, with per-parameter views, so an update is a handful of whole-buffer
ops (and later one CUDA kernel). Step counts are kept per parameter, as torch keeps
`state['step']`: a parameter added by a rewrite starts at step 0 while the others go on.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from aicf_induct.errors import ConfigError
from aicf_induct.runtime.params import Array, Layout, ParamStore


def _check_number(
    field: str, value: object, *, low: float = 0.0, high: float = math.inf, high_open: bool = False
) -> None:
    """ConfigError unless `value` is a real number in [low, high] (or [low, high))."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        raise ConfigError(f"{field} must be a number, got {value!r}")
    x = float(value)
    if x < low or (x >= high if high_open else x > high):
        bracket = ")" if high_open else "]"
        raise ConfigError(f"{field} must be in [{low}, {high}{bracket}, got {value!r}")


@dataclass(frozen=True)
class SGDConfig:
    lr: float  # base learning rate; schedules scale it and step() receives the result
    momentum: float = 0.0  # 0 disables the momentum slot (plain SGD)
    dampening: float = 0.0  # momentum buffer takes (1 - dampening) * grad after step 1
    nesterov: bool = False  # needs momentum > 0 and dampening == 0 (as torch)
    weight_decay: float = 0.0  # L2 penalty added to the gradient

    def __post_init__(self) -> None:
        _check_number("sgd lr", self.lr)
        _check_number("sgd momentum", self.momentum)
        _check_number("sgd dampening", self.dampening, high=1.0)
        _check_number("sgd weight_decay", self.weight_decay)
        if not isinstance(self.nesterov, bool):
            raise ConfigError(f"sgd nesterov must be true or false, got {self.nesterov!r}")
        if self.nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise ConfigError("sgd nesterov needs momentum > 0 and dampening = 0")


@dataclass(frozen=True)
class AdamConfig:
    lr: float  # base learning rate; schedules scale it and step() receives the result
    betas: tuple[float, float] = (0.9, 0.999)  # decay rates of the moments m and v
    eps: float = 1e-8  # added to sqrt(v_hat): bounds the step where v is ~0
    weight_decay: float = 0.0  # L2 in the gradient (Adam) or decoupled (AdamW)
    decoupled: bool = False  # True: AdamW, theta -= lr * weight_decay * theta

    def __post_init__(self) -> None:
        _check_number("adam lr", self.lr)
        if not isinstance(self.betas, tuple | list) or len(self.betas) != 2:
            raise ConfigError(f"adam betas must be two numbers, got {self.betas!r}")
        for i, beta in enumerate(self.betas):
            _check_number(f"adam betas[{i}]", beta, high=1.0, high_open=True)
        object.__setattr__(self, "betas", (float(self.betas[0]), float(self.betas[1])))
        _check_number("adam eps", self.eps)
        _check_number("adam weight_decay", self.weight_decay)
        if not isinstance(self.decoupled, bool):
            raise ConfigError(f"adam decoupled must be true or false, got {self.decoupled!r}")


@dataclass(frozen=True)
class AdamWConfig(AdamConfig):
    """AdamConfig with AdamW's defaults (torch.optim.AdamW)."""

    weight_decay: float = 0.01  # torch.optim.AdamW's default
    decoupled: bool = True


class Optimizer(ABC):
    """Updates a ParamStore in place from its gradients; state laid out like store.data.

    State is allocated for one store layout by `bind` (or lazily by the first `step`);
    after a rewrite changes the layout, remap with `load_state_dict(state, new_store)`.
    """

    kind: str  # "sgd", "adam" or "adamw": state of one kind is not loaded into another
    config: Any
    slot_names: tuple[str, ...]

    def __init__(self) -> None:
        self._grad_wd: Array = None  # (numel,) scratch for the regularised gradient
        self._layout: Layout | None = None
        self._names: tuple[str, ...] = ()
        self._slices: dict[str, slice] = {}
        self._steps = np.zeros(0, dtype=np.int64)  # per parameter, host side (tiny)
        self._flat: dict[str, Array] = {}  # slot -> (numel,)
        self._views: dict[str, dict[str, Array]] = {}  # name -> slot -> shaped view
        self._delta: Array = None  # (numel,) the update of the current step
        self._tmp: Array = None  # (numel,) scratch

    # -- state ---------------------------------------------------------------------------

    def bind(self, store: ParamStore) -> None:
        """(Re)allocate zero state for `store`'s layout: every step count back to 0."""
        xp, n = store.xp, store.numel()
        self._layout = store.layout
        self._names = store.names
        self._slices = dict(store.slices)
        self._steps = np.zeros(len(store.names), dtype=np.int64)
        self._flat = {s: xp.zeros(n, dtype=store.dtype) for s in self.slot_names}
        self._views = {
            name: {s: flat[store.slices[name]].reshape(shape) for s, flat in self._flat.items()}
            for name, shape in store.layout
        }
        self._delta = xp.empty(n, dtype=store.dtype)
        self._tmp = xp.empty(n, dtype=store.dtype)
        self._allocate_scratch(store)

    @abstractmethod
    def _allocate_scratch(self, store: ParamStore) -> None:
        """Allocate the subclass's own scratch buffers (once per layout)."""

    def slots(self, name: str) -> dict[str, Array]:
        """The state slots of parameter `name`: views into the flat slot buffers."""
        if name not in self._views:
            raise KeyError(f"no optimizer state for parameter '{name}'")
        return dict(self._views[name])

    def step_count(self, name: str) -> int:
        """How many updates parameter `name` has received."""
        if name not in self._views:
            raise KeyError(f"no optimizer state for parameter '{name}'")
        return int(self._steps[self._names.index(name)])

    def state_dict(self) -> dict[str, Any]:
        """Copies of the state, keyed by parameter name, so a rewrite can remap them."""
        return {
            "kind": self.kind,
            "config": dataclasses.asdict(self.config),
            "slots": {n: {s: v.copy() for s, v in sl.items()} for n, sl in self._views.items()},
            "steps": {n: int(k) for n, k in zip(self._names, self._steps, strict=True)},
        }

    def load_state_dict(self, state: dict[str, Any], store: ParamStore) -> None:
        """Lay out state for `store` and fill it from `state` by parameter name.

        Names of `store` missing from `state["steps"]` start fresh (zero slots, step 0);
        names not in `store` are dropped. Hyperparameters stay those of `self.config`.
        """
        if state.get("kind") != self.kind:
            raise ValueError(
                f"cannot load {state.get('kind')!r} state into a {self.kind} optimizer"
            )
        self.bind(store)
        steps, slots = state.get("steps", {}), state.get("slots", {})
        for i, name in enumerate(store.names):
            if name not in steps:
                continue
            self._steps[i] = int(steps[name])
            for slot, view in self._views[name].items():
                value = slots.get(name, {}).get(slot)
                if value is None:
                    raise ValueError(f"optimizer state for '{name}' lacks slot '{slot}'")
                if tuple(value.shape) != view.shape:
                    raise ValueError(
                        f"optimizer slot '{slot}' of '{name}' has shape "
                        f"{tuple(value.shape)}, parameter has {view.shape}"
                    )
                view[...] = store.xp.asarray(value, dtype=store.dtype)

    # -- update --------------------------------------------------------------------------

    def step(self, store: ParamStore, lr: float) -> float:
        """One update of store.data from store.grad with learning rate `lr`.

        Returns ||delta theta|| / ||theta|| (theta before the update; 0 when ||theta|| = 0).
        """
        if self._layout is None:
            self.bind(store)
        elif store.layout != self._layout:
            raise ValueError(
                "parameter layout changed since the optimizer was bound; "
                "remap with load_state_dict(state_dict(), store)"
            )
        _check_number("learning rate", lr)
        xp = store.xp
        theta_sq = float(xp.dot(store.data, store.data))
        self._steps += 1  # as torch: the step count is raised before the update uses it
        self._update(store, float(lr))
        delta_sq = float(xp.dot(self._delta, self._delta))
        store.data += self._delta
        return 0.0 if theta_sq == 0 else math.sqrt(delta_sq / theta_sq)  # NaN stays NaN

    @abstractmethod
    def _update(self, store: ParamStore, lr: float) -> None:
        """Advance the slots and write this step's parameter change into self._delta.

        self._steps already holds each parameter's current (1-based) step.
        """

    def _uniform_step(self) -> int | None:
        """The common step count when all parameters share it (the fast path), else None."""
        if self._steps.size and self._steps.min() != self._steps.max():
            return None
        return int(self._steps[0]) if self._steps.size else 1

    def _regularised_grad(self, store: ParamStore, weight_decay: float) -> Array:
        """grad + weight_decay * theta (torch's coupled L2), without touching store.grad."""
        if not weight_decay:
            return store.grad
        out = store.xp.multiply(store.data, weight_decay, out=self._grad_wd)
        out += store.grad
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config})"


class SGD(Optimizer):
    """torch.optim.SGD: optional L2, momentum with dampening, Nesterov."""

    def __init__(self, config: SGDConfig) -> None:
        super().__init__()
        self.kind = "sgd"
        self.config = config
        self.slot_names = ("momentum",) if config.momentum else ()

    def _allocate_scratch(self, store: ParamStore) -> None:
        if self.config.weight_decay:
            self._grad_wd = store.xp.empty(store.numel(), dtype=store.dtype)

    def _update(self, store: ParamStore, lr: float) -> None:
        c, xp, d = self.config, store.xp, self._delta
        g = self._regularised_grad(store, c.weight_decay)
        if c.momentum:
            buf = self._flat["momentum"]
            fresh = self._steps == 1
            if fresh.all():
                buf[...] = g  # torch: the buffer starts as a copy of the first gradient
            else:
                buf *= c.momentum
                if c.dampening:
                    buf += xp.multiply(g, 1 - c.dampening, out=d)
                else:
                    buf += g
                for i in np.flatnonzero(fresh):  # parameters added since the last step
                    s = self._slices[self._names[i]]
                    buf[s] = g[s]
            if c.nesterov:
                xp.multiply(buf, c.momentum, out=d)
                d += g
                g = d
            else:
                g = buf
        xp.multiply(g, -lr, out=d)


class Adam(Optimizer):
    """torch.optim.Adam (L2 coupled into the gradient) or, when decoupled, AdamW."""

    slot_names = ("m", "v")

    def __init__(self, config: AdamConfig) -> None:
        super().__init__()
        self.kind = "adamw" if config.decoupled else "adam"
        self.config = config
        self._neg_step_size: Array = None  # (numel,) per-element -lr/bc1, mixed steps only
        self._bc2_sqrt: Array = None  # (numel,) per-element sqrt(bc2), mixed steps only

    def _allocate_scratch(self, store: ParamStore) -> None:
        if self.config.weight_decay and not self.config.decoupled:
            self._grad_wd = store.xp.empty(store.numel(), dtype=store.dtype)
        self._neg_step_size = self._bc2_sqrt = None  # reallocated on demand for this layout

    def _bias_terms(self, store: ParamStore, lr: float) -> tuple[Any, Any]:
        """-lr / (1 - beta1^t) and sqrt(1 - beta2^t): scalars when every parameter is at
        the same step t, else per-element buffers filled from the per-parameter steps."""
        b1, b2 = self.config.betas

        def terms(t: int) -> tuple[float, float]:  # same float ops as torch
            return -(lr / (1 - b1**t)), (1 - b2**t) ** 0.5

        t = self._uniform_step()
        if t is not None:
            return terms(t)
        if self._neg_step_size is None:
            self._neg_step_size = store.xp.empty(store.numel(), dtype=store.dtype)
            self._bc2_sqrt = store.xp.empty(store.numel(), dtype=store.dtype)
        for name, t_param in zip(self._names, self._steps, strict=True):
            s = self._slices[name]
            neg_step, bc2_sqrt = terms(int(t_param))
            self._neg_step_size[s] = neg_step
            self._bc2_sqrt[s] = bc2_sqrt
        return self._neg_step_size, self._bc2_sqrt

    def _update(self, store: ParamStore, lr: float) -> None:
        c, xp, d, tmp = self.config, store.xp, self._delta, self._tmp
        b1, b2 = c.betas
        m, v = self._flat["m"], self._flat["v"]
        g = self._regularised_grad(store, 0.0 if c.decoupled else c.weight_decay)
        # m.lerp_(g, 1 - b1)
        xp.subtract(g, m, out=tmp)
        tmp *= 1 - b1
        m += tmp
        # v.mul_(b2).addcmul_(g, g, value=1 - b2)
        v *= b2
        xp.multiply(g, 1 - b2, out=tmp)
        tmp *= g
        v += tmp
        neg_step_size, bc2_sqrt = self._bias_terms(store, lr)
        # denom = sqrt(v) / sqrt(bc2) + eps;  delta = -step_size * m / denom
        xp.sqrt(v, out=tmp)
        tmp /= bc2_sqrt
        tmp += c.eps
        xp.multiply(m, neg_step_size, out=d)
        d /= tmp
        if c.decoupled and c.weight_decay:
            d -= xp.multiply(store.data, lr * c.weight_decay, out=tmp)


_OPTIMIZERS: dict[str, tuple[Any, Callable[[Any], Optimizer]]] = {
    "sgd": (SGDConfig, SGD),
    "adam": (AdamConfig, Adam),
    "adamw": (AdamWConfig, Adam),
}


def make_optimizer(name: str, **kwargs: Any) -> Optimizer:
    """An optimizer by name ("sgd", "adam", "adamw") from its config's keyword arguments."""
    if name not in _OPTIMIZERS:
        raise ConfigError(f"unknown optimizer {name!r}; choose one of {sorted(_OPTIMIZERS)}")
    config_cls, opt_cls = _OPTIMIZERS[name]
    allowed = {f.name for f in dataclasses.fields(config_cls)} - {"decoupled"}
    unknown = sorted(set(kwargs) - allowed)
    if unknown:
        raise ConfigError(
            f"unknown option(s) {unknown} for optimizer {name!r}; allowed: {sorted(allowed)}"
        )
    if "lr" not in kwargs:
        raise ConfigError(f"optimizer {name!r} needs a learning rate (lr)")
    return opt_cls(config_cls(**kwargs))
