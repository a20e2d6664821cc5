"""Symbolic tensors and the tracer that records what is done with them.

Tracing runs a model's `forward` on `SymbolicTensor`s. Every functional op appends one IR node
through the tracer's `GraphBuilder` and returns a new symbolic tensor for the node's output.

Naming, shared with the torch importer so both give the same IR for the same model: a node
made by a *leaf* module (Linear, ReLU, LayerNorm, ...) takes the module's path as its id
(`blocks.0.linear`); any other node (a functional call, the add of a residual) takes a fresh
id from its op name (`add`, `add_1`). Parameters take the names of their module path
(`blocks.0.linear.weight`), as PyTorch's `state_dict` names them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aicf_induct.errors import ConfigError, ShapeError
from aicf_induct.frontend.parameter import Parameter
from aicf_induct.ir.builder import GraphBuilder
from aicf_induct.ir.graph import Dim, TensorType

if TYPE_CHECKING:
    from aicf_induct.ir.graph import Graph


@dataclass
class _Scope:
    path: str | None  # None: a module outside the traced tree
    leaf: bool


@dataclass
class Tracer:
    """Records nodes for one trace. `module_paths` and `param_names` are keyed by `id()`."""

    name: str = ""
    builder: GraphBuilder = field(init=False)
    module_paths: dict[int, str] = field(default_factory=dict)
    param_names: dict[int, str] = field(default_factory=dict)
    bound: dict[str, Parameter] = field(default_factory=dict)  # graph param name -> Parameter
    _used: dict[int, str] = field(default_factory=dict)  # id(Parameter) -> owner node
    _scopes: list[_Scope] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.builder = GraphBuilder(self.name)

    @property
    def graph(self) -> Graph:
        return self.builder.graph

    def input(self, shape: Sequence[Dim], dtype: str = "float64",
              id: str = "x") -> SymbolicTensor:
        nid = self.builder.input(list(shape), dtype, id=id)
        return SymbolicTensor(nid, self.builder.types[nid], self)

    @contextmanager
    def scope(self, module: object, leaf: bool) -> Iterator[None]:
        """While a module's forward runs: leaf modules name their node after their path."""
        self._scopes.append(_Scope(self.module_paths.get(id(module)), leaf))
        try:
            yield
        finally:
            self._scopes.pop()

    @contextmanager
    def path_scope(self, path: str, leaf: bool = True) -> Iterator[None]:
        """As `scope`, for a path given directly (the torch importer's call_module)."""
        self._scopes.append(_Scope(path, leaf))
        try:
            yield
        finally:
            self._scopes.pop()

    def next_node_id(self) -> str | None:
        """The id the next node takes from its leaf module's path; None: one from its op."""
        if self._scopes and self._scopes[-1].leaf:
            return self._scopes[-1].path or None  # the root module has path "": use the op
        return None

    def emit(self, op: str, inputs: Sequence[SymbolicTensor], attrs: Mapping[str, Any],
             params: Mapping[str, Parameter] | None = None) -> SymbolicTensor:
        """Append one node; `params` are the Parameters it owns, by role."""
        for t in inputs:
            if t.tracer is not self:
                raise ConfigError(f"tensor '{t.id}' belongs to another trace")
        params = params or {}
        names: dict[str, str] = {}
        for role, p in params.items():
            if id(p) in self._used:
                raise ConfigError(f"parameter {self.param_names.get(id(p), role)!r} is used "
                                  f"again after node '{self._used[id(p)]}'; in the IR each "
                                  "parameter has one owner node (no weight sharing)")
            if id(p) in self.param_names:
                names[role] = self.param_names[id(p)]
        nid = self.builder.add(op, [t.id for t in inputs], dict(attrs), id=self.next_node_id(),
                               param_names=names)
        node = self.graph.nodes[-1]
        if set(node.params) != set(params):
            raise ShapeError(f"{op} owns parameters {sorted(node.params)}, "
                             f"got {sorted(params)}", nid)
        for role, p in params.items():
            spec = self.graph.params[node.params[role]]
            if p.shape != spec.shape:
                raise ShapeError(f"{role} has shape {list(p.shape)}, {op} needs "
                                 f"{list(spec.shape)}", nid)
            if p.trainable != spec.trainable:
                kind = "a Parameter" if spec.trainable else "a Buffer (non-trainable)"
                raise ShapeError(f"{role} must be {kind}", nid)
            if p.init is not None:
                spec.init = p.init
            self._used[id(p)] = nid
            self.bound[spec.name] = p
        return SymbolicTensor(nid, self.builder.types[nid], self)


