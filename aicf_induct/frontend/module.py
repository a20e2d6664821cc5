"""`Module` and the layers: a PyTorch-like way to write a model that traces to the IR.

Assigning a `Parameter`, `Buffer` or `Module` to an attribute registers it, in assignment
order, under the attribute's name; paths join names with dots as PyTorch does
(`blocks.0.linear.weight`), so a native model and the same torch model share their names.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import numpy as np

from aicf_induct.errors import ConfigError
from aicf_induct.frontend import functional as F
from aicf_induct.frontend.parameter import Buffer, Parameter
from aicf_induct.frontend.tensor import SymbolicTensor


def _find_tracer(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    for a in (*args, *kwargs.values()):
        if isinstance(a, SymbolicTensor):
            return a.tracer
        if isinstance(a, list | tuple):
            for b in a:
                if isinstance(b, SymbolicTensor):
                    return b.tracer
    return None


class Module:
    """Base of every model. `forward` runs on symbolic tensors when traced."""

    # A leaf makes one IR node, named by the module's path (see tensor.py).
    leaf: ClassVar[bool] = False

    def __init__(self) -> None:
        object.__setattr__(self, "_state", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def _registries(self) -> tuple[OrderedDict[str, Parameter], OrderedDict[str, Module]]:
        # Tolerate subclasses that forget super().__init__().
        if "_state" not in self.__dict__:
            Module.__init__(self)
        return self.__dict__["_state"], self.__dict__["_modules"]

    def __setattr__(self, name: str, value: Any) -> None:
        state, modules = self._registries()
        state.pop(name, None)
        modules.pop(name, None)
        if isinstance(value, Parameter):
            state[name] = value
        elif isinstance(value, Module):
            modules[name] = value
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        state, modules = self._registries()
        state.pop(name, None)
        modules.pop(name, None)
        object.__delattr__(self, name)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} defines no forward")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tracer = _find_tracer(args, kwargs)
        if tracer is None:
            return self.forward(*args, **kwargs)
        with tracer.scope(self, type(self).leaf):
            return self.forward(*args, **kwargs)

    # -- the tree ----------------------------------------------------------------------------
    def named_children(self) -> Iterator[tuple[str, Module]]:
        yield from self._registries()[1].items()

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """Every module once (first path wins for a shared one), the root first as ''."""
        seen: set[int] = set()

        def walk(m: Module, path: str) -> Iterator[tuple[str, Module]]:
            if id(m) in seen:
                return
            seen.add(id(m))
            yield path, m
            for name, child in m.named_children():
                yield from walk(child, f"{path}.{name}" if path else name)

        yield from walk(self, prefix)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_state(self) -> Iterator[tuple[str, Parameter]]:
        """Parameters and buffers, in registration order, each once."""
        seen: set[int] = set()
        for path, m in self.named_modules():
            for name, p in m._registries()[0].items():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{path}.{name}" if path else name), p

    def named_parameters(self) -> Iterator[tuple[str, Parameter]]:
        return ((n, p) for n, p in self.named_state() if p.trainable)

    def parameters(self) -> Iterator[Parameter]:
        return (p for _, p in self.named_parameters())

    def named_buffers(self) -> Iterator[tuple[str, Parameter]]:
        return ((n, p) for n, p in self.named_state() if not p.trainable)

    def load_state_dict(self, values: Mapping[str, np.ndarray], strict: bool = True) -> None:
        """Set concrete values (e.g. a torch state_dict converted to NumPy)."""
        state = dict(self.named_state())
        unknown = sorted(set(values) - set(state))
        if strict and unknown:
            raise ConfigError(f"unknown parameter name(s) {unknown}")
        for name, v in values.items():
            if name in state:
                p = state[name]
                try:
                    arr = np.array(v, dtype=np.float64)
                except (TypeError, ValueError) as err:
                    raise ConfigError(f"'{name}': not an array of numbers ({err})") from None
                if arr.shape != p.shape:
                    raise ConfigError(f"'{name}' has shape {list(p.shape)}, got {list(arr.shape)}")
                p.value = arr

    # -- flags ------------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Sets `training` on every module. The IR holds both modes; this only affects
        functional calls that take `training=self.training`, as in torch."""
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        kids = [f"  ({n}): " + repr(m).replace("\n", "\n  ") for n, m in self.named_children()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        return head + ("\n" + "\n".join(kids) + "\n)" if kids else ")")


class Sequential(Module):
    """Children called in order; names '0', '1', ... or the keys of one mapping argument."""

    def __init__(self, *mods: Module | Mapping[str, Module]) -> None:
        super().__init__()
        first = mods[0] if len(mods) == 1 else None
        named = first.items() if isinstance(first, Mapping) else \
            ((str(i), m) for i, m in enumerate(mods))
        for name, m in named:
            if not isinstance(m, Module):
                raise ConfigError(f"Sequential takes Modules, got {type(m).__name__}")
            setattr(self, name, m)

    def append(self, m: Module) -> Sequential:
        setattr(self, str(len(self)), m)
        return self

    def __len__(self) -> int:
        return len(self._registries()[1])

    def __iter__(self) -> Iterator[Module]:
        return self.children()

    def __getitem__(self, i: int) -> Module:
        return list(self.children())[i]

    def forward(self, x: Any) -> Any:
        for m in self.children():
            x = m(x)
        return x


def positive_sizes(**sizes: int) -> None:
    """A layer's sizes, each an int > 0, checked where it is built (named as its argument)."""
    for name, v in sizes.items():
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ConfigError(f"{name} must be an int > 0, got {v!r}")


class Linear(Module):
    leaf = True

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        positive_sizes(in_features=in_features, out_features=out_features)
        self.in_features, self.out_features = in_features, out_features
        # init None: the op's default, U(±1/sqrt(in)) as PyTorch's nn.Linear.
        self.weight = Parameter((out_features, in_features))
        self.bias = Parameter((out_features,)) if bias else None

    def forward(self, x: SymbolicTensor) -> SymbolicTensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class ReLU(Module):
    leaf = True

    def forward(self, x: SymbolicTensor) -> SymbolicTensor:
        return F.relu(x)


class GELU(Module):
    leaf = True

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in F.GELU_APPROXIMATIONS:
            raise ConfigError(f"GELU approximate must be one of "
                              f"{', '.join(F.GELU_APPROXIMATIONS)}, got {approximate!r}")
        self.approximate = approximate

    def forward(self, x: SymbolicTensor) -> SymbolicTensor:
        return F.gelu(x, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Tanh(Module):
    leaf = True

    def forward(self, x: SymbolicTensor) -> SymbolicTensor:
        return F.tanh(x)


class SiLU(Module):
    leaf = True

    def forward(self, x: SymbolicTensor) -> SymbolicTensor:
        return F.silu(x)


class Sigmoid(Module):
    leaf = True

    def forward(self, x: SymbolicTensor) -> SymbolicTensor:
        return F.sigmoid(x)


class Softmax(Module):
    leaf = True

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: SymbolicTensor) -> SymbolicTensor:
        return F.softmax(x, self.dim)


class LayerNorm(Module):
    leaf = True

    def __init__(self, normalized_shape: int, eps: float = 1e-5,
                 elementwise_affine: bool = True) -> None:
        super().__init__()
        self.normalized_shape, self.eps = normalized_shape, eps
        self.weight = Parameter((normalized_shape,), "ones") if elementwise_affine else None
        self.bias = Parameter((normalized_shape,), "zeros") if elementwise_affine else None

    def forward(self, x: SymbolicTensor) -> SymbolicTensor:
        return F.layer_norm(x, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, affine={self.weight is not None}"


class BatchNorm1d(Module):
    leaf = True

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = True) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.weight = Parameter((num_features,), "ones") if affine else None
        self.bias = Parameter((num_features,), "zeros") if affine else None
        self.running_mean = Buffer((num_features,), "zeros")
        self.running_var = Buffer((num_features,), "ones")

    def forward(self, x: SymbolicTensor) -> SymbolicTensor:
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            momentum=self.momentum, eps=self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


class Dropout(Module):
    """Always a node: the runtime makes it the identity in eval mode."""

    leaf = True

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ConfigError(f"Dropout p must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: SymbolicTensor) -> SymbolicTensor:
        return F.dropout(x, self.p, training=True)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class Identity(Module):
    """No node: passes its input through."""

    def forward(self, x: Any) -> Any:
        return x


class Residual(Module):
    """x + block(x); the add is a functional node (id `add`, `add_1`, ...)."""

    def __init__(self, block: Module) -> None:
        super().__init__()
        self.block = block

    def forward(self, x: SymbolicTensor) -> SymbolicTensor:
        return x + self.block(x)


class Concat(Module):
    """Runs each branch on the input and concatenates their outputs along the features."""

    def __init__(self, *branches: Module) -> None:
        super().__init__()
        self.branches = Sequential(*branches)

    def forward(self, x: SymbolicTensor) -> SymbolicTensor:
        return F.concat([b(x) for b in self.branches])
