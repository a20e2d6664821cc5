"""Prune units of a hidden linear layer, by magnitude or by gradient saliency.

Site: a hidden linear layer L with the structure widening needs (per-unit ops, then
linear readers). Each unit i gets a score and the lowest-scoring ones go:

- `by="magnitude"`: ||(W1[i], b1[i])|| * ||W_R[:, i]|| over the readers R: how much the
  unit can move the output at all;
- `by="gradient"`: |sum of w * dL/dw| over the unit's incoming row, bias, per-unit
  parameters and outgoing columns, from the last step's gradients (`ModelState.grads`):
  the first-order Taylor estimate of the loss change when the unit is removed. Gradients
  that are all zero at the site say nothing (every install of a model, a rewrite's, a
  rollback's, zeroes them until the next step): refused, a RewriteError.

The kept units keep their order; L's rows, the per-unit parameters and buffers and the
readers' columns of the dropped units are deleted. Not function-preserving (it is exactly
so only for dead units, those whose outgoing weights are all zero).

Optimizer state: every slot of the affected parameters is cut the same way as the
parameter (rows of L, entries of the per-unit parameters, columns of the readers); step
counts are kept.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from aicf_induct.ir.graph import Graph
from aicf_induct.runtime.model_state import ModelState
from aicf_induct.runtime.transforms.base import (
    RewriteError,
    Transform,
    int_option,
    number_option,
)
from aicf_induct.runtime.transforms.surgery import hidden_linears, redeclare, unit_chain, units_of

PRUNE_BY = ("magnitude", "gradient")


class Prune(Transform):
    name = "prune"

    def __init__(self, fraction: float = 0.25, units: int = 0, by: str = "magnitude",
                 min_units: int = 1) -> None:
        if by not in PRUNE_BY:
            raise RewriteError(f"prune 'by' must be one of {PRUNE_BY}, got {by!r}")
        units = int_option("prune units", units)
        # 0 would let every unit go: a layer of no units is no layer
        min_units = int_option("prune min_units", min_units, 1)
        fraction = number_option("prune fraction", fraction)
        if units < 0 or (not units and not 0.0 < fraction < 1.0):
            raise RewriteError(f"prune needs units > 0 or 0 < fraction < 1, got units={units}, "
                               f"fraction={fraction}")
        self.fraction: float = fraction
        self.units: int = units
        self.by: str = by
        self.min_units: int = min_units

    @property
    def function_preserving(self) -> bool:
        return False

    def options(self) -> dict[str, Any]:
        return {"fraction": self.fraction, "units": self.units, "by": self.by,
                "min_units": self.min_units}

    def n_removed(self, h: int) -> int:
        k = self.units if self.units else max(1, math.floor(h * self.fraction))
        return min(k, h - self.min_units)

    def candidates(self, graph: Graph) -> list[str]:
        return hidden_linears(graph)

    def applicable(self, graph: Graph, site: str) -> str | None:
        found = unit_chain(graph, site)
        if isinstance(found, str):
            return found
        h = int(graph.node(site).attrs["out_features"])
        if self.n_removed(h) < 1:
            return f"'{site}' has {h} units, min_units is {self.min_units}"
        return None

    def _unit_params(self, graph: Graph, site: str) -> tuple[list[str], list[str]]:
        chain, readers = units_of(graph, site)
        rows = [graph.node(site).params[r] for r in sorted(graph.node(site).params)]
        for nid in chain:
            rows += [graph.node(nid).params[r] for r in sorted(graph.node(nid).params)]
        cols = [graph.node(r).params["weight"] for r in readers]
        return rows, cols

    def scores(self, state: ModelState, site: str) -> np.ndarray:
        rows, cols = self._unit_params(state.graph, site)
        v = state.values
        if self.by == "magnitude":
            w = state.graph.node(site).params
            inc = np.sqrt(sum((v[w[r]].reshape(v[w[r]].shape[0], -1) ** 2).sum(axis=1)
                              for r in w))
            out = np.sqrt(sum((v[c] ** 2).sum(axis=0) for c in cols))
            return np.asarray(inc * out)
        g = state.grads
        if g is None:
            raise RewriteError("prune by gradient needs the last step's gradients")
        if not any(np.any(g[p]) for p in (*rows, *cols) if p in g):
            # every install (a rewrite, a rollback, a snapshot restored) zeroes the
            # gradients: ranking zeros would cut units 0..k-1, an arbitrary choice
            raise RewriteError(f"prune by gradient needs the last step's gradients, and those "
                               f"at '{site}' are all zero (no step since the model was "
                               "installed)")
        total = sum((v[p] * g[p]).reshape(v[p].shape[0], -1).sum(axis=1)
                    for p in rows if p in g)
        total = total + sum((v[c] * g[c]).sum(axis=0) for c in cols if c in g)
        return np.abs(np.asarray(total))

    def _apply(self, state: ModelState, site: str, rng: np.random.Generator) -> None:
        graph = state.graph
        h = int(graph.node(site).attrs["out_features"])
        order = np.argsort(self.scores(state, site), kind="stable")
        keep = np.sort(order[self.n_removed(h):])
        rows, cols = self._unit_params(graph, site)
        for p in rows:
            state.values[p] = state.values[p][keep].copy()
            state.remap_units(p, keep, 0)
        for p in cols:
            state.values[p] = state.values[p][:, keep].copy()
            state.remap_units(p, keep, 1)
        graph.node(site).attrs["out_features"] = len(keep)
        chain, readers = units_of(graph, site)
        redeclare(graph, [site, *chain, *readers])
