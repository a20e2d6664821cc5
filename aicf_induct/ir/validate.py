"""Validation and type inference: every problem is reported naming the node it is in.

`validate(graph)` checks, in order: node ids (non-empty, unique), ops (known, arity,
attributes: known, each value as its op's `checks` say), references (dangling inputs,
cycles, topological order, outputs), parameters (owned once, present, matching the op's
roles and shapes, valid initializers), and finally
runs every shape/dtype rule. It returns the inferred type of every node, or raises the
first problem; `problems(graph)` lists them all (`aicf-induct ir validate`). Each check is
a generator of problems, so both walk the same code.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from aicf_induct.errors import ConfigError, IRError
from aicf_induct.ir.graph import Graph, Node, TensorType
from aicf_induct.ir.init import check_init
from aicf_induct.ir.ops import OPS, OpDef


def _id_problem(node_id: str) -> str | None:
    """Why a node id is not one, or None. '#' is the compiler's (its gradient names hold it,
    `compiler.autodiff`); a control character would break the one-line errors that name the
    node; a lone surrogate is no text a file or a terminal can hold."""
    if "#" in node_id:
        return "a node id may not hold '#' (the compiler's gradient names use it)"
    if any(ord(c) < 32 or ord(c) == 127 for c in node_id):
        return "a node id may not hold a control character (a newline, a tab)"
    try:
        node_id.encode("utf-8")
    except UnicodeEncodeError:
        return "a node id must be text (it holds a lone surrogate)"
    return None


def _op_problems(graph: Graph) -> Iterator[IRError]:
    seen: set[str] = set()
    for n in graph.nodes:
        if not isinstance(n.id, str) or not n.id:
            yield IRError(f"node id must be a non-empty string, got {n.id!r}")
            continue
        problem = _id_problem(n.id)
        if problem:
            yield IRError(problem, repr(n.id)[1:-1])  # escaped: the error stays one line
            continue
        if n.id in seen:
            yield IRError("duplicate node id", n.id)
        seen.add(n.id)
        for problem in node_problems(n.op, len(n.inputs), n.attrs):
            yield IRError(problem, n.id)


def node_problems(op_name: str, n_inputs: int, attrs: dict[str, Any]) -> Iterator[str]:
    """What is wrong with a node of op `op_name`, `n_inputs` inputs and `attrs`, before any
    shape: the op, its arity, its attributes' names and values (also `GraphBuilder.add`'s)."""
    if op_name not in OPS:
        yield f"unknown op '{op_name}' (known: {', '.join(sorted(OPS))})"
        return
    op = OPS[op_name]
    if op.arity is None:
        if n_inputs < 2:
            yield f"{op_name} needs at least 2 inputs, got {n_inputs}"
    elif n_inputs != op.arity:
        yield f"{op_name} needs {op.arity} input(s), got {n_inputs}"
    unknown = sorted(set(attrs) - set(op.attrs))
    if unknown:
        yield f"unknown attribute(s) {unknown} for {op_name}"
    yield from op.attr_problems(attrs)  # each value against the op's spec


def _find_cycle(graph: Graph) -> list[str] | None:
    """A cycle as the path [u, ..., u] along inputs, or None. Iterative: a recursive walk ran
    out of stack on a graph of about 1,000 nodes listed in reverse."""
    deps = {n.id: n.inputs for n in graph.nodes}
    state: dict[str, int] = {}  # 1: on the path, 2: done
    for root in deps:
        if root in state:
            continue
        path, todo = [root], [iter(deps[root])]
        state[root] = 1
        while todo:
            u = next(todo[-1], None)
            if u is None:  # every input of path[-1] done
                state[path.pop()] = 2
                todo.pop()
            elif state.get(u) == 1:
                return [*path[path.index(u):], u]
            elif u in deps and u not in state:
                state[u] = 1
                path.append(u)
                todo.append(iter(deps[u]))
    return None


def _said(cycle: list[str], most: int = 8) -> str:
    """A cycle's nodes for a one-line error: all of them, or the first and last few."""
    if len(cycle) <= most:
        return " -> ".join(cycle)
    return (f"{' -> '.join(cycle[:most // 2])} -> ... ({len(cycle) - most:,} more) -> "
            f"{' -> '.join(cycle[-(most // 2):])}")


def _order_problems(graph: Graph, ids: set[str]) -> Iterator[IRError]:
    cycle = _find_cycle(graph)
    if cycle:
        yield IRError(f"cycle: {_said(cycle[::-1])}", cycle[0])
        return  # in a cycle every node is "defined after its use": said once, above
    defined: set[str] = set()
    for n in graph.nodes:
        for i in n.inputs:
            if i in ids and i not in defined:
                yield IRError(f"input '{i}' is defined after its use; nodes must be "
                              "listed in topological order", n.id)
        defined.add(n.id)


def _reference_problems(graph: Graph) -> Iterator[IRError]:
    ids = {n.id for n in graph.nodes}
    for n in graph.nodes:
        for i in n.inputs:
            if i not in ids:
                yield IRError(f"input '{i}' is not a node of the graph (dangling reference)", n.id)
    if len(ids) == len(graph.nodes):  # a duplicate id (said above) makes order and cycles
        yield from _order_problems(graph, ids)  # ambiguous: no phantom problems
    if not graph.outputs:
        yield IRError("graph has no outputs")
    for o in graph.outputs:
        if o not in ids:
            yield IRError(f"output '{o}' is not a node of the graph")
    if not graph.inputs:
        yield IRError("graph has no input node")


