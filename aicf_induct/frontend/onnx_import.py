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

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aicf_induct.errors import AicfError, ConfigError
from aicf_induct.frontend.parameter import Buffer, Parameter
from aicf_induct.frontend.tensor import SymbolicTensor, Tracer
from aicf_induct.frontend.trace import initial_values
from aicf_induct.ir.graph import Dim, Graph
from aicf_induct.ir.validate import validate

NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")


class Unsupported(ConfigError):
    """A node with no IR form; the importer adds the node's op type and name."""


@dataclass(frozen=True)
class Dims:
    """A shape vector computed from the input's shape: sizes, None for the batch size."""

    dims: tuple[Dim, ...]
    scalar: bool = False  # one size (a 0-d tensor), not a vector

    def concrete(self) -> Dims | np.ndarray:
        if any(d is None for d in self.dims):
            return self
        arr = np.array(self.dims, dtype=np.int64)
        return arr.reshape(()) if self.scalar else arr


Value = SymbolicTensor | np.ndarray | Dims | None


class Importer:
    def __init__(self, model: Any, dtype: str, name: str) -> None:
        self.model, self.dtype = model, dtype
        self.tracer = Tracer(name)
        self.nodes = list(model.graph.node)
        self.env: dict[str, Value] = {}
        self.done: set[int] = set()
        self.keep: list[Parameter] = []  # the tracer maps by id(): keep the objects alive
        self.used: set[str] = set()
        self.graph_outputs = {o.name for o in model.graph.output}
        self.batch: int | None = None  # the input's declared batch size, if it is fixed
        self.consumers: dict[str, list[int]] = defaultdict(list)
        for i, node in enumerate(self.nodes):
            for inp in node.input:
                self.consumers[inp].append(i)

    # -- values ----------------------------------------------------------------------------
    def value(self, name: str) -> Value:
        if not name:
            return None
        if name not in self.env:
            raise Unsupported(f"input '{name}' is computed by no earlier node")
        return self.env[name]

    def const(self, name: str, what: str) -> np.ndarray:
        v = self.value(name)
        if not isinstance(v, np.ndarray):
            raise Unsupported(f"{what} must be a constant (an initializer)")
        return v

    def tensor(self, name: str, what: str = "its input") -> SymbolicTensor:
        v = self.value(name)
        if not isinstance(v, SymbolicTensor):
            raise Unsupported(f"{what} must be computed from the model's input")
        return v

    def sole_consumer(self, name: str) -> tuple[int, Any] | None:
        """The one node reading `name`, if exactly one does and it is no graph output."""
        users = self.consumers.get(name, [])
        if len(users) != 1 or name in self.graph_outputs or users[0] in self.done:
            return None
        return users[0], self.nodes[users[0]]

    # -- parameters and node names ---------------------------------------------------------
    def param(self, value: np.ndarray, name: str | None, buffer: bool = False) -> Parameter:
        p = (Buffer if buffer else Parameter)(value=np.asarray(value, dtype=np.float64))
        if name and set(name) <= NAME_CHARS and name[0] not in "._" and name not in self.used:
            self.tracer.param_names[id(p)] = name
            self.used.add(name)
        self.keep.append(p)
        return p

    @contextmanager
    def named(self, path: str | None) -> Iterator[None]:
        """Name the next node `path` (a module path taken from a parameter's name)."""
        ok = path and set(path) <= NAME_CHARS and path[0] not in "._"
        with self.tracer.path_scope(path) if ok else nullcontext():  # type: ignore[arg-type]
            yield


def owner_path(param_name: str | None) -> str | None:
    """'blocks.0.linear.weight' -> 'blocks.0.linear': the node a parameter's name implies."""
    if not param_name or "." not in param_name:
        return None
    return param_name.rsplit(".", 1)[0]


def attrs_of(node: Any) -> dict[str, Any]:
    from onnx import helper

    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out


def _load(source: str | Path | Any) -> Any:
    import onnx

    if not isinstance(source, str | Path):
        return source
    path = Path(source)
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    try:
        model = onnx.load(str(path))
    except Exception as err:  # protobuf's DecodeError, or a truncated file
        raise ConfigError(f"{path}: not an ONNX model ({type(err).__name__}: {err})") from None
    if not model.graph.node:
        raise ConfigError(f"{path}: not an ONNX model (no graph nodes)")
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


@contextmanager
def _naming(node: Any, note: str | None = None) -> Iterator[None]:
    """Errors while converting `node` become one ConfigError naming it (and `note`)."""
    name = node.name or node.output[0]
    try:
        yield
    except Unsupported as err:
        why = f"; {note}" if note else ""
        raise ConfigError(f"unsupported ONNX node '{name}' ({node.op_type}): {err}{why}") \
            from None
    except AicfError as err:
        raise ConfigError(f"ONNX node '{name}' ({node.op_type}): {err}") from None


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
            try:
                onnx_attention.emit(imp, regions[i])
                continue
            except Unsupported as err:  # then its nodes one by one (matmul, softmax, ...)
                no_attention.update(dict.fromkeys(regions[i].members, str(err)))
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
