"""Canonical JSON (`"format": "aicf.ir/1"`): the interchange form of a graph.

Keys sorted, no whitespace, nodes in graph order, parameters in table order: serialising a
parsed document gives back the same bytes, and parsing a serialised graph gives back an equal
graph. `from_json` validates and reports problems as one-line `IRError`s naming the node.
"""

from __future__ import annotations

import functools
import json
import os
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from aicf_induct.atomic_file import write_output
from aicf_induct.errors import ConfigError, IRError
from aicf_induct.file_kinds import special_file
from aicf_induct.ir.graph import Graph, Node, ParamSpec
from aicf_induct.ir.ops import OPS
from aicf_induct.ir.validate import problems, validate
from aicf_induct.json_values import json_depth, repeated_key

T = TypeVar("T")
FORMAT = "aicf.ir/1"
MAX_NESTING = 64  # an IR nests ~6 levels; deeper JSON is refused, even past the parser's stack


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


DOCUMENT_FIELDS = ("format", "name", "nodes", "params", "outputs")  # what to_dict writes
NODE_FIELDS = ("id", "op", "inputs", "attrs", "params")
PARAM_FIELDS = ("name", "owner", "role", "shape", "dtype", "init", "trainable")


def _known(obj: dict[str, Any], fields: tuple[str, ...], where: str,
           node: str | None = None) -> None:
    """A field the format does not have is a typo or another format's: named, not ignored."""
    unknown = [k for k in obj if k not in fields]
    if unknown:
        raise IRError(f"{where}: unknown field {unknown[0]!r} (the fields: "
                      f"{', '.join(fields)})", node)


def _node(raw: Any, index: int) -> Node:
    if not isinstance(raw, dict):
        raise IRError(f"nodes[{index}] must be an object")
    where = f"nodes[{index}]"
    _known(raw, NODE_FIELDS, where, raw.get("id") if isinstance(raw.get("id"), str) else None)
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
    op = _field(raw, "op", str, where, nid)
    if op in OPS:  # (an unknown op is the validator's to name)
        attrs = OPS[op].floats_read(attrs)
    return Node(nid, op, tuple(inputs), attrs, dict(params))


def _param(raw: Any, index: int) -> ParamSpec:
    if not isinstance(raw, dict):
        raise IRError(f"params[{index}] must be an object")
    where = f"params[{index}]"
    owner = raw.get("owner") if isinstance(raw.get("owner"), str) else None
    name = _field(raw, "name", str, where, owner)
    where = f"parameter '{name}'"
    _known(raw, PARAM_FIELDS, where, owner)
    shape = _field(raw, "shape", list, where, owner)
    if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):
        raise IRError(f"{where}: shape must be a list of positive ints, got {shape}", owner)
    dtype = raw.get("dtype", "float64")
    if dtype not in ("float32", "float64"):
        raise IRError(f"{where}: dtype must be float32 or float64, got {dtype!r}", owner)
    return ParamSpec(name, _field(raw, "owner", str, where), _field(raw, "role", str, where, owner),
                     tuple(shape), dtype, _field(raw, "init", str, where, owner),
                     _field(raw, "trainable", bool, where, owner))


def _entries(raw: list[Any], build: Callable[[Any, int], T],
             found: list[IRError] | None) -> list[T]:
    """Each entry built; a bad one raises, or with `found` is noted there and left out."""
    out = []
    for i, r in enumerate(raw):
        try:
            out.append(build(r, i))
        except IRError as err:
            if found is None:
                raise
            found.append(err)
    return out


def from_dict(doc: Any, check: bool = True, found: list[IRError] | None = None) -> Graph:
    """The graph of a parsed document. With `found`, problems of single nodes and
    parameters are appended there instead of raised (the graph then lacks those entries);
    a malformed document as a whole still raises."""
    if not isinstance(doc, dict):
        raise IRError("the document must be a JSON object")
    fmt = doc.get("format")
    if fmt != FORMAT:
        raise IRError(f"unsupported format {fmt!r}; expected '{FORMAT}'")
    _known(doc, DOCUMENT_FIELDS, "document")
    nodes = _entries(_field(doc, "nodes", list, "document"), _node, found)
    plist = _entries(_field(doc, "params", list, "document"), _param, found)
    params: dict[str, ParamSpec] = {}
    for p in plist:
        if p.name in params:
            err = IRError(f"parameter '{p.name}' is declared twice", p.owner)
            if found is None:
                raise err
            found.append(err)
        params[p.name] = p
    outputs = _field(doc, "outputs", list, "document")
    if not all(isinstance(o, str) for o in outputs):
        raise IRError("outputs must be node ids (strings)")
    name = _field(doc, "name", str, "document") if "name" in doc else ""  # optional
    graph = Graph(nodes, params, list(outputs), name)
    if check:
        validate(graph)
    return graph


class _Twice(dict[str, Any]):
    """A JSON object that held `key` more than once (the parser would keep the last)."""
    key = ""