def _param_table_problems(graph: Graph) -> Iterator[IRError]:
    owner_of: dict[str, str] = {}
    for n in graph.nodes:
        for role, pname in n.params.items():
            if pname in owner_of:
                yield IRError(f"parameter '{pname}' is owned twice: by '{owner_of[pname]}' and "
                              f"by '{n.id}'", n.id)
                continue
            owner_of[pname] = n.id
            spec = graph.params.get(pname)
            if spec is None:
                yield IRError(f"parameter '{pname}' (role {role}) is missing from the "
                              "parameter table", n.id)
            elif spec.owner != n.id or spec.role != role:
                yield IRError(f"parameter '{pname}' says it is owned by '{spec.owner}' as "
                              f"'{spec.role}', but this node uses it as '{role}'", n.id)
    for pname, spec in graph.params.items():
        if pname != spec.name:
            yield IRError(f"parameter table key '{pname}' differs from its name '{spec.name}'")
        if pname not in owner_of:
            yield IRError(f"parameter '{pname}' is owned by no node (claims owner "
                          f"'{spec.owner}')", spec.owner)
        if problem := check_init(spec.init):
            yield IRError(f"parameter '{pname}': {problem}", spec.owner)


def _check_node_params(n: Node, op: OpDef, ins: list[TensorType], out: TensorType,
                       graph: Graph) -> None:
    expected = op.params(ins, op.full_attrs(n.attrs))
    # a node computes in its output's dtype (an embedding's int64 ids give float64), and so
    # do its parameters: the store holds a graph's parameters in one dtype, float32 where
    # all are, so float32 weights in a float64 graph made a float32 model of float64 inputs
    dtype = "float64" if out.dtype == "int64" else out.dtype
    missing = sorted(set(expected) - set(n.params))
    if missing:
        raise IRError(f"{n.op} is missing parameter(s) for role(s) {missing}", n.id)
    extra = sorted(set(n.params) - set(expected))
    if extra:
        raise IRError(f"{n.op} does not take parameter role(s) {extra}", n.id)
    for role, info in expected.items():
        spec = graph.params.get(n.params[role])
        if spec is None:  # a parameter-table problem, reported there
            continue
        if tuple(spec.shape) != info.shape:
            raise IRError(f"parameter '{spec.name}' has shape {list(spec.shape)}, {n.op} needs "
                          f"{list(info.shape)} for role {role}", n.id)
        if spec.dtype != dtype:
            raise IRError(f"parameter '{spec.name}' is {spec.dtype}, and {n.op} computes in "
                          f"{dtype}: give it dtype {dtype}", n.id)
        if spec.trainable != info.trainable:
            raise IRError(f"parameter '{spec.name}' must be "
                          f"{'trainable' if info.trainable else 'non-trainable state'}", n.id)


def _node_type(n: Node, types: dict[str, TensorType], graph: Graph, batch: int | None,
               check_params: bool) -> TensorType:
    """One node's type from its inputs' types; a failure is an IRError naming the node."""
    op = OPS[n.op]
    ins = [types[i] for i in n.inputs]
    attrs = op.full_attrs(n.attrs)
    try:
        t = op.infer(ins, attrs)
        if check_params:
            _check_node_params(n, op, ins, t, graph)
    except IRError as err:
        if err.node is not None:
            raise
        raise type(err)(err.problem, n.id) from None
    except (TypeError, ValueError, KeyError) as err:
        raise IRError(f"bad attributes for {n.op}: {err}", n.id) from None
    return t.with_batch(batch) if batch is not None and n.op == "input" else t


def infer_types(graph: Graph, batch: int | None = None,
                check_params: bool = True) -> dict[str, TensorType]:
    """The type of every node (batch axis None unless `batch` is given); assumes references
    are valid. Shape errors are re-raised naming the node."""
    # an integer of any kind (a NumPy shape's), never a bool; 0: an empty batch, which the
    # executor takes (an empty split evaluates to no predictions)
    if batch is not None:
        if isinstance(batch, bool) or not hasattr(batch, "__index__") or batch.__index__() < 0:
            raise ConfigError(f"batch: an int >= 0, or None for an unknown batch, got {batch!r}")
        batch = batch.__index__()
    types: dict[str, TensorType] = {}
    for n in graph.nodes:
        types[n.id] = _node_type(n, types, graph, batch, check_params)
    return types


def _inferable(n: Node) -> bool:
    """Whether a node's op rule can run: a known op with the inputs it takes and attributes
    its spec takes."""
    op = OPS.get(n.op)
    return op is not None and (len(n.inputs) >= 2 if op.arity is None
                               else len(n.inputs) == op.arity) and not op.attr_problems(n.attrs)


def _type_problems(graph: Graph, types: dict[str, TensorType]) -> Iterator[IRError]:
    """Shape/dtype problems, filling `types`; a node whose op cannot run (reported as an op
    problem: arity, an attribute's value), and every node it feeds, is left out rather than
    reported twice."""
    for n in graph.nodes:
        if n.id in types or not _inferable(n) or any(i not in types for i in n.inputs):
            continue  # n.id in types: a duplicate id, reported as such
        try:
            types[n.id] = _node_type(n, types, graph, None, True)
        except IRError as err:
            yield err


def _all_problems(graph: Graph, types: dict[str, TensorType]) -> Iterator[IRError]:
    yield from _op_problems(graph)
    references_ok = True
    for err in _reference_problems(graph):
        references_ok = False
        yield err
    yield from _param_table_problems(graph)
    if references_ok:  # type inference walks the inputs: only over sound references
        yield from _type_problems(graph, types)


def problems(graph: Graph) -> list[IRError]:
    """Every problem of the graph, in the order `validate` checks; empty if it is valid."""
    return list(_all_problems(graph, {}))


def validate(graph: Graph) -> dict[str, TensorType]:
    """Check a graph; return node types. Raises IRError naming the node and the problem."""
    types: dict[str, TensorType] = {}
    for err in _all_problems(graph, types):
        raise err
    return types
