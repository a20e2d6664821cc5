"""The IR: graphs of nodes from one closed op table, canonical JSON, fingerprint, patterns."""

from aicf_induct.ir.builder import GraphBuilder
from aicf_induct.ir.canonical import FORMAT, from_dict, from_json, load, save, to_dict, to_json
from aicf_induct.ir.fingerprint import fingerprint
from aicf_induct.ir.graph import Graph, Node, ParamSpec, TensorType
from aicf_induct.ir.ops import OPS, OpContext, OpDef, get_op
from aicf_induct.ir.patterns import patterns
from aicf_induct.ir.validate import infer_types, validate

__all__ = [
    "FORMAT", "OPS", "Graph", "GraphBuilder", "Node", "OpContext", "OpDef", "ParamSpec",
    "TensorType", "fingerprint", "from_dict", "from_json", "get_op", "infer_types", "load",
    "patterns", "save", "to_dict", "to_json", "validate",
]
