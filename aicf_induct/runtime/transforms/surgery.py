"""Graph surgery shared by the transforms: finding a layer's units, inserting nodes after a
value, and re-declaring parameters from the op table after shapes changed."""

from __future__ import annotations

from collections.abc import Collection

from aicf_induct.ir.graph import Graph, Node, ParamSpec
from aicf_induct.ir.ops import ACTIVATIONS, OPS
from aicf_induct.ir.validate import infer_types
from aicf_induct.runtime.transforms.reading import consumers_of, nodes_by_id, types_of

# Ops that act on each feature (unit) separately: widening or pruning a layer can carry
# their per-unit parameters along.
PER_UNIT = frozenset({*ACTIVATIONS, "dropout", "batchnorm"})


def fresh_id(graph: Graph, stem: str) -> str:
    """`stem`, or `stem_k` for the first k such that no node id or parameter name is it or
    starts with it and a dot (so `<stem>.<anything>` is free too)."""
    names = [n.id for n in graph.nodes] + list(graph.params)

    def used(c: str) -> bool:
        return any(x == c or x.startswith(c + ".") for x in names)

    k, cand = 0, stem
    while used(cand):
        k += 1
        cand = f"{stem}_{k}"
    return cand


def site_node(graph: Graph, site: str, ops: Collection[str] | None = None,
              what: str = "") -> Node | str:
    """The node at `site`, or why it is no site: there is no such node, or its op is not one
    of `ops` (described as `what`, e.g. "an activation")."""
    node = nodes_by_id(graph).get(site)
    if node is None:
        return f"no node '{site}'"
    if ops is not None and node.op not in ops:
        return f"'{site}' is a {node.op}, not {what}"
    return node


def feature_width(graph: Graph, node_id: str) -> int | None:
    """The feature (last) axis of a node's output, when it is a 2-D float value."""
    t = types_of(graph)[node_id]
    if len(t.shape) != 2 or t.dtype not in ("float32", "float64"):
        return None
    return t.shape[-1]


def unit_chain(graph: Graph, linear_id: str) -> tuple[list[str], list[str]] | str:
    """For a linear layer L: the per-unit nodes that follow it (activation, dropout,
    batchnorm, each the single consumer of the one before) and the linear layers that read
    the chain's end. A string says why there is no such structure."""
    by_id = nodes_by_id(graph)
    node = by_id.get(linear_id)
    if node is None:
        return f"no node '{linear_id}'"
    if node.op != "linear":
        return f"'{linear_id}' is a {node.op}, not a linear layer"
    users = consumers_of(graph)
    chain: list[str] = []
    cur = linear_id
    while len(users[cur]) == 1 and users[cur][0].op in PER_UNIT and cur not in graph.outputs:
        cur = users[cur][0].id
        chain.append(cur)
    if cur in graph.outputs:
        return f"'{linear_id}' feeds the graph output (its width is the model's)"
    readers = users[cur]
    if not readers:
        return f"'{cur}' has no consumer"
    bad = [f"{u.id} ({u.op})" for u in readers if u.op != "linear"]
    if bad:
        why = " (it normalises across units)" if any(u.op == "layernorm" for u in readers) \
            else ""
        return (f"the units of '{linear_id}' reach {', '.join(bad)}{why}; only linear "
                "consumers can absorb a change of width")
    return chain, [u.id for u in readers]


def units_of(graph: Graph, linear_id: str) -> tuple[list[str], list[str]]:
    """`unit_chain`, raising RewriteError where there is no such structure."""
    found = unit_chain(graph, linear_id)
    if isinstance(found, str):
        from aicf_induct.runtime.transforms.base import RewriteError

        raise RewriteError(found)
    return found


def block_end(graph: Graph, linear_id: str) -> str:
    """The last node of the block a hidden linear layer starts: follow single consumers
    through per-unit ops and layer norms."""
    users = consumers_of(graph)
    cur = linear_id
    while (len(users[cur]) == 1 and (users[cur][0].op in PER_UNIT
                                     or users[cur][0].op == "layernorm")
           and cur not in graph.outputs):
        cur = users[cur][0].id
    return cur


def insert_after(graph: Graph, anchor: str, nodes: list[Node], output: str) -> None:
    """Insert `nodes` right after `anchor` in node order and make every other reader of
    `anchor` (and the graph outputs) read `output` instead."""
    new_ids = {n.id for n in nodes}
    for n in graph.nodes:
        if n.id not in new_ids:
            n.inputs = tuple(output if i == anchor else i for i in n.inputs)
    graph.outputs = [output if o == anchor else o for o in graph.outputs]
    at = next(k for k, n in enumerate(graph.nodes) if n.id == anchor) + 1
    graph.nodes[at:at] = nodes


def redeclare(graph: Graph, node_ids: list[str]) -> None:
    """Re-derive the parameters of `node_ids` from the op table for the graph's current
    shapes: new roles get `<node id>.<role>`, shapes and initializers follow the op (so a
    graph re-initialised from scratch starts as the op says), parameter names are kept."""
    types = infer_types(graph, check_params=False)
    by_id = graph.node_map()
    for nid in node_ids:
        n = by_id[nid]
        op = OPS[n.op]
        infos = op.params([types[i] for i in n.inputs], op.full_attrs(n.attrs))
        for role in [r for r in n.params if r not in infos]:
            graph.params.pop(n.params.pop(role))
        dtype = types[nid].dtype
        for role, info in infos.items():
            name = n.params.setdefault(role, f"{nid}.{role}")
            graph.params[name] = ParamSpec(name, nid, role, info.shape, dtype, info.init,
                                           info.trainable)


def remove_node(graph: Graph, node_id: str) -> None:
    """Drop a one-input node without parameters, wiring its readers to its input."""
    n = graph.node(node_id)
    src = n.inputs[0]
    graph.nodes = [m for m in graph.nodes if m.id != node_id]
    for m in graph.nodes:
        m.inputs = tuple(src if i == node_id else i for i in m.inputs)
    graph.outputs = [src if o == node_id else o for o in graph.outputs]


def hidden_linears(graph: Graph) -> list[str]:
    """Linear layers whose output is not a graph output."""
    return [n.id for n in graph.nodes if n.op == "linear" and n.id not in graph.outputs]


def unit_activations(graph: Graph) -> list[str]:
    return [n.id for n in graph.nodes if n.op in ACTIVATIONS]
