"""ONNX nodes to IR nodes, one converter per op type (the table is in onnx_import; the
shape ops' converters are in onnx_shapes).

A converter reads its operands from the importer's environment (a `SymbolicTensor` computed
from the input, a NumPy constant, or `Dims`: a shape vector holding the batch size), emits IR
nodes through the functional API and stores its results. Converters that recognise a pattern
(MatMul + Add, the exporter's GELU, a numeric tokenizer) consume the nodes that follow.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from aicf_induct.frontend import functional as F
from aicf_induct.frontend import onnx_shapes as S
from aicf_induct.frontend.onnx_importer import Dims, Importer, Unsupported, attrs_of, owner_path
from aicf_induct.frontend.onnx_shapes import fold, int_list, out, shape_op
from aicf_induct.frontend.tensor import SymbolicTensor

Converter = Callable[[Importer, int, Any], None]


def convert(imp: Importer, i: int, node: Any) -> None:
    ins = [imp.value(n) for n in node.input]
    if any(isinstance(v, SymbolicTensor) for v in ins):
        fn = TENSOR_OPS.get(node.op_type)
        if fn is None:
            raise Unsupported("the IR has no such op" + _hint(imp, node.op_type))
        fn(imp, i, node)
    elif any(isinstance(v, Dims) for v in ins):
        shape_op(imp, node, ins)
    else:
        fold(imp, node)


# -- activations --------------------------------------------------------------------------

def _unary(fn: Callable[[SymbolicTensor], SymbolicTensor]) -> Converter:
    def conv(imp: Importer, i: int, node: Any) -> None:
        out(imp, node, fn(imp.tensor(node.input[0])))
    return conv


def _gelu(imp: Importer, i: int, node: Any) -> None:
    out(imp, node, F.gelu(imp.tensor(node.input[0]), attrs_of(node).get("approximate", "none")))


def _softmax(imp: Importer, i: int, node: Any) -> None:
    x = imp.tensor(node.input[0])
    default = -1 if _opset(imp) >= 13 else 1
    axis = int(attrs_of(node).get("axis", default)) % x.ndim
    if axis != x.ndim - 1:
        raise Unsupported(f"softmax over axis {axis} of a rank-{x.ndim} tensor; the IR's is "
                          "over the last axis")
    out(imp, node, F.softmax(x, -1))


def _f32(v: Any) -> float:
    """A float attribute as written before ONNX stored it in float32 (1e-05, not 9.99e-06)."""
    return float(f"{float(v):.7g}")


def _opset(imp: Importer) -> int:
    return max((o.version for o in imp.model.opset_import if o.domain in ("", "ai.onnx")),
               default=1)


def _follow(imp: Importer, name: str, ops: list[str]) -> list[tuple[int, Any]] | None:
    """The chain of sole consumers from `name` with these op types, or None."""
    chain = []
    for op in ops:
        nxt = imp.sole_consumer(name)
        if nxt is None or nxt[1].op_type != op:
            return None
        chain.append(nxt)
        name = nxt[1].output[0]
    return chain


def _other(node: Any, name: str) -> str | None:
    """A binary node's operand that is not `name` (None if both or neither are)."""
    a, b = node.input[0], node.input[1]
    return b if a == name and b != name else a if b == name and a != name else None


def _is_const(imp: Importer, name: str | None, value: float) -> bool:
    """Whether `name` is a one-value constant equal to `value` as closely as its type holds
    it (a float16 export's √2 is 1.4140625)."""
    v = imp.env.get(name) if name else None
    if not (isinstance(v, np.ndarray) and v.size == 1):
        return False
    tol = 4 * float(np.finfo(v.dtype).eps) if np.issubdtype(v.dtype, np.floating) else 0.0
    return math.isclose(float(v.ravel()[0]), value, rel_tol=max(1e-6, tol))


def _div(imp: Importer, i: int, node: Any) -> None:
    """x / √2 → Erf → + 1 → x · → · ½: GELU as the TorchScript exporter writes it."""
    x = imp.tensor(node.input[0])
    chain = _follow(imp, node.output[0], ["Erf", "Add", "Mul", "Mul"])
    ok = chain is not None and _is_const(imp, node.input[1], math.sqrt(2.0))
    if chain is not None and ok:
        (_, erf), (_, add), (_, mul), (_, half) = chain
        ok = (_is_const(imp, _other(add, erf.output[0]), 1.0)
              and _other(mul, add.output[0]) == node.input[0]
              and _is_const(imp, _other(half, mul.output[0]), 0.5))
    if not ok or chain is None:
        raise Unsupported("Div has no IR op (only x / sqrt(2) inside an erf GELU)")
    imp.done.update(k for k, _ in chain)
    imp.env[chain[-1][1].output[0]] = F.gelu(x)


