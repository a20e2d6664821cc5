"""Add a block to a residual network (FT-Transformer, resmlp), its output zero-initialised.

Site: an `add` node that closes a residual sublayer: y = s + f(s), f a chain of one-input
nodes from s whose last layer (dropouts after it aside) is a linear or an attention node.
The template copied is that sublayer, or, when its skip source s closes an attention
sublayer itself, the two together: a pre-norm transformer block (x + attn(ln(x)), then
+ ffn(ln(.))). The copy is inserted after the site, each sublayer reading the one before,
and the site's readers read the copy's last add instead.

Function preservation: in every copied sublayer the last linear's weight and bias (an
attention node's output projection) are zero, so each branch adds exactly 0 — in eval and
in training mode. The other new parameters start as their op initialises them (layernorm
1 / 0, batchnorm 1 / 0 with running statistics 0 / 1, linear and attention projections
random as PyTorch draws them), so the zero layer's gradient (its input times the upstream
gradient) is non-zero from the first step and the block starts learning at once.

Optimizer state: the new parameters are fresh (zero slots, step 0); nothing else changes.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from aicf_induct.ir.graph import Graph, Node
from aicf_induct.ir.init import init_array
from aicf_induct.runtime.model_state import ModelState
from aicf_induct.runtime.transforms.base import Transform
from aicf_induct.runtime.transforms.surgery import fresh_id, insert_after, redeclare, site_node

# the parameters that make a branch's output zero, by the op of its last layer
ZERO_ROLES = {"linear": ("weight", "bias"), "attention": ("out_weight", "out_bias")}


@dataclass(frozen=True)
class Sublayer:
    skip: str  # the value the branch starts from
    chain: tuple[str, ...]  # the branch's nodes, first to last
    add: str  # the join


def sublayer(graph: Graph, add_id: str) -> Sublayer | None:
    """The residual sublayer `add_id` closes, or None (see the module docstring)."""
    by_id = graph.node_map()
    add = by_id.get(add_id)
    if add is None or add.op != "add":
        return None
    for skip, branch in ((add.inputs[0], add.inputs[1]), (add.inputs[1], add.inputs[0])):
        chain: list[str] = []
        node = by_id[branch]
        while node.id != skip and len(node.inputs) == 1:
            chain.append(node.id)
            node = by_id[node.inputs[0]]
        if node.id == skip and chain:
            return Sublayer(skip, tuple(reversed(chain)), add_id)
    return None


def zero_layer(graph: Graph, sub: Sublayer) -> str | None:
    """The branch's last linear or attention node, if only dropouts follow it."""
    for nid in reversed(sub.chain):
        op = graph.node(nid).op
        if op in ZERO_ROLES:
            return nid
        if op != "dropout":
            return None
    return None


def template(graph: Graph, site: str) -> list[Sublayer] | str:
    """The sublayers to copy for a block after `site`, or why there are none."""
    last = sublayer(graph, site)
    if last is None:
        return (f"'{site}' closes no residual block (one input is not reached from the "
                "other through one-input nodes)")
    attends = any(graph.node(n).op == "attention" for n in last.chain)
    for user in graph.consumers()[site]:
        after = sublayer(graph, user.id) if user.op == "add" else None
        if attends and after is not None and after.skip == site and \
                not any(graph.node(n).op == "attention" for n in after.chain):
            return (f"'{site}' ends the attention half of a transformer block; add the block "
                    f"at its end, '{after.add}'")
    subs = [last]
    before = sublayer(graph, last.skip)
    if before is not None and not any(graph.node(n).op == "attention" for n in last.chain) \
            and any(graph.node(n).op == "attention" for n in before.chain):
        subs.insert(0, before)  # a transformer block: the attention sublayer, then the FFN
    for sub in subs:
        if zero_layer(graph, sub) is None:
            ops = " -> ".join(graph.node(n).op for n in sub.chain)
            return (f"the branch closed by '{sub.add}' ({ops}) does not end in a linear or "
                    "attention layer, so a copy cannot start at zero")
    return subs


class AddBlock(Transform):
    """Insert a copy of the residual block that ends at an add node, adding exactly 0."""

    name = "add_block"

    @property
    def function_preserving(self) -> bool:
        return True

    def candidates(self, graph: Graph) -> list[str]:
        return [n.id for n in graph.nodes if n.op == "add"]

    def applicable(self, graph: Graph, site: str) -> str | None:
        node = site_node(graph, site, ("add",), "an add (a residual join)")
        if isinstance(node, str):
            return node
        found = template(graph, site)
        return found if isinstance(found, str) else None

    def _apply(self, state: ModelState, site: str, rng: np.random.Generator) -> None:
        graph = state.graph
        subs = template(graph, site)
        assert not isinstance(subs, str)
        stem = fresh_id(graph, f"{site}.block")
        new: list[Node] = []
        zeros: list[str] = []
        cur = site
        for k, sub in enumerate(subs):
            prev = cur
            for nid in sub.chain:
                old = graph.node(nid)
                node = Node(f"{stem}.{k}.{nid}", old.op, (prev,), copy.deepcopy(old.attrs))
                new.append(node)
                prev = node.id
                if nid == zero_layer(graph, sub):
                    zeros.append(node.id)
            join = Node(f"{stem}.{k}.add", "add", (cur, prev))
            new.append(join)
            cur = join.id
        insert_after(graph, site, new, cur)
        owners = [n.id for n in new if n.op not in ("add", "dropout")]
        redeclare(graph, owners)
        for n in new:
            for role, pname in n.params.items():
                spec = graph.params[pname]
                value = init_array(spec.init, spec.shape, rng, spec.dtype)
                if n.id in zeros and role in ZERO_ROLES[n.op]:
                    value = np.zeros(spec.shape, dtype=spec.dtype)
                state.values[pname] = value
                state.drop_opt(pname)  # fresh: zero slots, step 0
