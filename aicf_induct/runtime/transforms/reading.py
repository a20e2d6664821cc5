"""What the transforms ask of a graph while they only read it (finding their sites), kept
for the reading: types, nodes by id, consumers."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

from aicf_induct.ir.graph import Graph, Node, TensorType
from aicf_induct.ir.validate import infer_types

T = TypeVar("T")
# While the transforms only read a graph (finding their sites): what every site asks of it
# (types, nodes by id, consumers), computed once rather than once per site, which made a
# graph's sites quadratic in its size (a 4,000-node IR: 24 s per POST /v1/rewrites).
_READING: ContextVar[tuple[Graph, dict[str, Any]] | None] = ContextVar("_READING",
                                                                       default=None)


@contextlib.contextmanager
def reading(graph: Graph) -> Iterator[None]:
    """Within it `graph` is not changed: `types_of`, `nodes_by_id`, `consumers_of` keep their
    answers (shared: read them, never change them)."""
    token = _READING.set((graph, {}))
    try:
        yield
    finally:
        _READING.reset(token)


def _kept(graph: Graph, key: str, make: Callable[[], T]) -> T:
    now = _READING.get()
    if now is None or now[0] is not graph:
        return make()
    if key not in now[1]:
        now[1][key] = make()
    kept: T = now[1][key]
    return kept


def types_of(graph: Graph) -> dict[str, TensorType]:
    return _kept(graph, "types", lambda: infer_types(graph, check_params=False))


def nodes_by_id(graph: Graph) -> dict[str, Node]:
    return _kept(graph, "nodes", graph.node_map)


def consumers_of(graph: Graph) -> dict[str, list[Node]]:
    return _kept(graph, "consumers", graph.consumers)