def _sigmoid(imp: Importer, i: int, node: Any) -> None:
    x = imp.tensor(node.input[0])
    nxt = imp.sole_consumer(node.output[0])
    if nxt is not None and nxt[1].op_type == "Mul" and \
            _other(nxt[1], node.output[0]) == node.input[0]:  # x * sigmoid(x)
        imp.done.add(nxt[0])
        imp.env[nxt[1].output[0]] = F.silu(x)
        return
    out(imp, node, F.sigmoid(x))


# -- layers -------------------------------------------------------------------------------

def _linear(imp: Importer, x: SymbolicTensor, weight: np.ndarray, bias: np.ndarray | None,
            wname: str | None, bname: str | None, wsource: str) -> SymbolicTensor:
    if weight.ndim != 2:
        raise Unsupported(f"its weight must be 2-D, got shape {list(weight.shape)}")
    if bias is not None:
        if not _is_bias(bias, weight.shape[0]):
            raise Unsupported(f"its bias (shape {list(bias.shape)}) must be one value per "
                              f"output ({weight.shape[0]}), the same for every row")
        bias = bias.reshape(-1)
    path = owner_path(wname) or owner_path(bname)
    if wname is None and bname and bname.endswith(".bias"):
        wname = bname[: -len("bias")] + "weight"
    with imp.named(path):
        return F.linear(x, imp.param(weight, wname, source=wsource),
                        None if bias is None else imp.param(bias, bname))


def _is_bias(v: np.ndarray, n_out: int) -> bool:
    """Whether `v` adds one value per output, the same to every row: shape (n,), (1, n),
    (1, 1, n)... (a (n, 1) one adds a value per row: no bias, though its size is n's)."""
    return v.ndim >= 1 and v.shape[-1] == n_out and all(d == 1 for d in v.shape[:-1])


def _gemm(imp: Importer, i: int, node: Any) -> None:
    a = attrs_of(node)
    x = imp.tensor(node.input[0], "its A operand")
    w = imp.const(node.input[1], "its B operand")
    c = imp.const(node.input[2], "its C operand") if len(node.input) > 2 and node.input[2] \
        else None
    if a.get("transA", 0) or a.get("alpha", 1.0) != 1.0 or \
            (c is not None and a.get("beta", 1.0) != 1.0):
        raise Unsupported("only Gemm with transA=0, alpha=1 and beta=1 is a linear layer")
    if x.ndim != 2:
        raise Unsupported(f"Gemm's A must be 2-D, got rank {x.ndim}")
    weight = w if a.get("transB", 0) else w.T
    wname = node.input[1] if a.get("transB", 0) else None  # a transposed copy is renamed
    out(imp, node, _linear(imp, x, weight, c, wname,
                            node.input[2] if c is not None else None, node.input[1]))


def _matmul(imp: Importer, i: int, node: Any) -> None:
    a, b = imp.value(node.input[0]), imp.value(node.input[1])
    if isinstance(a, SymbolicTensor) and isinstance(b, SymbolicTensor):
        out(imp, node, F.matmul(a, b))
        return
    if not (isinstance(a, SymbolicTensor) and isinstance(b, np.ndarray) and b.ndim == 2):
        raise Unsupported("MatMul needs the model's input on the left and a 2-D constant or "
                          "another computed tensor on the right")
    bias, bname, target = None, None, node
    nxt = imp.sole_consumer(node.output[0])
    if nxt is not None and nxt[1].op_type == "Add":
        other = _other(nxt[1], node.output[0])
        v = imp.env.get(other) if other else None
        if isinstance(v, np.ndarray) and _is_bias(v, b.shape[1]):
            bias, bname, target = v, other, nxt[1]
            imp.done.add(nxt[0])
    out(imp, target, _linear(imp, a, b.T, bias, None, bname, node.input[1]))


def _add(imp: Importer, i: int, node: Any) -> None:
    a, b = imp.value(node.input[0]), imp.value(node.input[1])
    if not (isinstance(a, SymbolicTensor) and isinstance(b, SymbolicTensor)):
        raise Unsupported("Add of a constant has no IR op (only a MatMul's bias or a "
                          "tokenizer's)")
    out(imp, node, F.add(a, b))


