"""Model spec strings, as the CLI takes them: `mlp:depth=2,width=64,act=gelu,norm=layernorm`.

`parse_model_spec` gives an `MLPSpec`; `build_mlp` the native module; `mlp_graph` its IR.
A hidden block is `linear → norm → act` (norm_place=pre) or `linear → act → norm` (post),
then dropout when its rate is > 0; the output head is one linear layer.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from aicf_induct.errors import ConfigError
from aicf_induct.frontend.module import (
    GELU,
    BatchNorm1d,
    Dropout,
    LayerNorm,
    Linear,
    Module,
    ReLU,
    Residual,
    Sequential,
    Sigmoid,
    SiLU,
    Tanh,
)
from aicf_induct.frontend.trace import trace
from aicf_induct.ir.graph import Graph
from aicf_induct.ir.ops import ACTIVATION_NAMES, ACTIVATION_TABLE

ACTS = ACTIVATION_NAMES  # relu, gelu, gelu_tanh (tanh approximation), ...: the op table's
NORMS = ("none", "layernorm", "batchnorm")
NORM_PLACES = ("pre", "post")
PROFILES = ("constant", "funnel", "bottleneck", "expand")
MIN_WIDTH = 8  # halving profiles stop here (or at `width`, if that is smaller)
MAX_DEPTH = 64
# Ceilings that keep a typo (width=100000000) a one-line error rather than an allocation of
# petabytes: the widest layer, and the trainable parameters a model may have (float64
# parameters, gradients and Adam's two moments: 32 bytes each, 3.2 GB at the ceiling).
MAX_WIDTH = 65_536
MAX_PARAMS = 100_000_000
# and for any graph (an IR file), one node's values per example (times the batch, in memory)
MAX_VALUES_PER_EXAMPLE = 1 << 20

_CHOICES = {"act": ACTS, "norm": NORMS, "norm_place": NORM_PLACES, "profile": PROFILES}


@dataclass(frozen=True)
class MLPSpec:
    """An MLP's structure; `hidden_widths()` gives each hidden layer's width."""

    depth: int = 2  # hidden layers (0: a linear model, just the head)
    width: int = 64  # widest hidden layer; every hidden layer for profile=constant
    act: str = "relu"  # one of ACTS
    norm: str = "none"  # none | layernorm | batchnorm, in every hidden block
    norm_place: str = "pre"  # pre: linear → norm → act; post: linear → act → norm
    residual: bool = False  # wrap each hidden block whose input and output widths match
    dropout: float = 0.0  # rate of the dropout ending each hidden block (0: no dropout node)
    # How widths vary over hidden layers i = 0..depth-1, with h(k) = max(width >> k, floor),
    # floor = min(width, MIN_WIDTH):
    #   constant: width everywhere; funnel: h(i) (halving towards the output);
    #   expand: h(depth-1-i) (doubling up to width); bottleneck: h(min(i, depth-1-i))
    #   (halving towards the middle and back).
    profile: str = "constant"

    def __post_init__(self) -> None:
        if isinstance(self.dropout, int) and not isinstance(self.dropout, bool):
            object.__setattr__(self, "dropout", float(self.dropout))  # dropout=0 means 0.0
        for key, kind in (("depth", int), ("width", int), ("residual", bool)):
            v = getattr(self, key)
            if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
                raise ConfigError(f"model key '{key}' must be {kind.__name__}, got {v!r}")
        if not 0 <= self.depth <= MAX_DEPTH:
            raise ConfigError(f"model key 'depth' must be in 0..{MAX_DEPTH}, got {self.depth}")
        if self.width < 1:
            raise ConfigError(f"model key 'width' must be >= 1, got {self.width}")
        if self.width > MAX_WIDTH:
            raise ConfigError(f"model key 'width' must be <= {MAX_WIDTH} (the ceiling), got "
                              f"{self.width}")
        if not isinstance(self.dropout, float) or not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"model key 'dropout' must be a float in [0, 1), "
                              f"got {self.dropout!r}")
        for key, valid in _CHOICES.items():
            v = getattr(self, key)
            if v not in valid:
                raise ConfigError(f"bad value {v!r} for model key '{key}' "
                                  f"(valid: {', '.join(valid)})")

    def hidden_widths(self) -> list[int]:
        floor = min(self.width, MIN_WIDTH)

        def h(k: int) -> int:
            return max(self.width >> k, floor)

        n = self.depth
        if self.profile == "funnel":
            return [h(i) for i in range(n)]
        if self.profile == "expand":
            return [h(n - 1 - i) for i in range(n)]
        if self.profile == "bottleneck":
            return [h(min(i, n - 1 - i)) for i in range(n)]
        return [self.width] * n

    def param_count(self, in_features: int, out_features: int) -> int:
        """Trainable parameters of the MLP for these shapes, counted without building it."""
        widths = [in_features, *self.hidden_widths(), out_features]
        linear = sum(a * b + b for a, b in itertools.pairwise(widths))
        norms = 2 * sum(self.hidden_widths()) if self.norm != "none" else 0
        return linear + norms

    def to_string(self) -> str:
        """Every key, in field order; `parse_model_spec` reads it back to an equal spec."""
        return "mlp:" + ",".join(f"{f.name}={_format(getattr(self, f.name))}"
                                 for f in dataclasses.fields(self))

    def __str__(self) -> str:
        return self.to_string()


def _format(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v) if isinstance(v, float) else str(v)


_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def _convert(key: str, raw: str, kind: Any) -> object:
    try:
        if kind is bool:
            if raw.lower() in _TRUE + _FALSE:
                return raw.lower() in _TRUE
            raise ValueError
        if kind is int:
            return int(raw)
        if kind is float:
            return float(raw)
    except ValueError:
        name = {bool: "true or false", int: "an integer", float: "a number"}[kind]
        raise ConfigError(f"bad value '{raw}' for model key '{key}': expected {name}") from None
    return raw


def parse_model_spec(text: str) -> MLPSpec:
    """`mlp` or `mlp:key=value,...`; errors name the bad key or value and list the valid ones."""
    if not isinstance(text, str):
        raise TypeError(f"a model spec is text such as 'mlp:depth=2,width=64', got "
                        f"{type(text).__name__}")
    kind, _, rest = text.strip().partition(":")
    if kind.strip() != "mlp":
        raise ConfigError(f"unknown model kind '{kind.strip()}' (valid: mlp)")
    fields = {f.name: f for f in dataclasses.fields(MLPSpec)}
    hints = {"depth": int, "width": int, "residual": bool, "dropout": float}
    values: dict[str, object] = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, raw = (s.strip() for s in item.partition("="))
        if key not in fields:
            raise ConfigError(f"unknown model key '{key}' (valid: {', '.join(fields)})")
        if not eq or not raw:
            raise ConfigError(f"model key '{key}' needs a value, as in '{key}=...'")
        if key in values:
            raise ConfigError(f"model key '{key}' given twice")
        values[key] = _convert(key, raw, hints.get(key, str))
    return MLPSpec(**values)  # type: ignore[arg-type]


class MLP(Module):
    """`blocks` (a Sequential of hidden blocks, some wrapped in Residual), then `head`."""

    def __init__(self, spec: MLPSpec, in_features: int, out_features: int) -> None:
        super().__init__()
        self.spec = spec
        blocks: list[Module] = []
        prev = in_features
        for w in spec.hidden_widths():
            block = _block(spec, prev, w)
            blocks.append(Residual(block) if spec.residual and prev == w else block)
            prev = w
        self.blocks = Sequential(*blocks)
        self.head = Linear(prev, out_features)

    def forward(self, x: Any) -> Any:
        return self.head(self.blocks(x))


# the module that traces to each activation op; its attrs are the module's arguments
_ACT_MODULES: dict[str, type[Module]] = {"relu": ReLU, "gelu": GELU, "tanh": Tanh,
                                         "silu": SiLU, "sigmoid": Sigmoid}


def _act(name: str) -> Module:
    entry = ACTIVATION_TABLE[name]
    return _ACT_MODULES[entry.op](**entry.attrs)


def _block(spec: MLPSpec, n_in: int, n_out: int) -> Sequential:
    parts: OrderedDict[str, Module] = OrderedDict(linear=Linear(n_in, n_out))
    norm: Module | None = None
    if spec.norm == "layernorm":
        norm = LayerNorm(n_out)
    elif spec.norm == "batchnorm":
        norm = BatchNorm1d(n_out)
    order = ("norm", "act") if spec.norm_place == "pre" else ("act", "norm")
    for part in order:
        if part == "act":
            parts["act"] = _act(spec.act)
        elif norm is not None:
            parts["norm"] = norm
    if spec.dropout > 0.0:
        parts["dropout"] = Dropout(spec.dropout)
    return Sequential(parts)


def build_mlp(spec: MLPSpec, in_features: int, out_features: int) -> MLP:
    spec_given(spec, (MLPSpec,))
    if in_features < 1 or out_features < 1:
        raise ConfigError(f"an MLP needs in_features and out_features >= 1, "
                          f"got {in_features} and {out_features}")
    count = spec.param_count(in_features, out_features)
    if count > MAX_PARAMS:
        raise ConfigError(f"model {spec} has {count:,} parameters for {in_features} inputs "
                          f"and {out_features} outputs; the ceiling is {MAX_PARAMS:,}")
    return MLP(spec, in_features, out_features)


def spec_given(spec: object, kinds: tuple[type, ...]) -> None:
    """A TypeError for a spec given as its text (or anything else): builders take it parsed."""
    if not isinstance(spec, kinds):
        how = ("parse_model_spec('mlp:depth=2')" if kinds == (MLPSpec,) else
               "aicf_induct.frontend.families.parse_spec('ftt:depth=2')")
        raise TypeError(f"spec: a parsed model spec ({' or '.join(k.__name__ for k in kinds)}; "
                        f"{how} makes one from its text), got {type(spec).__name__} "
                        f"{spec!r:.60}")


def mlp_graph(spec: MLPSpec, in_features: int, out_features: int, *,
              dtype: str = "float64") -> Graph:
    """The IR of `build_mlp(spec, ...)`, named by the spec string."""
    return trace(build_mlp(spec, in_features, out_features), in_features, dtype=dtype,
                 name=spec.to_string())
