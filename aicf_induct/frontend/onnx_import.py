"""Import an ONNX model (the `onnx` package) for the ops the IR has.

The ONNX graph is replayed through the native functional API, node by node in its
topological order, as the torch.fx importer replays an fx graph. What each ONNX op becomes:

| ONNX                                        | IR                                      |
|---------------------------------------------|-----------------------------------------|
| Gemm (transA=0, alpha=beta=1); MatMul by a  | linear (weight, bias from the constants)|
| constant, + Add of a constant bias          |                                         |
| MatMul of two computed tensors              | matmul                                  |
| Relu, Tanh, Sigmoid, Gelu, Softmax (last    | the activation                          |
| axis); Sigmoid·x (silu); x·½(1+erf(x/√2))   |                                         |
| (gelu as the TorchScript exporter writes it)|                                         |
| LayerNormalization (last axis)              | layernorm                               |
| BatchNormalization (2-D, inference form)    | batchnorm (ONNX momentum m: 1 - m)      |
| Dropout                                     | dropout (ratio > 0), else nothing       |
| Add of two computed tensors                 | add                                     |
| Reshape, Flatten (axis 1), Transpose        | reshape, transpose (batch axis first)   |
| Concat (not the batch axis)                 | concat                                  |
| Conv (2-D, group 1, symmetric pads),        | conv2d, pool                            |
| MaxPool, AveragePool                        |                                         |
| ReduceMean, ReduceSum (one axis)            | mean, sum                               |
| Gather of a constant table by int64 ids     | embedding                               |
| Unsqueeze(x, -1) · W (+ B)                  | numeric_tokenizer                       |
| the nodes torch exports for one             | attention (checked numerically against  |
| nn.MultiheadAttention (one name scope)      | ONNX's reference evaluator)             |

Constants (initializers, Constant nodes and what is computed from them alone) are folded
with ONNX's reference evaluator; shape arithmetic on the batch size (Shape → Gather → Concat →
Reshape, as exporters write `x.view(x.size(0), -1)`) is followed symbolically. Everything else
is refused with one error naming the first node that has no IR form (its op type and name).
Parameters keep their initializer names when those are plain dotted names (a torch export's
`state_dict` names); a MatMul's transposed weight is named after its bias.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from aicf_induct.errors import AicfError, ConfigError
from aicf_induct.frontend.onnx_importer import Importer, Shared, Unsupported
from aicf_induct.frontend.tensor import SymbolicTensor
from aicf_induct.frontend.trace import initial_values
from aicf_induct.ir.graph import Dim, Graph
from aicf_induct.ir.validate import validate


def _load(source: str | Path | Any) -> Any:
    import onnx

    if not isinstance(source, str | Path):
        return source
    path = Path(source)
    if path.is_dir():
        raise ConfigError(f"{path}: a directory, not an ONNX file")
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    if path.read_bytes()[:1] in (b"{", b"["):  # a JSON file, most likely an IR one already
        raise ConfigError(f"{path}: not an ONNX model (a JSON file: an IR file needs no "
                          "import; `aicf-induct ir show` reads it)")
    try:
        model = onnx.load(str(path))
    except Exception as err:  # protobuf's DecodeError, or a truncated file
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        if "should be stored in" in first:  # a valid model whose external weight file is gone
            where = first.split("should be stored in", 1)[1].split(", but", 1)[0].strip()
            raise ConfigError(f"{path}: its weights are stored in a separate file, {where}, "
                              "which is missing (keep it beside the model)") from None
        raise ConfigError(f"{path}: not an ONNX model ({type(err).__name__}: {first})") \
            from None
    if not model.graph.node:
        raise ConfigError(f"{path}: not an ONNX model (no graph nodes)")
    if not any(o.domain in ("", "ai.onnx") for o in model.opset_import):
        # (a file cut before its last field reads so: its nodes then fail one by one)
        raise ConfigError(f"{path}: the model names no ONNX opset (opset_import): a cut "
                          "file, or one written without it")
    return model


def _graph_input(imp: Importer) -> SymbolicTensor:
    from onnx import TensorProto

    g = imp.model.graph
    inits = {t.name for t in g.initializer}
    inputs = [i for i in g.input if i.name not in inits]
    if len(inputs) != 1:
        raise ConfigError(f"ONNX import supports models with one input, this one has "
                          f"{len(inputs)} ({', '.join(i.name for i in inputs)})")
    inp = inputs[0]
    t = inp.type.tensor_type
    kinds = {TensorProto.FLOAT: imp.dtype, TensorProto.DOUBLE: imp.dtype,
             TensorProto.FLOAT16: imp.dtype, TensorProto.INT64: "int64"}
    if t.elem_type not in kinds:
        raise ConfigError(f"ONNX input '{inp.name}' has element type "
                          f"{TensorProto.DataType.Name(t.elem_type)}; the IR takes float or int64")
    dims = list(t.shape.dim)
    if not dims:
        raise ConfigError(f"ONNX input '{inp.name}' needs a batch axis and known sizes")
    shape: list[Dim] = [None]  # axis 0 is the batch, whatever its declared size
    if dims[0].HasField("dim_value") and dims[0].dim_value > 0:
        imp.batch = int(dims[0].dim_value)  # exported without a dynamic batch axis
    for d in dims[1:]:
        if not d.HasField("dim_value") or d.dim_value <= 0:
            raise ConfigError(f"ONNX input '{inp.name}': every axis but the batch needs a "
                              "fixed size")
        shape.append(int(d.dim_value))
    return imp.tracer.input(shape, kinds[t.elem_type], "x")


# what a converter raises on a node it reads as the spec writes it, and this file does not
# (an attribute or input missing, of another type or length)
MALFORMED = (LookupError, ValueError, TypeError, ArithmeticError)


@contextmanager
def _naming(node: Any, note: str | None = None) -> Iterator[None]:
    """Errors while converting `node` become one ConfigError naming it (and `note`)."""
    name = node_name(node)
    try:
        yield
    except Shared:
        raise
    except Unsupported as err:
        why = f"; {note}" if note else ""
        raise ConfigError(f"unsupported ONNX node '{name}' ({node.op_type}): {err}{why}") \
            from None
    except AicfError as err:
        raise ConfigError(f"ONNX node '{name}' ({node.op_type}): {err}") from None
    except MALFORMED as err:
        raise ConfigError(f"ONNX node '{name}' ({node.op_type}) is malformed: "
                          f"{type(err).__name__}: {err}") from None


def node_name(node: Any) -> str:
    """A node's name, else its first output's, else its op (a node may have neither), on one
    line."""
    name = str(node.name or (node.output[0] if node.output else node.op_type))
    return name if name.isprintable() else repr(name)[1:-1]


def from_onnx(source: str | Path | Any, *, name: str = "",
              dtype: str = "float64") -> tuple[Graph, dict[str, np.ndarray]]:
    """The IR of an ONNX model (a file, or an `onnx.ModelProto`) and its parameter and buffer
    values (`dtype`). Raises ConfigError naming the first node the IR cannot express."""
    from onnx import numpy_helper

    from aicf_induct.frontend import onnx_attention, onnx_ops, onnx_shapes

    model = _load(source)
    imp = Importer(model, dtype, name or (model.graph.name or ""))
    for init in model.graph.initializer:
        imp.env[init.name] = numpy_helper.to_array(init)
    x = _graph_input(imp)
    inits = {t.name for t in model.graph.initializer}
    imp.env[next(i.name for i in model.graph.input if i.name not in inits)] = x
    for i, node in enumerate(imp.nodes):  # constants first: attention regions read them
        if onnx_shapes.reads_constants(imp, node):
            with _naming(node):
                onnx_shapes.fold(imp, node)
            imp.done.add(i)
    regions = onnx_attention.find_regions(imp)
    no_attention: dict[int, str] = {}  # nodes of a region that is no IR attention: why not
    for i, node in enumerate(imp.nodes):
        if i in imp.done:
            continue
        if i in regions:
            imp.current = regions[i].scope
            try:
                onnx_attention.emit(imp, regions[i])
                continue
            # then its nodes one by one (matmul, softmax, ...), a malformed one named so
            except (Unsupported, *MALFORMED) as err:
                no_attention.update(dict.fromkeys(regions[i].members, str(err)))
        imp.current = node_name(node)
        with _naming(node, no_attention.get(i)):
            onnx_ops.convert(imp, i, node)
        imp.done.add(i)
    outs = []
    for o in model.graph.output:
        v = imp.env.get(o.name)
        if not isinstance(v, SymbolicTensor):
            raise ConfigError(f"ONNX output '{o.name}' is not computed from the input")
        outs.append(v.id)
    graph = imp.tracer.builder.output(*outs)
    validate(graph)
    return graph, initial_values(graph, imp.tracer.bound)
