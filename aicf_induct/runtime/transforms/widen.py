"""Widen a hidden linear layer by Net2Net unit splitting.

The layer L (weight W1 (h, in), bias b1) grows to h' units. A map g: {0..h'-1} -> {0..h-1}
keeps units 0..h-1 and gives each new unit a source, drawn so that sources are spread
evenly (a permutation of the old units, repeated). Unit i now has c_i = |g^-1(i)| copies
and every copy j takes the share s_j = 1 / c_g(j) of it:

- incoming: W1'[j] = W1[g(j)], b1'[j] = b1[g(j)]; per-unit parameters and buffers between
  L and its readers (batchnorm weight, bias, running statistics) are copied the same way;
- outgoing: every linear reader R of the units gets W_R'[:, j] = W_R[:, g(j)] * s_j, so the
  copies' contributions add up to the old unit's: the function is unchanged.

With `noise` > 0 the copies of a unit are pulled apart to break their symmetry (otherwise
identical copies get proportional gradients and, under Adam, identical updates forever):
each copy's incoming weights get Gaussian noise of std `noise` x std(W1), minus the mean
noise over that unit's copies. The noise sums to zero over the copies, so with equal shares
the change of the function is of second order in the noise; the transform is then not
marked function-preserving.

Optimizer state (remapping rule). Had the network always been split, a copy's incoming
gradient would be s_j times the old unit's, its outgoing gradient the old one:

- incoming weights, bias and per-unit parameters of copy j: the source's slots scaled as
  for a gradient scaled by s_j: Adam m * s_j, v * s_j², SGD momentum * s_j. Adam's step
  m/sqrt(v) is then the old unit's step, so each copy moves like the unit it copies;
- outgoing columns of copy j: m and momentum copied, Adam's v divided by s_j². Copy j's
  Adam step is then s_j times the old column's, so the copies' summed step equals what the
  unsplit column would have taken (in function space the run continues as before; copying v
  unchanged would double the effective step of every split unit);
- step counts are inherited: every parameter keeps its name and its count.

`init="fresh"` grows differently: the new units get incoming weights from the layer's
initializer (per-unit parameters their defaults) and zero outgoing weights, so the function
is unchanged exactly and the new units are as diverse as a fresh layer; their slots start
at zero (m, v, momentum) under the parameter's inherited step count. (Zero v under a large
step count makes Adam's first steps on them several times lr; filling v with the layer's
mean instead all but froze them in a test on digits, which trained worse.)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from aicf_induct.ir.graph import Graph
from aicf_induct.ir.init import init_array
from aicf_induct.runtime.model_state import ModelState
from aicf_induct.runtime.transforms.base import (
    RewriteError,
    Transform,
    int_option,
    number_option,
)
from aicf_induct.runtime.transforms.surgery import hidden_linears, redeclare, unit_chain, units_of

WIDEN_INITS = ("split", "fresh")


def _extend_slots(state: ModelState, name: str, extra: int, axis: int) -> None:
    """Zero slots for `extra` new units along `axis` (the parameter's step count is shared)."""
    if not state.has_opt(name):
        return
    slots = state.opt_slots(name)
    for slot, arr in list(slots.items()):
        shape = list(arr.shape)
        shape[axis] = extra
        slots[slot] = np.concatenate([arr, np.zeros(shape)], axis=axis)


def split_map(h: int, h_new: int, rng: np.random.Generator) -> np.ndarray:
    """g: identity on 0..h-1, then sources for the new units, spread evenly."""
    extra = h_new - h
    rounds = math.ceil(extra / h)
    src = np.concatenate([rng.permutation(h) for _ in range(rounds)])[:extra]
    return np.concatenate([np.arange(h), src]).astype(np.int64)


class Widen(Transform):
    """Net2Net widening of a hidden linear layer (site: the linear node's id); options:
    `factor` or `units`, `noise` (split only), `init` ("split" | "fresh"), `max_width`."""

    name = "widen"

    def __init__(self, factor: float = 2.0, units: int = 0, noise: float = 0.0,
                 max_width: int = 4096, init: str = "split") -> None:
        units = int_option("widen units", units)
        max_width = int_option("widen max_width", max_width, 1)
        factor = number_option("widen factor", factor)
        if units < 0 or (not units and not factor > 1.0):
            raise RewriteError(f"widen needs units > 0 or factor > 1, got units={units}, "
                               f"factor={factor}")
        noise = number_option("widen noise", noise, 0)
        if init not in WIDEN_INITS:
            raise RewriteError(f"widen init must be one of {WIDEN_INITS}, got {init!r}")
        self.factor: float = factor
        self.units: int = units
        self.noise: float = noise
        self.max_width: int = max_width
        self.init: str = init

    @property
    def function_preserving(self) -> bool:
        return self.init == "fresh" or self.noise == 0.0

    def options(self) -> dict[str, Any]:
        return {"factor": self.factor, "units": self.units, "noise": self.noise,
                "max_width": self.max_width, "init": self.init}

    def new_width(self, h: int) -> int:
        return h + self.units if self.units else max(h + 1, round(h * self.factor))

    def candidates(self, graph: Graph) -> list[str]:
        return hidden_linears(graph)

    def applicable(self, graph: Graph, site: str) -> str | None:
        found = unit_chain(graph, site)
        if isinstance(found, str):
            return found
        h = int(graph.node(site).attrs["out_features"])
        if self.new_width(h) > self.max_width:
            return f"width {h} would grow past max_width {self.max_width}"
        return None

    def _apply(self, state: ModelState, site: str, rng: np.random.Generator) -> None:
        if self.init == "fresh":
            self._apply_fresh(state, site, rng)
        else:
            self._apply_split(state, site, rng)

    def _apply_fresh(self, state: ModelState, site: str, rng: np.random.Generator) -> None:
        graph, values = state.graph, state.values
        chain, readers = units_of(graph, site)
        layer = graph.node(site)
        h = int(layer.attrs["out_features"])
        extra = self.new_width(h) - h
        layer.attrs["out_features"] = h + extra
        redeclare(graph, [site, *chain, *readers])  # shapes and initializers for h + extra
        per_unit = [layer.params[r] for r in sorted(layer.params)]
        for nid in chain:
            node = graph.node(nid)
            per_unit += [node.params[r] for r in sorted(node.params)]
        for pname in per_unit:
            spec = graph.params[pname]
            new = init_array(spec.init, (extra, *spec.shape[1:]), rng, spec.dtype)
            values[pname] = np.concatenate([values[pname], new], axis=0)
            _extend_slots(state, pname, extra, 0)
        for rid in readers:
            pname = graph.node(rid).params["weight"]
            out = values[pname]
            values[pname] = np.concatenate([out, np.zeros((out.shape[0], extra))], axis=1)
            _extend_slots(state, pname, extra, 1)

    def _apply_split(self, state: ModelState, site: str, rng: np.random.Generator) -> None:
        graph, values = state.graph, state.values
        chain, readers = units_of(graph, site)
        layer = graph.node(site)
        h = int(layer.attrs["out_features"])
        g = split_map(h, self.new_width(h), rng)
        share = 1.0 / np.bincount(g, minlength=h)[g]  # (h',) s_j
        # incoming: the layer's rows and every per-unit parameter or buffer of the chain
        per_unit = [layer.params[r] for r in sorted(layer.params)]
        for nid in chain:
            node = graph.node(nid)
            per_unit += [node.params[r] for r in sorted(node.params)]
        for pname in per_unit:
            values[pname] = values[pname][g].copy()
            state.remap_units(pname, g, 0, grad_scale=share)
        if self.noise > 0:
            w = values[layer.params["weight"]]
            eps = rng.normal(0.0, self.noise * float(w.std() or 1.0), size=w.shape)
            group_mean = np.zeros((h, w.shape[1]))
            np.add.at(group_mean, g, eps)
            eps -= (group_mean / np.bincount(g, minlength=h)[:, None])[g]
            values[layer.params["weight"]] = w + eps
        # outgoing: readers' columns, divided between the copies
        for rid in readers:
            pname = graph.node(rid).params["weight"]
            values[pname] = values[pname][:, g] * share
            ones = np.ones_like(share)
            state.remap_units(pname, g, 1, slot_scale={"m": ones, "v": share ** -2.0,
                                                       "momentum": ones})
        layer.attrs["out_features"] = len(g)
        redeclare(graph, [site, *chain, *readers])
        if len(g) == h:
            raise RewriteError("widen did not add a unit")