def _object(repeats: list[_Twice], pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A parsed object; one that names a key twice is a `_Twice`, noted in `repeats`."""
    key = repeated_key(pairs)
    if key is None:
        return dict(pairs)
    twice = _Twice(pairs)
    twice.key = key
    repeats.append(twice)
    return twice


def _twice_problem(doc: Any) -> IRError | None:
    """The first object of `doc` that held a key twice, named by its path (and its node):
    which of the two values was meant is the writer's to say, not the parser's. Walked only
    when the parse noted one."""
    todo: deque[tuple[Any, str]] = deque([(doc, "")])  # breadth first: the shallowest
    while todo:
        value, path = todo.popleft()
        if isinstance(value, _Twice):
            node = None
            if path.startswith("nodes[") and isinstance(doc.get("nodes"), list):
                entry = doc["nodes"][int(path[6:path.index("]")])]
                node = entry.get("id") if isinstance(entry.get("id"), str) else None
            return IRError(f"key {value.key!r} is given twice in {path or 'the document'}",
                           node)
        if isinstance(value, dict):
            todo += [(v, f"{path}.{k}" if path else k) for k, v in value.items()]
        elif isinstance(value, list):
            todo += [(v, f"{path}[{i}]") for i, v in enumerate(value)]
    return None


def parse(text: str | bytes) -> Any:
    """The JSON document, or a one-line `IRError` (bad syntax, a key given twice in one
    object, or nested so deeply that the parser would run out of stack: no IR comes near
    `MAX_NESTING` levels)."""
    too_deep = IRError(f"not an IR document: JSON nested more than {MAX_NESTING} levels deep")
    repeats: list[_Twice] = []
    try:
        doc = json.loads(text, object_pairs_hook=functools.partial(_object, repeats))
    except json.JSONDecodeError as err:
        raise IRError(f"not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}") \
            from None
    except RecursionError:
        raise too_deep from None
    except ValueError as err:  # e.g. an integer of more digits than Python converts
        raise IRError(f"not valid JSON: {err}") from None
    if json_depth(doc) > MAX_NESTING:  # what later recursive walks (repr, dumps) would meet
        raise too_deep
    if repeats and (twice := _twice_problem(doc)) is not None:
        raise twice
    return doc


def from_json(text: str | bytes, check: bool = True) -> Graph:
    return from_dict(parse(text), check=check)


def problems_in(text: str | bytes) -> list[IRError]:
    """Every problem of an IR document, in order; empty if it is a valid graph. Graph-level
    checks run once every node and parameter entry could be read (else they would report
    the entries left out a second time)."""
    found: list[IRError] = []
    try:
        graph = from_dict(parse(text), check=False, found=found)
    except IRError as err:
        return [*found, err]
    return found or problems(graph)


MAX_IR_BYTES = 64 << 20  # an IR file holds the graph, not its values: megabytes at most


def read_text(path: str) -> str:
    """A file's text. A path that is no readable file (a device, a pipe: `/dev/zero` filled
    memory, a pipe waited forever), or a file past `MAX_IR_BYTES`, is a `ConfigError`; one
    that is not UTF-8 text an `IRError`; both name it."""
    special = special_file(path)
    if special:
        raise ConfigError(f"{path}: not a regular file ({special})")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(MAX_IR_BYTES + 1)
        if len(text) > MAX_IR_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_IR_BYTES >> 20} MiB, more than an IR "
                              "file holds (its values go in a .npz: --values)")
        return text
    except UnicodeDecodeError:
        hint = " (an ONNX model? `aicf-induct ir import` converts one to IR)" \
            if path.lower().endswith(".onnx") else ""
        raise IRError(f"{path} is not a UTF-8 text file{hint}") from None
    except IsADirectoryError:
        raise ConfigError(f"{path} is a folder, not an IR file") from None
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read it ({err.strerror or err})") from None


def load(path: str | os.PathLike[str]) -> Graph:
    """The graph in a canonical IR file; an error names the file."""
    path = os.fspath(path)
    try:
        return from_json(read_text(path))
    except IRError as err:
        if path in err.problem:
            raise
        raise type(err)(f"{err.problem} (in {path})", err.node) from None


def file_text(graph: Graph) -> str:
    """An IR file's text: canonical JSON, indented for people."""
    return to_json(graph, indent=1) + "\n"


def save(graph: Graph, path: str | os.PathLike[str]) -> None:
    """Write atomically (a reader never sees a half-written file); a device or a pipe in
    place (`write_output`)."""
    path = os.fspath(path)
    check_save_path(path)
    text = file_text(graph)
    try:
        write_output(Path(path), lambda tmp: tmp.write_text(text, encoding="utf-8"))
    except OSError as err:
        raise ConfigError(f"{path}: cannot write it ({err.strerror or err})") from None


def check_save_path(path: str) -> None:
    """A ConfigError where `save` could not write `path` for want of a folder to write in
    (else the error would name the temporary file)."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ConfigError(f"{path}: the folder {directory} does not exist")
    if os.path.isdir(path):
        raise ConfigError(f"{path} is a folder, not a file")