def _unsqueeze(imp: Importer, i: int, node: Any) -> None:
    """x (N, F) → Unsqueeze(-1) → · W (F, d) [→ + B (F, d)]: a numeric tokenizer."""
    x = imp.tensor(node.input[0])
    axes = int_list(imp, node, "axes", 1)
    mul = imp.sole_consumer(node.output[0])
    w_name = _other(mul[1], node.output[0]) if mul and mul[1].op_type == "Mul" else None
    w = imp.env.get(w_name) if w_name else None
    if x.ndim != 2 or axes not in ([-1], [2]) or mul is None or not isinstance(w, np.ndarray):
        raise Unsupported("Unsqueeze has no IR op (only x[..., None] * W of a numeric "
                          "tokenizer)")
    w = w.reshape(w.shape[-2:]) if w.ndim == 3 and w.shape[0] == 1 else w
    if w.ndim != 2 or w.shape[0] != x.shape[-1]:
        raise Unsupported(f"Unsqueeze has no IR op (only x[..., None] * W of a numeric "
                          f"tokenizer, W of shape ({x.shape[-1]}, d); got {list(w.shape)})")
    imp.done.add(mul[0])
    target, bias, b_name = mul[1], None, None
    add = imp.sole_consumer(mul[1].output[0])
    if add is not None and add[1].op_type == "Add":
        b_name = _other(add[1], mul[1].output[0])
        b = imp.env.get(b_name) if b_name else None
        if isinstance(b, np.ndarray) and b.size == w.size:
            bias, target = b.reshape(w.shape), add[1]
            imp.done.add(add[0])
    with imp.named(owner_path(w_name)):
        y = F.numeric_tokenizer(x, imp.param(w, w_name),
                                None if bias is None else imp.param(bias, b_name))
    out(imp, target, y)


def _layernorm(imp: Importer, i: int, node: Any) -> None:
    x = imp.tensor(node.input[0])
    a = attrs_of(node)
    if int(a.get("axis", -1)) % x.ndim != x.ndim - 1:
        raise Unsupported("only a layer norm over the last axis has an IR op")
    scale = imp.const(node.input[1], "its scale")
    b_name = node.input[2] if len(node.input) > 2 and node.input[2] else None
    bias = imp.const(b_name, "its bias") if b_name else np.zeros_like(scale)
    with imp.named(owner_path(node.input[1])):
        y = F.layer_norm(x, imp.param(scale, node.input[1]), imp.param(bias, b_name),
                         _f32(a.get("epsilon", 1e-5)))
    out(imp, node, y)


def _batchnorm(imp: Importer, i: int, node: Any) -> None:
    x = imp.tensor(node.input[0])
    a = attrs_of(node)
    if a.get("training_mode", 0):
        raise Unsupported("training_mode=1: only the inference form has an IR op (export the "
                          "model in eval mode)")
    if x.ndim != 2:
        raise Unsupported(f"only a batch norm over (batch, features) has an IR op (got rank "
                          f"{x.ndim})")
    momentum = float(a.get("momentum", 0.9))  # ONNX's: the weight of the running value
    if not 0.0 <= momentum <= 1.0:  # said as written (the IR's is 1 - it)
        raise Unsupported(f"momentum must be in [0, 1], got {momentum:g}")
    scale, bias, mean, var = (imp.const(n, w) for n, w in zip(
        node.input[1:5], ("its scale", "its bias", "its mean", "its variance"), strict=True))
    names = list(node.input[1:5])
    with imp.named(owner_path(names[0])):
        y = F.batch_norm(x, imp.param(mean, names[2], buffer=True),  # type: ignore[arg-type]
                         imp.param(var, names[3], buffer=True),  # type: ignore[arg-type]
                         imp.param(scale, names[0]), imp.param(bias, names[1]),
                         momentum=_f32(1.0 - _f32(momentum)),
                         eps=_f32(a.get("epsilon", 1e-5)))
    out(imp, node, y)


def _dropout(imp: Importer, i: int, node: Any) -> None:
    x = imp.tensor(node.input[0])
    ratio = attrs_of(node).get("ratio", 0.5)
    if len(node.input) > 1 and node.input[1]:
        ratio = float(imp.const(node.input[1], "its ratio"))
    out(imp, node, F.dropout(x, float(ratio)) if ratio > 0 else x)


def _pairs(a: dict[str, Any], key: str, default: list[int]) -> list[int]:
    v = [int(u) for u in a.get(key, default)]
    if len(v) != 2:
        raise Unsupported(f"'{key}' must have 2 entries (2-D), got {v}")
    return v


def _pads(a: dict[str, Any]) -> list[int]:
    if a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise Unsupported(f"auto_pad={a['auto_pad']} has no IR form; give explicit pads")
    pads = [int(u) for u in a.get("pads", [0, 0, 0, 0])]
    if len(pads) != 4 or pads[:2] != pads[2:]:
        raise Unsupported(f"pads {pads} are not symmetric (begin = end on each axis)")
    return pads[:2]


def _conv(imp: Importer, i: int, node: Any) -> None:
    x = imp.tensor(node.input[0])
    w = imp.const(node.input[1], "its weight")
    b_name = node.input[2] if len(node.input) > 2 and node.input[2] else None
    a = attrs_of(node)
    if x.ndim != 4 or w.ndim != 4 or a.get("group", 1) != 1 or \
            any(d != 1 for d in a.get("dilations", [1, 1])):
        raise Unsupported("only 2-D convolution with group=1 and dilation 1 has an IR op")
    pads, stride = _pads(a), _pairs(a, "strides", [1, 1])
    with imp.named(owner_path(node.input[1])):
        y = F.conv2d(x, imp.param(w, node.input[1]),
                     imp.param(imp.const(b_name, "its bias"), b_name) if b_name else None,
                     stride, pads)
    out(imp, node, y)