@dataclass(frozen=True, eq=False)
class SymbolicTensor:
    """The output of one traced node: its id, its type (batch axis None) and the tracer."""

    id: str
    type: TensorType
    tracer: Tracer

    @property
    def shape(self) -> tuple[Dim, ...]:
        return self.type.shape

    @property
    def dtype(self) -> str:
        return self.type.dtype

    @property
    def ndim(self) -> int:
        return len(self.type.shape)

    def dim(self) -> int:
        return self.ndim

    def __repr__(self) -> str:
        return f"SymbolicTensor({self.id!r}, {self.type})"

    # -- ops with an IR node -----------------------------------------------------------------
    def __add__(self, other: object) -> SymbolicTensor:
        from aicf_induct.frontend import functional as F

        if not isinstance(other, SymbolicTensor):
            raise self._unsupported(f"+ {other!r}")
        return F.add(self, other)

    def __radd__(self, other: object) -> SymbolicTensor:
        if isinstance(other, int | float) and other == 0:
            return self  # lets sum([a, b, c]) trace as a chain of adds
        raise self._unsupported(f"{other!r} +")

    def add(self, other: SymbolicTensor) -> SymbolicTensor:
        return self + other

    def relu(self) -> SymbolicTensor:
        from aicf_induct.frontend import functional as F

        return F.relu(self)

    def tanh(self) -> SymbolicTensor:
        from aicf_induct.frontend import functional as F

        return F.tanh(self)

    def sigmoid(self) -> SymbolicTensor:
        from aicf_induct.frontend import functional as F

        return F.sigmoid(self)

    def softmax(self, dim: int = -1) -> SymbolicTensor:
        from aicf_induct.frontend import functional as F

        return F.softmax(self, dim)

    def __matmul__(self, other: object) -> SymbolicTensor:
        from aicf_induct.frontend import functional as F

        if not isinstance(other, SymbolicTensor):
            raise self._unsupported(f"@ {type(other).__name__}")
        return F.matmul(self, other)

    def reshape(self, *shape: int) -> SymbolicTensor:
        """Per-example shape: the first entry is the batch axis and must be -1 or omitted."""
        from aicf_induct.frontend import functional as F

        dims = list(shape[0]) if len(shape) == 1 and isinstance(shape[0], list | tuple) \
            else list(shape)
        if len(dims) < 2 or dims[0] != -1:
            raise ConfigError(f"reshape of traced tensor '{self.id}' must keep the batch axis "
                              f"first as -1, got {dims}")
        return F.reshape(self, dims[1:])

    view = reshape

    def flatten(self, start_dim: int = 1, end_dim: int = -1) -> SymbolicTensor:
        from aicf_induct.frontend import functional as F

        return F.flatten(self, start_dim, end_dim)

    def transpose(self, dim0: int, dim1: int) -> SymbolicTensor:
        from aicf_induct.frontend import functional as F

        return F.transpose(self, dim0, dim1)

    def permute(self, *dims: int) -> SymbolicTensor:
        from aicf_induct.frontend import functional as F

        return F.permute(self, dims)

    def mean(self, dim: int, keepdim: bool = False) -> SymbolicTensor:
        from aicf_induct.frontend import functional as F

        return F.mean(self, dim, keepdim)

    def sum(self, dim: int, keepdim: bool = False) -> SymbolicTensor:
        from aicf_induct.frontend import functional as F

        return F.sum(self, dim, keepdim)

    # -- what the IR cannot express: fail at trace time, naming the operation -------------
    def _unsupported(self, what: str) -> ConfigError:
        return ConfigError(f"'{what}' on traced tensor '{self.id}' has no IR op (supported: "
                           "+ and @ of two traced tensors, linear, conv, pooling, attention, "
                           "embeddings, activations, norms, dropout, concat, reshape, "
                           "transpose, mean, sum, losses)")

    def __mul__(self, other: object) -> SymbolicTensor:
        raise self._unsupported("*")

    __rmul__ = __mul__

    def __sub__(self, other: object) -> SymbolicTensor:
        raise self._unsupported("-")

    __rsub__ = __sub__

    def __truediv__(self, other: object) -> SymbolicTensor:
        raise self._unsupported("/")

    __rtruediv__ = __floordiv__ = __rfloordiv__ = __truediv__

    def __pow__(self, other: object) -> SymbolicTensor:
        raise self._unsupported("**")

    def __neg__(self) -> SymbolicTensor:
        raise self._unsupported("unary -")

    def __getitem__(self, index: object) -> SymbolicTensor:
        raise self._unsupported("[...] (indexing)")

    __iter__ = None  # no iteration through __getitem__: `for`/unpacking stay a TypeError

    def __bool__(self) -> bool:
        raise ConfigError(f"traced tensor '{self.id}' has no value: control flow cannot depend "
                          "on it")
