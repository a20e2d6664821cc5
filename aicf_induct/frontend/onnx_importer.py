"""The ONNX importer's state (`Importer`: the model's nodes, the values computed so far, the
parameters made) and what every converter shares with it: `Unsupported`, `Dims` (a shape
vector computed from the batch size), `Value`, `attrs_of`, `owner_path`. `onnx_import`
drives the replay; the converters (`onnx_ops`, `onnx_shapes`, `onnx_attention`) read and
write the importer's state through these, so none of them imports the driver."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from aicf_induct.errors import ConfigError
from aicf_induct.frontend.parameter import Buffer, Parameter
from aicf_induct.frontend.tensor import SymbolicTensor, Tracer
from aicf_induct.ir.graph import Dim

NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")


class Unsupported(ConfigError):
    """A node with no IR form; the importer adds the node's op type and name."""


class Shared(ConfigError):
    """One initializer made the parameter of two nodes; the message names both nodes."""


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
        self.owners: dict[str, str] = {}  # initializer name -> the ONNX node it is a param of
        self.current = ""  # the ONNX node (or attention scope) being converted
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
    def param(self, value: np.ndarray, name: str | None, buffer: bool = False,
              source: str | None = None) -> Parameter:
        """A parameter made from the constant named `source` (default `name`), named `name`."""
        source = source or name
        if source and source in self.owners:  # two copies would untie what the model ties
            raise Shared(f"initializer '{source}' is a parameter of ONNX nodes "
                         f"'{self.owners[source]}' and '{self.current}' (tied or reused "
                         "weights, or equal ones an optimizer merged); in the IR each "
                         "parameter has one owner node (no weight sharing)")
        if source:
            self.owners[source] = self.current
        value = np.asarray(value, dtype=np.float64)
        self._check_finite(value, source)
        p = (Buffer if buffer else Parameter)(value=value)
        if name and set(name) <= NAME_CHARS and name[0] not in "._" and name not in self.used:
            self.tracer.param_names[id(p)] = name
            self.used.add(name)
        self.keep.append(p)
        return p

    def _check_finite(self, value: np.ndarray, source: str | None) -> None:
        """NaN or infinity in a weight (or a value past the IR's float type) would be
        written to --values, which training refuses: refused here, naming the initializer."""
        with np.errstate(over="ignore"):  # 1e39 as float32 is inf: what is checked
            bad = ~np.isfinite(value.astype(self.dtype))
        if not bad.any():
            return
        what = f"initializer '{source}'" if source else "a constant computed from " \
            "initializers"
        n_nan, n_inf = int(np.isnan(value).sum()), int(np.isinf(value).sum())
        kinds = [f"{n_nan} NaN"] if n_nan else []
        if n_inf:
            kinds.append(f"{n_inf} infinite")
        past = int(bad.sum()) - n_nan - n_inf
        if past:
            kinds.append(f"{past} beyond {self.dtype}'s range")
        raise ConfigError(f"{what} holds {' and '.join(kinds)} of its {value.size} values; "
                          "IR parameters must be finite")

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
