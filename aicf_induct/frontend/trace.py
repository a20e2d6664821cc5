"""`trace`: run a model's forward on symbolic tensors and return its IR graph."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from aicf_induct.errors import ConfigError
from aicf_induct.frontend.module import Module
from aicf_induct.frontend.parameter import Parameter
from aicf_induct.frontend.tensor import SymbolicTensor, Tracer
from aicf_induct.ir.graph import Dim, Graph
from aicf_induct.ir.init import init_array
from aicf_induct.ir.validate import validate

InputShape = int | Sequence[Dim]


def input_shape(spec: InputShape, what: str = "in_features") -> list[Dim]:
    """An int n means (batch, n); a sequence is one example's shape, the batch axis (None)
    prepended unless it already starts with None. NumPy integers are ints here (a user's
    `X.shape[1]`); anything else is a ConfigError naming what it got."""
    if _size(spec):
        return [None, int(spec)]  # type: ignore[arg-type]
    if not isinstance(spec, Sequence) or isinstance(spec, str) or \
            not all(d is None or _size(d) for d in spec):
        raise ConfigError(f"{what}: a number of features (an int > 0) or one example's "
                          f"shape (a sequence of them), got {spec!r}")
    shape = [None if d is None else int(d) for d in spec]
    return shape if shape and shape[0] is None else [None, *shape]


def _dtype_name(dtype: Any) -> str:
    """The IR's dtype name ("float32") of a name or a NumPy dtype-like (`np.float32`)."""
    if isinstance(dtype, str):
        return dtype
    try:
        return np.dtype(dtype).name
    except TypeError:
        raise ConfigError(f"dtype: a dtype name such as 'float32', got {dtype!r}") from None


def _size(v: Any) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_) and bool(v > 0)


def _outputs(result: Any) -> list[SymbolicTensor]:
    items = list(result) if isinstance(result, list | tuple) else [result]
    if not items or not all(isinstance(t, SymbolicTensor) for t in items):
        raise ConfigError("forward must return a traced tensor or a tuple/list of them, got "
                          f"{type(result).__name__}")
    return items


def trace_module(model: Module | Callable[..., Any], in_features: InputShape, *,
                 dtype: str = "float64", name: str = "",
                 extra_inputs: Mapping[str, tuple[InputShape, str]] | None = None,
                 ) -> tuple[Graph, Tracer]:
    """Trace and keep the tracer (it maps graph parameters back to `Parameter`s)."""
    tracer = Tracer(name)
    dtype = _dtype_name(dtype)
    if isinstance(model, Module):
        tracer.module_paths = {id(m): path for path, m in model.named_modules()}
        tracer.param_names = {id(p): n for n, p in model.named_state()}
    x = tracer.input(input_shape(in_features), dtype, "x")
    extras = [tracer.input(input_shape(shape, f"extra_inputs['{key}']"), _dtype_name(dt), id=key)
              for key, (shape, dt) in (extra_inputs or {}).items()]
    outs = _outputs(model(x, *extras))
    graph = tracer.builder.output(*[t.id for t in outs])
    validate(graph)
    return graph, tracer


def trace(model: Module | Callable[..., Any], in_features: InputShape, *,
          dtype: str = "float64", name: str = "",
          extra_inputs: Mapping[str, tuple[InputShape, str]] | None = None) -> Graph:
    """The IR of `model`: input node "x" of shape (None, *in_features); outputs are what
    forward returns. `extra_inputs` (id -> (shape, dtype)) become further positional
    arguments of forward, e.g. labels for a loss."""
    return trace_module(model, in_features, dtype=dtype, name=name,
                        extra_inputs=extra_inputs)[0]


def initial_values(graph: Graph, bound: Mapping[str, Parameter],
                   seed: int = 0) -> dict[str, np.ndarray]:
    """A value for every parameter and buffer of `graph`: the bound Parameter's own value if it
    has one, else drawn from its initializer; one generator, in parameter-table order."""
    rng = np.random.default_rng(seed)
    values: dict[str, np.ndarray] = {}
    for pname, spec in graph.params.items():
        p = bound.get(pname)
        if p is not None and p.value is not None:
            values[pname] = np.array(p.value, dtype=spec.dtype)  # a copy, never the original
        else:
            values[pname] = init_array(spec.init, spec.shape, rng, spec.dtype)
    return values


def trace_with_values(model: Module | Callable[..., Any], in_features: InputShape, *,
                      dtype: str = "float64", name: str = "", seed: int = 0,
                      extra_inputs: Mapping[str, tuple[InputShape, str]] | None = None,
                      ) -> tuple[Graph, dict[str, np.ndarray]]:
    """`trace`, plus concrete initial values for every parameter and buffer."""
    graph, tracer = trace_module(model, in_features, dtype=dtype, name=name,
                                 extra_inputs=extra_inputs)
    return graph, initial_values(graph, tracer.bound, seed)