def _pool(imp: Importer, i: int, node: Any) -> None:
    x = imp.tensor(node.input[0])
    a = attrs_of(node)
    if a.get("ceil_mode", 0) or any(d != 1 for d in a.get("dilations", [1, 1])):
        raise Unsupported("only ceil_mode=0 and dilation 1 have an IR form")
    kernel = _pairs(a, "kernel_shape", [])
    stride, pads = _pairs(a, "strides", [1, 1]), _pads(a)
    avg = node.op_type == "AveragePool"
    if avg and any(pads) and not a.get("count_include_pad", 0):
        raise Unsupported("the IR's average pool counts the padding (count_include_pad=1)")
    pool = F.avg_pool2d if avg else F.max_pool2d
    out(imp, node, pool(x, kernel, stride, pads))


def _global_avg(imp: Importer, i: int, node: Any) -> None:
    x = imp.tensor(node.input[0])
    if x.ndim != 4:
        raise Unsupported(f"expects (N, C, H, W), got rank {x.ndim}")
    hw = [int(d or 0) for d in x.shape[2:]]
    out(imp, node, F.avg_pool2d(x, hw, hw, 0))


def _reduce(imp: Importer, i: int, node: Any) -> None:
    x = imp.tensor(node.input[0])
    axes = int_list(imp, node, "axes", 1)
    if axes is None or len(axes) != 1:
        raise Unsupported(f"reduces over axes {axes}; the IR reduces over one axis")
    keep = bool(attrs_of(node).get("keepdims", 1))
    reduce = F.mean if node.op_type == "ReduceMean" else F.sum
    out(imp, node, reduce(x, axes[0], keep))


def _gather(imp: Importer, i: int, node: Any) -> None:
    table, ids = imp.value(node.input[0]), imp.value(node.input[1])
    if not (isinstance(table, np.ndarray) and table.ndim == 2 and isinstance(ids, SymbolicTensor)
            and ids.dtype == "int64" and int(attrs_of(node).get("axis", 0)) == 0):
        raise Unsupported("only rows of a constant 2-D table picked by int64 ids (an "
                          "embedding) have an IR op")
    with imp.named(owner_path(node.input[0])):
        out(imp, node, F.embedding(ids, imp.param(table, node.input[0])))


# below opset 17, exporters write a layer norm as ReduceMean, Sub, Pow, Sqrt, Div, Mul, Add
_LAYERNORM = (" (a layer norm exported below opset 17 is such nodes: export with "
              "opset_version >= 17 to get one LayerNormalization node)")
# below opset 20 (Gelu's first), a tanh GELU is Mul, Pow, Add, Tanh: x·½(1+tanh(√(2/π)(x+…)))
_GELU_TANH = (" (a tanh GELU exported below opset 20 is such nodes: export with "
              "opset_version >= 20 to get one Gelu node)")


def _hint(imp: Importer, op_type: str) -> str:
    """Why an op the IR lacks may be there: a layer the exporter wrote out at this opset."""
    opset, ops = _opset(imp), {n.op_type for n in imp.nodes}
    # only where the model holds the rest of such a layer (x - tanh(x) is no layer norm)
    if op_type in ("Sub", "Pow", "Sqrt") and opset < 17 and "ReduceMean" in ops:
        return _LAYERNORM
    if op_type in ("Mul", "Pow") and opset < 20 and "Tanh" in ops and any(
            _is_const(imp, name, 0.044715) for name in list(imp.env)):  # the GELU's cubic term
        return _GELU_TANH
    return ""

TENSOR_OPS: dict[str, Converter] = {
    "Identity": lambda imp, i, node: out(imp, node, imp.value(node.input[0])),
    "Relu": _unary(F.relu), "Tanh": _unary(F.tanh), "Sigmoid": _sigmoid, "Gelu": _gelu,
    "Softmax": _softmax, "Div": _div,
    "Gemm": _gemm, "MatMul": _matmul, "Add": _add, "Unsqueeze": _unsqueeze,
    "LayerNormalization": _layernorm, "BatchNormalization": _batchnorm, "Dropout": _dropout,
    "Conv": _conv, "MaxPool": _pool, "AveragePool": _pool, "GlobalAveragePool": _global_avg,
    "ReduceMean": _reduce, "ReduceSum": _reduce, "Gather": _gather,
    "Reshape": S.reshape, "Flatten": S.flatten, "Transpose": S.transpose, "Concat": S.concat,
    "Shape": S.shape, "Cast": S.cast,
}
