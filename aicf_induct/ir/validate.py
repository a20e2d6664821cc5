"""Validation and type inference: every problem is reported naming the node it is in.

`validate(graph)` checks, in order: node ids (non-empty, unique), ops (known, arity,
attributes), references (dangling inputs, cycles, topological order, outputs), parameters
(owned once, present, matching the op's roles and shapes, valid initializers), and finally
runs every shape/dtype rule. It returns the inferred type of every node.
"""

from __future__ import annotations

from aicf_induct.errors import IRError
from aicf_induct.ir.graph import Graph, Node, TensorType
from aicf_induct.ir.init import check_init
from aicf_induct.ir.ops import OPS, OpDef


def _check_ops(graph: Graph) -> None:
    seen: set[str] = set()
    for n in graph.nodes:
        if not isinstance(n.id, str) or not n.id:
            raise IRError(f"node id must be a non-empty string, got {n.id!r}")
        if n.id in seen:
            raise IRError("duplicate node id", n.id)
        seen.add(n.id)
        if n.op not in OPS:
            raise IRError(f"unknown op '{n.op}' (known: {', '.join(sorted(OPS))})", n.id)
        op = OPS[n.op]
        if op.arity is None:
            if len(n.inputs) < 2:
                raise IRError(f"{n.op} needs at least 2 inputs, got {len(n.inputs)}", n.id)
        elif len(n.inputs) != op.arity:
            raise IRError(f"{n.op} needs {op.arity} input(s), got {len(n.inputs)}", n.id)
        unknown = sorted(set(n.attrs) - set(op.attrs))
        if unknown:
            raise IRError(f"unknown attribute(s) {unknown} for {n.op}", n.id)


def _find_cycle(graph: Graph) -> list[str] | None:
    deps = {n.id: n.inputs for n in graph.nodes}
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        stack.append(v)
        for u in deps.get(v, ()):
            if state.get(u) == 1:
                return [*stack[stack.index(u):], u]
            if u in deps and state.get(u) is None and (c := visit(u)):
                return c
        stack.pop()
        state[v] = 2
        return None

    for n in graph.nodes:
        if state.get(n.id) is None and (c := visit(n.id)):
            return c
    return None


def _check_references(graph: Graph) -> None:
    ids = {n.id for n in graph.nodes}
    for n in graph.nodes:
        for i in n.inputs:
            if i not in ids:
                raise IRError(f"input '{i}' is not a node of the graph (dangling reference)", n.id)
    cycle = _find_cycle(graph)
    if cycle:
        raise IRError(f"cycle: {' -> '.join(reversed(cycle))}", cycle[0])
    defined: set[str] = set()
    for n in graph.nodes:
        for i in n.inputs:
            if i not in defined:
                raise IRError(f"input '{i}' is defined after its use; nodes must be listed in "
                              "topological order", n.id)
        defined.add(n.id)
    if not graph.outputs:
        raise IRError("graph has no outputs")
    for o in graph.outputs:
        if o not in ids:
            raise IRError(f"output '{o}' is not a node of the graph")
    if not graph.inputs:
        raise IRError("graph has no input node")


def _check_param_table(graph: Graph) -> None:
    owner_of: dict[str, str] = {}
    for n in graph.nodes:
        for role, pname in n.params.items():
            if pname in owner_of:
                raise IRError(f"parameter '{pname}' is owned twice: by '{owner_of[pname]}' and "
                              f"by '{n.id}'", n.id)
            owner_of[pname] = n.id
            spec = graph.params.get(pname)
            if spec is None:
                raise IRError(f"parameter '{pname}' (role {role}) is missing from the "
                              "parameter table", n.id)
            if spec.owner != n.id or spec.role != role:
                raise IRError(f"parameter '{pname}' says it is owned by '{spec.owner}' as "
                              f"'{spec.role}', but this node uses it as '{role}'", n.id)
    for pname, spec in graph.params.items():
        if pname != spec.name:
            raise IRError(f"parameter table key '{pname}' differs from its name '{spec.name}'")
        if pname not in owner_of:
            raise IRError(f"parameter '{pname}' is owned by no node (claims owner "
                          f"'{spec.owner}')", spec.owner)
        if problem := check_init(spec.init):
            raise IRError(f"parameter '{pname}': {problem}", spec.owner)


def _check_node_params(n: Node, op: OpDef, ins: list[TensorType], graph: Graph) -> None:
    expected = op.params(ins, op.full_attrs(n.attrs))
    missing = sorted(set(expected) - set(n.params))
    if missing:
        raise IRError(f"{n.op} is missing parameter(s) for role(s) {missing}", n.id)
    extra = sorted(set(n.params) - set(expected))
    if extra:
        raise IRError(f"{n.op} does not take parameter role(s) {extra}", n.id)
    for role, info in expected.items():
        spec = graph.params[n.params[role]]
        if tuple(spec.shape) != info.shape:
            raise IRError(f"parameter '{spec.name}' has shape {list(spec.shape)}, {n.op} needs "
                          f"{list(info.shape)} for role {role}", n.id)
        if spec.trainable != info.trainable:
            raise IRError(f"parameter '{spec.name}' must be "
                          f"{'trainable' if info.trainable else 'non-trainable state'}", n.id)


def infer_types(graph: Graph, batch: int | None = None,
                check_params: bool = True) -> dict[str, TensorType]:
    """The type of every node (batch axis None unless `batch` is given); assumes references
    are valid. Shape errors are re-raised naming the node."""
    types: dict[str, TensorType] = {}
    for n in graph.nodes:
        op = OPS[n.op]
        ins = [types[i] for i in n.inputs]
        attrs = op.full_attrs(n.attrs)
        try:
            t = op.infer(ins, attrs)
            if check_params:
                _check_node_params(n, op, ins, graph)
        except IRError as err:
            if err.node is not None:
                raise
            raise type(err)(err.problem, n.id) from None
        except (TypeError, ValueError, KeyError) as err:
            raise IRError(f"bad attributes for {n.op}: {err}", n.id) from None
        types[n.id] = t.with_batch(batch) if batch is not None and n.op == "input" else t
    return types


def validate(graph: Graph) -> dict[str, TensorType]:
    """Check a graph; return node types. Raises IRError naming the node and the problem."""
    _check_ops(graph)
    _check_references(graph)
    _check_param_table(graph)
    return infer_types(graph)
