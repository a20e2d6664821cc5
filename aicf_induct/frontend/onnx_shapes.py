"""ONNX constants and shapes: folding nodes that read constants only (ONNX's reference
evaluator computes them), shape arithmetic on the batch size (`Dims`), and the converters of
the shape ops (Reshape, Flatten, Transpose, Concat, Shape, Cast). See onnx_import."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from aicf_induct.frontend import functional as F
from aicf_induct.frontend.onnx_importer import Dims, Importer, Unsupported, Value, attrs_of


def fold(imp: Importer, node: Any) -> None:
    """Compute a node whose operands are all constants with ONNX's reference evaluator."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    names = [n for n in node.input if n]
    vals = [np.asarray(imp.env[n]) for n in names]  # fold() is called on constants only
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype),
                                           v.shape) for n, v in zip(names, vals, strict=True)]
    outs = [o for o in node.output if o]
    graph = helper.make_graph([node], "fold", inputs,
                              [helper.make_empty_tensor_value_info(o) for o in outs])
    model = helper.make_model(graph, opset_imports=list(imp.model.opset_import))
    model.ir_version = imp.model.ir_version
    try:
        results = ReferenceEvaluator(model).run(None, dict(zip(names, vals, strict=True)))
    except Exception as err:  # the evaluator raises whatever its op implementation raises
        raise Unsupported(f"cannot compute it from its constants ({type(err).__name__}: "
                          f"{err})") from None
    for o, v in zip(outs, results, strict=True):
        imp.env[o] = np.asarray(v)


def reads_constants(imp: Importer, node: Any) -> bool:
    """Whether every operand of `node` is a constant (Constant nodes have none)."""
    return all(not n or isinstance(imp.env.get(n), np.ndarray) for n in node.input)


def out(imp: Importer, node: Any, v: Value) -> None:
    if any(o for o in node.output[1:] if imp.consumers.get(o) or o in imp.graph_outputs):
        raise Unsupported(f"only its first output has an IR form; '{node.output[1]}' is read")
    imp.env[node.output[0]] = v


def int_list(imp: Importer, node: Any, attr: str, input_index: int) -> list[int] | None:
    """An int list given as an attribute (older opsets) or as a constant input (newer)."""
    a = attrs_of(node)
    if attr in a:
        return [int(v) for v in a[attr]]
    if len(node.input) > input_index and node.input[input_index]:
        return [int(v) for v in np.ravel(imp.const(node.input[input_index], attr))]
    return None


def reshape(imp: Importer, i: int, node: Any) -> None:
    x = imp.tensor(node.input[0])
    s = imp.value(node.input[1])
    if isinstance(s, np.ndarray):
        target: list[int | None] = [int(v) for v in s.ravel()]
    elif isinstance(s, Dims) and not s.scalar:
        target = list(s.dims)
    else:
        raise Unsupported("its shape must be a constant or computed from the input's shape")
    zero_copies = not attrs_of(node).get("allowzero", 0)
    rest = [x.shape[k + 1] if v == 0 and zero_copies and k + 1 < x.ndim else v
            for k, v in enumerate(target[1:])]
    first = target[0]
    known = math.prod(int(d or 0) for d in x.shape[1:])
    keeps_batch = first is None or (first == 0 and zero_copies) or first == imp.batch or (
        first == -1 and -1 not in rest and None not in rest
        and math.prod(int(v or 0) for v in rest) == known)
    if not keeps_batch or any(v is None for v in rest) or not rest:
        raise Unsupported(f"reshape to {target} does not keep the batch axis first")
    out(imp, node, F.reshape(x, [int(v or 0) for v in rest]))


def flatten(imp: Importer, i: int, node: Any) -> None:
    x = imp.tensor(node.input[0])
    if int(attrs_of(node).get("axis", 1)) % max(x.ndim, 1) != 1:
        raise Unsupported("only Flatten with axis=1 keeps the batch axis")
    out(imp, node, F.flatten(x))


def transpose(imp: Importer, i: int, node: Any) -> None:
    x = imp.tensor(node.input[0])
    perm = [int(p) for p in attrs_of(node).get("perm", range(x.ndim - 1, -1, -1))]
    if perm[0] != 0:
        # torch's dynamo exporter (torch.onnx.export's default; nodes named node_*) writes
        # nn.MultiheadAttention with the tokens first; the TorchScript one keeps the batch
        dynamo = imp.model.producer_name == "pytorch" and node.name.startswith("node_")
        raise Unsupported(f"perm {perm} moves the batch axis" + (
            " (torch's dynamo exporter writes attention so: export with "
            "torch.onnx.export(..., dynamo=False))" if dynamo else ""))
    out(imp, node, F.permute(x, perm))


def concat(imp: Importer, i: int, node: Any) -> None:
    xs = [imp.tensor(n, "every input") for n in node.input]
    axis = int(attrs_of(node)["axis"])
    if axis % xs[0].ndim == 0:
        raise Unsupported("concatenates along the batch axis")
    out(imp, node, F.concat(xs, axis))


def shape(imp: Importer, i: int, node: Any) -> None:
    x = imp.tensor(node.input[0])
    a = attrs_of(node)
    dims = x.shape[int(a.get("start", 0)):a.get("end", None)]
    out(imp, node, Dims(tuple(dims)).concrete())


def cast(imp: Importer, i: int, node: Any) -> None:
    from onnx import TensorProto

    x = imp.tensor(node.input[0])
    if attrs_of(node)["to"] not in (TensorProto.FLOAT, TensorProto.DOUBLE) or \
            x.dtype == "int64":
        raise Unsupported("only a float-to-float cast (which the IR ignores) has an IR form")
    out(imp, node, x)


def shape_op(imp: Importer, node: Any, ins: list[Value]) -> None:
    """Shape arithmetic on a vector that holds the batch size (None)."""
    def vec(v: Value) -> tuple[int | None, ...]:
        if isinstance(v, Dims):
            return v.dims
        if isinstance(v, np.ndarray):
            return tuple(int(u) for u in v.ravel())
        raise Unsupported("mixes a shape with a tensor")

    op, a = node.op_type, attrs_of(node)
    src = ins[0]
    if op in ("Cast", "Identity") and isinstance(src, Dims):
        out = src
    elif op == "Gather" and isinstance(src, Dims) and isinstance(ins[1], np.ndarray):
        idx = ins[1]
        out = Dims(tuple(src.dims[int(k)] for k in idx.ravel()), scalar=idx.ndim == 0)
    elif op == "Unsqueeze" and isinstance(src, Dims) and src.scalar:
        out = Dims(src.dims)
    elif op == "Squeeze" and isinstance(src, Dims) and len(src.dims) == 1:
        out = Dims(src.dims, scalar=True)
    elif op == "Concat" and int(a.get("axis", 0)) == 0:
        out = Dims(tuple(d for v in ins for d in vec(v)))
    elif op == "Slice" and isinstance(src, Dims) and all(isinstance(v, np.ndarray | None)
                                                         for v in ins[1:]):
        start, end = (int(np.ravel(np.asarray(v))[0]) for v in ins[1:3])
        step = int(np.ravel(np.asarray(ins[4]))[0]) if len(ins) > 4 and ins[4] is not None \
            else 1
        out = Dims(src.dims[start:end:step])
    else:
        raise Unsupported("computes with the batch size, which the IR leaves open")
    imp.env[node.output[0]] = out.concrete()
