"""Canonical JSON (`"format": "aicf.ir/1"`): the interchange form of a graph.

Keys sorted, no whitespace, nodes in graph order, parameters in table order: serialising a
parsed document gives back the same bytes, and parsing a serialised graph gives back an equal
graph. `from_json` validates and reports problems as one-line `IRError`s naming the node.
"""

from __future__ import annotations

import json
from typing import Any

from aicf_induct.errors import IRError
from aicf_induct.ir.graph import Graph, Node, ParamSpec
from aicf_induct.ir.validate import validate

FORMAT = "aicf.ir/1"


def to_dict(graph: Graph) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "name": graph.name,
        "nodes": [{"id": n.id, "op": n.op, "inputs": list(n.inputs), "attrs": n.attrs,
                   "params": n.params} for n in graph.nodes],
        "params": [{"name": p.name, "owner": p.owner, "role": p.role, "shape": list(p.shape),
                    "dtype": p.dtype, "init": p.init, "trainable": p.trainable}
                   for p in graph.params.values()],
        "outputs": list(graph.outputs),
    }


def to_json(graph: Graph, indent: int | None = None) -> str:
    """Canonical JSON text; `indent` only for human-facing files (parsing ignores it)."""
    seps = (",", ":") if indent is None else (",", ": ")
    return json.dumps(to_dict(graph), sort_keys=True, separators=seps, indent=indent,
                      allow_nan=False)


def _field(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str,
           node: str | None = None) -> Any:
    if key not in obj:
        raise IRError(f"{where} has no '{key}'", node)
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise IRError(f"{where}: '{key}' must be {names}, got {type(value).__name__}", node)
    return value


def _node(raw: Any, index: int) -> Node:
    if not isinstance(raw, dict):
        raise IRError(f"nodes[{index}] must be an object")
    where = f"nodes[{index}]"
    nid = _field(raw, "id", str, where)
    inputs = _field(raw, "inputs", list, where, nid)
    if not all(isinstance(i, str) for i in inputs):
        raise IRError("inputs must be node ids (strings)", nid)
    params = raw.get("params", {})
    if not isinstance(params, dict) or not all(isinstance(v, str) for v in params.values()):
        raise IRError("params must map roles to parameter names", nid)
    attrs = raw.get("attrs", {})
    if not isinstance(attrs, dict):
        raise IRError("attrs must be an object", nid)
    return Node(nid, _field(raw, "op", str, where, nid), tuple(inputs), attrs, dict(params))


def _param(raw: Any, index: int) -> ParamSpec:
    if not isinstance(raw, dict):
        raise IRError(f"params[{index}] must be an object")
    where = f"params[{index}]"
    owner = raw.get("owner") if isinstance(raw.get("owner"), str) else None
    name = _field(raw, "name", str, where, owner)
    where = f"parameter '{name}'"
    shape = _field(raw, "shape", list, where, owner)
    if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):
        raise IRError(f"{where}: shape must be a list of positive ints, got {shape}", owner)
    dtype = raw.get("dtype", "float64")
    if dtype not in ("float32", "float64"):
        raise IRError(f"{where}: dtype must be float32 or float64, got {dtype!r}", owner)
    return ParamSpec(name, _field(raw, "owner", str, where), _field(raw, "role", str, where, owner),
                     tuple(shape), dtype, _field(raw, "init", str, where, owner),
                     _field(raw, "trainable", bool, where, owner))


def from_dict(doc: Any, check: bool = True) -> Graph:
    if not isinstance(doc, dict):
        raise IRError("the document must be a JSON object")
    fmt = doc.get("format")
    if fmt != FORMAT:
        raise IRError(f"unsupported format {fmt!r}; expected '{FORMAT}'")
    nodes = [_node(r, i) for i, r in enumerate(_field(doc, "nodes", list, "document"))]
    plist = [_param(r, i) for i, r in enumerate(_field(doc, "params", list, "document"))]
    params: dict[str, ParamSpec] = {}
    for p in plist:
        if p.name in params:
            raise IRError(f"parameter '{p.name}' is declared twice", p.owner)
        params[p.name] = p
    outputs = _field(doc, "outputs", list, "document")
    if not all(isinstance(o, str) for o in outputs):
        raise IRError("outputs must be node ids (strings)")
    name = doc.get("name", "")
    graph = Graph(nodes, params, list(outputs), name if isinstance(name, str) else "")
    if check:
        validate(graph)
    return graph


def from_json(text: str | bytes, check: bool = True) -> Graph:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise IRError(f"not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}") \
            from None
    return from_dict(doc, check=check)


def load(path: str) -> Graph:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError:
        raise IRError(f"{path} is not a UTF-8 text file") from None
    return from_json(text)


def save(graph: Graph, path: str) -> None:
    """Write atomically: a reader never sees a half-written file."""
    import os
    import tempfile

    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(to_json(graph, indent=1) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
