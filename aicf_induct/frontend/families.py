"""Spec strings of the families beyond MLPs, as `parse_model_spec` reads MLPs:

    ftt:depth=2,d_token=32,heads=4,attention_dropout=0.1,ffn_mult=2,act=relu
    cnn:stages=2,channels=16,kernel=3,pool=max,act=relu
    resmlp:blocks=2,d=64,d_hidden=128,dropout1=0.1,dropout2=0.0,norm=batchnorm,act=relu

`ftt` is an FT-Transformer (Gorishniy et al. 2021): a numeric tokenizer, `depth` pre-norm
transformer blocks (x + attn(ln(x)), then x + ffn(ln(x))), a final layernorm, the mean over
tokens (the paper reads a [CLS] token instead; the IR has no parameter-only token), the
activation and a linear head. `cnn` is for image-shaped problems: the input row of side²
values (scikit-learn's digits: 64 = 8×8; any problem whose feature count is a perfect square
≥ 16 qualifies) is reshaped to (1, side, side), then `stages` × [conv (kernel, same padding)
→ act → 2×2 pool], channels doubling per stage, then flatten and a linear head. `resmlp` is
the ResNet of the same paper: a linear stem to width `d`, `blocks` residual blocks
x + dropout2(linear(dropout1(act(norm(linear(x)))))) with hidden width `d_hidden`, then the
head norm → act → linear.

`parse_spec` reads any family (mlp included); `spec_graph` builds its IR for a problem's
shapes. `parse_model_spec` still reads MLPs only, for the callers that need an `MLPSpec`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from aicf_induct.errors import ConfigError
from aicf_induct.frontend import functional as F
from aicf_induct.frontend.layers import (
    AvgPool2d,
    Conv2d,
    MaxPool2d,
    MultiheadAttention,
    NumericTokenizer,
)
from aicf_induct.frontend.module import BatchNorm1d, Dropout, LayerNorm, Linear, Module, Sequential
from aicf_induct.frontend.specs import (
    ACTS,
    MAX_PARAMS,
    MLPSpec,
    _act,
    _convert,
    _format,
    build_mlp,
    mlp_graph,
    parse_model_spec,
    spec_given,
)
from aicf_induct.frontend.tensor import SymbolicTensor
from aicf_induct.frontend.trace import trace
from aicf_induct.ir.graph import Graph

POOLS = ("max", "avg", "none")
RES_NORMS = ("batchnorm", "layernorm")
MAX_BLOCKS = 16  # transformer blocks / conv stages: a typo stays a one-line error
MIN_CNN_SIDE = 4  # images smaller than 4x4 are rows, not images


def _check_int(spec: object, key: str, low: int, high: int) -> None:
    v = getattr(spec, key)
    if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high:
        raise ConfigError(f"model key '{key}' must be an integer in {low}..{high}, got {v!r}")


def _check_choice(spec: object, key: str, valid: tuple[str, ...]) -> None:
    v = getattr(spec, key)
    if v not in valid:
        raise ConfigError(f"bad value {v!r} for model key '{key}' (valid: {', '.join(valid)})")


@dataclass(frozen=True)
class FTTSpec:
    depth: int = 2  # transformer blocks
    d_token: int = 32  # token width (divisible by heads)
    heads: int = 4  # attention heads per block
    attention_dropout: float = 0.0  # dropout on the attention probabilities
    ffn_mult: int = 2  # the feed-forward's hidden width is ffn_mult * d_token
    act: str = "relu"  # the feed-forward's and the head's activation

    def __post_init__(self) -> None:
        if isinstance(self.attention_dropout, int) and not isinstance(self.attention_dropout,
                                                                      bool):
            object.__setattr__(self, "attention_dropout", float(self.attention_dropout))
        _check_int(self, "depth", 1, MAX_BLOCKS)
        _check_int(self, "d_token", 1, 4096)
        _check_int(self, "heads", 1, 256)
        _check_int(self, "ffn_mult", 1, 16)
        if self.d_token % self.heads:
            raise ConfigError(f"model key 'heads' ({self.heads}) must divide 'd_token' "
                              f"({self.d_token})")
        p = self.attention_dropout
        if not isinstance(p, float) or not 0.0 <= p < 1.0:
            raise ConfigError(f"model key 'attention_dropout' must be a float in [0, 1), "
                              f"got {p!r}")
        _check_choice(self, "act", ACTS)

    def to_string(self) -> str:
        return "ftt:" + ",".join(f"{f.name}={_format(getattr(self, f.name))}"
                                 for f in dataclasses.fields(self))

    __str__ = to_string


@dataclass(frozen=True)
class CNNSpec:
    stages: int = 2  # conv -> act -> pool stages
    channels: int = 16  # the first stage's channels, doubled per stage
    kernel: int = 3  # square, odd (same padding)
    pool: str = "max"  # max | avg | none (2x2, stride 2, while the image is >= 2x2)
    act: str = "relu"

    def __post_init__(self) -> None:
        _check_int(self, "stages", 1, MAX_BLOCKS)
        _check_int(self, "channels", 1, 1024)
        _check_int(self, "kernel", 1, 15)
        if self.kernel % 2 == 0:
            raise ConfigError(f"model key 'kernel' must be odd (same padding), got "
                              f"{self.kernel}")
        _check_choice(self, "pool", POOLS)
        _check_choice(self, "act", ACTS)

    def to_string(self) -> str:
        return "cnn:" + ",".join(f"{f.name}={_format(getattr(self, f.name))}"
                                 for f in dataclasses.fields(self))

    __str__ = to_string


@dataclass(frozen=True)
class ResMLPSpec:
    blocks: int = 2  # residual blocks
    d: int = 64  # the main width: the stem's output and every block's input and output
    d_hidden: int = 128  # each block's inner width
    dropout1: float = 0.0  # dropout after the block's activation (0: no node)
    dropout2: float = 0.0  # dropout on the block's output, before the skip joins (0: no node)
    norm: str = "batchnorm"  # in every block and the head
    act: str = "relu"

    def __post_init__(self) -> None:
        for key in ("dropout1", "dropout2"):
            v = getattr(self, key)
            if isinstance(v, int) and not isinstance(v, bool):
                object.__setattr__(self, key, float(v))
            v = getattr(self, key)
            if not isinstance(v, float) or not 0.0 <= v < 1.0:
                raise ConfigError(f"model key '{key}' must be a float in [0, 1), got {v!r}")
        _check_int(self, "blocks", 0, MAX_BLOCKS)
        _check_int(self, "d", 1, 65_536)
        _check_int(self, "d_hidden", 1, 65_536)
        _check_choice(self, "norm", RES_NORMS)
        _check_choice(self, "act", ACTS)

    def to_string(self) -> str:
        return "resmlp:" + ",".join(f"{f.name}={_format(getattr(self, f.name))}"
                                    for f in dataclasses.fields(self))

    __str__ = to_string


AnySpec = MLPSpec | FTTSpec | CNNSpec | ResMLPSpec
FamilySpec = type[FTTSpec] | type[CNNSpec] | type[ResMLPSpec]
FAMILIES: dict[str, FamilySpec] = {"ftt": FTTSpec, "cnn": CNNSpec, "resmlp": ResMLPSpec}


def parse_spec(text: str) -> AnySpec:
    """`mlp:...`, `ftt:...`, `cnn:...` or `resmlp:...`; errors name the bad key or value."""
    if not isinstance(text, str):
        return parse_model_spec(text)  # its TypeError names what a spec is
    kind, _, rest = text.strip().partition(":")
    kind = kind.strip()
    if kind == "mlp":
        return parse_model_spec(text)
    if kind not in FAMILIES:
        raise ConfigError(f"unknown model kind '{kind}' (valid: mlp, {', '.join(FAMILIES)})")
    cls = FAMILIES[kind]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values: dict[str, object] = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, raw = (s.strip() for s in item.partition("="))
        if key not in fields:
            raise ConfigError(f"unknown model key '{key}' for {kind} (valid: "
                              f"{', '.join(fields)})")
        if not eq or not raw:
            raise ConfigError(f"model key '{key}' needs a value, as in '{key}=...'")
        if key in values:
            raise ConfigError(f"model key '{key}' given twice")
        hint = {"int": int, "float": float}.get(str(fields[key].type), str)
        values[key] = _convert(key, raw, hint)
    return cls(**values)  # type: ignore[arg-type]


class TransformerBlock(Module):
    """Pre-norm: x + attn(ln(x)), then x + ffn(ln(x))."""

    def __init__(self, spec: FTTSpec) -> None:
        super().__init__()
        d = spec.d_token
        self.attn_norm = LayerNorm(d)
        self.attn = MultiheadAttention(d, spec.heads, spec.attention_dropout)
        self.ffn_norm = LayerNorm(d)
        self.ffn = Sequential(Linear(d, spec.ffn_mult * d), _act(spec.act),
                              Linear(spec.ffn_mult * d, d))

    def forward(self, x: SymbolicTensor) -> SymbolicTensor:
        h = self.attn_norm(x)
        x = x + self.attn(h, h, h)[0]
        return x + self.ffn(self.ffn_norm(x))


class FTTransformer(Module):
    def __init__(self, spec: FTTSpec, in_features: int, out_features: int) -> None:
        super().__init__()
        self.spec = spec
        self.tokenizer = NumericTokenizer(in_features, spec.d_token)
        self.blocks = Sequential(*[TransformerBlock(spec) for _ in range(spec.depth)])
        self.norm = LayerNorm(spec.d_token)
        self.act = _act(spec.act)
        self.head = Linear(spec.d_token, out_features)

    def forward(self, x: SymbolicTensor) -> SymbolicTensor:
        h = self.norm(self.blocks(self.tokenizer(x)))
        return self.head(self.act(F.mean(h, 1)))


def image_side(in_features: int) -> int | None:
    """The side of the square image a row of `in_features` values is, or None."""
    side = math.isqrt(in_features)
    return side if side * side == in_features and side >= MIN_CNN_SIDE else None


class CNN(Module):
    def __init__(self, spec: CNNSpec, in_features: int, out_features: int) -> None:
        super().__init__()
        side = image_side(in_features)
        if side is None:
            raise ConfigError(f"cnn needs a square image: {in_features} features is not a "
                              f"perfect square >= {MIN_CNN_SIDE * MIN_CNN_SIDE}")
        self.spec, self.side = spec, side
        stages: list[Module] = []
        c_in = 1
        for k in range(spec.stages):
            c_out = spec.channels << k
            parts: list[Module] = [Conv2d(c_in, c_out, spec.kernel, padding=spec.kernel // 2),
                                   _act(spec.act)]
            if spec.pool != "none" and side >= 2:
                parts.append(MaxPool2d(2) if spec.pool == "max" else AvgPool2d(2))
                side //= 2
            stages.append(Sequential(*parts))
            c_in = c_out
        self.stages = Sequential(*stages)
        self.head = Linear(c_in * side * side, out_features)

    def forward(self, x: SymbolicTensor) -> SymbolicTensor:
        img = F.reshape(x, [1, self.side, self.side])
        return self.head(F.flatten(self.stages(img)))


def _norm(kind: str, d: int) -> Module:
    return BatchNorm1d(d) if kind == "batchnorm" else LayerNorm(d)


class ResBlock(Module):
    """x + dropout2(linear2(dropout1(act(norm(linear1(x)))))); dropouts of rate 0 are left out."""

    def __init__(self, spec: ResMLPSpec) -> None:
        super().__init__()
        parts: list[Module] = [Linear(spec.d, spec.d_hidden), _norm(spec.norm, spec.d_hidden),
                               _act(spec.act)]
        if spec.dropout1 > 0.0:
            parts.append(Dropout(spec.dropout1))
        parts.append(Linear(spec.d_hidden, spec.d))
        if spec.dropout2 > 0.0:
            parts.append(Dropout(spec.dropout2))
        self.branch = Sequential(*parts)

    def forward(self, x: SymbolicTensor) -> SymbolicTensor:
        return x + self.branch(x)


class ResMLP(Module):
    def __init__(self, spec: ResMLPSpec, in_features: int, out_features: int) -> None:
        super().__init__()
        self.spec = spec
        self.stem = Linear(in_features, spec.d)
        self.blocks = Sequential(*[ResBlock(spec) for _ in range(spec.blocks)])
        self.head = Sequential(_norm(spec.norm, spec.d), _act(spec.act),
                               Linear(spec.d, out_features))

    def forward(self, x: SymbolicTensor) -> SymbolicTensor:
        return self.head(self.blocks(self.stem(x)))


def build(spec: AnySpec, in_features: int, out_features: int) -> Module:
    spec_given(spec, (MLPSpec, *FAMILIES.values()))
    if in_features < 1 or out_features < 1:
        raise ConfigError(f"a model needs in_features and out_features >= 1, "
                          f"got {in_features} and {out_features}")
    if isinstance(spec, FTTSpec):
        return FTTransformer(spec, in_features, out_features)
    if isinstance(spec, CNNSpec):
        return CNN(spec, in_features, out_features)
    if isinstance(spec, ResMLPSpec):
        return ResMLP(spec, in_features, out_features)
    return build_mlp(spec, in_features, out_features)


def spec_graph(spec: AnySpec, in_features: int, out_features: int, *,
               dtype: str = "float64") -> Graph:
    """The IR of any family's spec for these shapes, named by the spec string."""
    spec_given(spec, (MLPSpec, *FAMILIES.values()))
    if isinstance(spec, MLPSpec):
        return mlp_graph(spec, in_features, out_features, dtype=dtype)
    g = trace(build(spec, in_features, out_features), in_features, dtype=dtype,
              name=spec.to_string())
    if g.param_count() > MAX_PARAMS:
        raise ConfigError(f"model {spec} has {g.param_count():,} parameters; the ceiling is "
                          f"{MAX_PARAMS:,}")
    return g

