"""Widen the token dimension of an FT-Transformer: every token channel copied k times.

Site: a `numeric_tokenizer` (or `embedding`) node. Its *stream* is every value laid out
along its d channels: the tokens, and what layer norms, activations, dropouts, attention
nodes, token means and residual adds make of them (an add joins two stream values, so the
feed-forward's last linear writes into the stream too). The stream must end in linear
layers that read it; a softmax, reshape, concat or graph output on it has no widened form
and is the reason the transform does not apply.

Construction (d -> k·d, new channel j a copy of old channel j // k, i.e. `np.repeat`):

- writers (the tokenizer, a linear writing the stream, per-channel norm parameters):
  entries copied; readers (linear layers reading it): columns copied and divided by k, so
  each reader sums to what it read. Layer norms see k copies of every channel: the same
  mean and variance.
- attention: q/k/v and output projections as a reader and writer at once; every head keeps
  its channels (copied, so a head is k·d/h wide), and the q rows are divided by sqrt(k),
  which undoes the sqrt(k)-larger q·k and the 1/sqrt(d/h) scale's change: the attention
  probabilities are unchanged.

Function-preserving in eval mode (a dropout on the stream draws masks of the new shape in
training mode). The tests check 1e-12 in float64.

Optimizer state, entry by entry, with the rule `widen` uses: an entry whose value is scaled
by a and whose gradient is scaled by b (writers: a = 1, b = 1/k; readers' columns: a = 1/k,
b = 1; q rows: both 1/sqrt(k) more) gets m·b, momentum·b and v·(b/a)², so its Adam step is
a times the old entry's: the copies together move as the old entry did. Steps are kept.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from aicf_induct.ir.graph import Graph
from aicf_induct.ir.ops import ACTIVATIONS
from aicf_induct.runtime.model_state import ModelState
from aicf_induct.runtime.transforms.base import Transform, int_option
from aicf_induct.runtime.transforms.reading import consumers_of, nodes_by_id, types_of
from aicf_induct.runtime.transforms.surgery import redeclare, site_node

TOKENIZERS = {"numeric_tokenizer": "d_token", "embedding": "embedding_dim"}
# ops whose output is on the stream exactly when their (first) input is
FOLLOW = frozenset({*ACTIVATIONS, "dropout", "layernorm", "attention", "mean", "sum"})


def stream(graph: Graph, site: str) -> tuple[set[str], set[str]] | str:
    """(values on the stream, linear layers reading it), or why it cannot be widened."""
    by_id, users, types = nodes_by_id(graph), consumers_of(graph), types_of(graph)
    on, readers = {site}, set()
    todo = [site]

    def join(v: str) -> None:
        if v not in on:
            on.add(v)
            todo.append(v)

    while todo:
        v = todo.pop()
        node = by_id[v]
        if v in graph.outputs:
            return f"the token stream of '{site}' reaches the graph output at '{v}'"
        if v != site and node.op not in FOLLOW and node.op not in ("add", "linear"):
            return f"'{v}' ({node.op}) writes into the token stream and has no widened form"
        if node.op == "add" or (node.op in FOLLOW and v != site):
            for i in node.inputs[:2 if node.op == "add" else 1]:
                join(i)  # what made a stream value is on the stream too
        for u in users[v]:
            if u.op == "linear":
                readers.add(u.id)
            elif u.op in ("mean", "sum") and \
                    int(u.attrs.get("axis", -1)) % len(types[v].shape) == len(types[v].shape) - 1:
                return f"'{u.id}' reduces over the token channels"
            elif u.op in FOLLOW or u.op == "add":
                join(u.id)
            else:
                return (f"the token stream of '{site}' reaches '{u.id}' ({u.op}), which has "
                        "no widened form")
    return on, readers


class WidenTokens(Transform):
    """Every token channel copied `factor` times (site: the tokenizer)."""

    name = "widen_tokens"

    def __init__(self, factor: int = 2, max_width: int = 4096) -> None:
        self.factor = int_option("factor", factor, 2)  # new token width = factor * old
        # the widest token width it makes (checked before apply)
        self.max_width = int_option("widen_tokens max_width", max_width, 1)

    @property
    def function_preserving(self) -> bool:
        return True

    def options(self) -> dict[str, Any]:
        return {"factor": self.factor, "max_width": self.max_width}

    def candidates(self, graph: Graph) -> list[str]:
        return [n.id for n in graph.nodes if n.op in TOKENIZERS]

    def applicable(self, graph: Graph, site: str) -> str | None:
        node = site_node(graph, site, TOKENIZERS, "a tokenizer (numeric_tokenizer, embedding)")
        if isinstance(node, str):
            return node
        d = int(graph.params[node.params["weight"]].shape[-1])
        if self.factor * d > self.max_width:  # before anything of that width is allocated
            return (f"factor {self.factor} would grow token width {d} to {self.factor * d}, "
                    f"past max_width {self.max_width}")
        found = stream(graph, site)
        return found if isinstance(found, str) else None

    def _apply(self, state: ModelState, site: str, rng: np.random.Generator) -> None:
        graph, k = state.graph, self.factor
        found = stream(graph, site)
        assert not isinstance(found, str)
        on, readers = found
        d = int(graph.params[graph.node(site).params["weight"]].shape[-1])
        src = np.repeat(np.arange(d), k)
        touched = [n for n in graph.nodes if n.id in on or n.id in readers]
        for n in touched:
            if n.op in TOKENIZERS:
                n.attrs[TOKENIZERS[n.op]] = k * d
            if n.op == "linear" and n.id in on:
                n.attrs["out_features"] = k * d
        plans = {n.id: self._plan(n.op, n.id in on, n.id in readers, d) for n in touched}
        old = {p: graph.params[p].shape for n in touched for p in n.params.values()}
        redeclare(graph, [n.id for n in touched])
        for n in touched:
            for role, pname in n.params.items():
                for axis, (a, b) in plans[n.id].get(role, {}).items():
                    axis = axis % len(old[pname])
                    index = src if old[pname][axis] == d else _blocks(src, d)
                    self._widen(state, pname, index, axis, a[index] if a.size > 1 else a,
                                b[index] if b.size > 1 else b)

    def _plan(self, op: str, writes: bool, reads: bool,
              d: int) -> dict[str, dict[int, tuple[np.ndarray, np.ndarray]]]:
        """Per role, per axis: the value factor a and gradient factor b of each old unit."""
        k = self.factor
        w = (np.ones(1), np.full(1, 1.0 / k))  # written: copied; gradient split k ways
        r = (np.full(1, 1.0 / k), np.ones(1))  # read: divided by k
        if op in TOKENIZERS:
            return {"weight": {-1: w}, "bias": {-1: w}}
        if op in ("layernorm", "batchnorm"):
            return {role: {0: w} for role in ("weight", "bias", "running_mean", "running_var")}
        if op == "attention":
            q = np.full(3 * d, 1.0)
            q[:d] = 1.0 / math.sqrt(k)  # the q rows: scores keep their scale
            rows = (q, np.where(q < 1.0, q, 1.0 / k))
            return {"in_weight": {0: rows, 1: r}, "in_bias": {0: rows},
                    "out_weight": {0: w, 1: r}, "out_bias": {0: w}}
        if op == "linear":
            plan: dict[str, dict[int, tuple[np.ndarray, np.ndarray]]] = {"weight": {}}
            if writes:
                plan["weight"][0] = w
                plan["bias"] = {0: w}
            if reads:
                plan["weight"][1] = r
            return plan
        return {}

    @staticmethod
    def _widen(state: ModelState, name: str, index: np.ndarray, axis: int, a: np.ndarray,
               b: np.ndarray) -> None:
        """Take `index` along `axis`, scale values by a and slots by the module's rule."""
        shape = [1] * state.values[name].ndim
        shape[axis] = len(index)
        a_full, b_full = np.broadcast_to(a, (len(index),)), np.broadcast_to(b, (len(index),))
        state.values[name] = np.take(state.values[name], index, axis=axis) * a_full.reshape(shape)
        state.remap_units(name, index, axis, slot_scale={
            "m": b_full, "momentum": b_full, "v": (b_full / a_full) ** 2})


def _blocks(src: np.ndarray, d: int) -> np.ndarray:
    """`src` for each of the three d-wide q/k/v blocks of an attention projection."""
    return np.concatenate([src + j * d for j in range(3)])
