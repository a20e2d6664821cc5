"""The functional API: one IR node per call, on symbolic tensors.

Names and arguments follow `torch.nn.functional` where the IR can express them. Weights are
`Parameter`s (running statistics `Buffer`s); the node a call makes owns them. Attributes are
always written out in full, so a native model and an imported torch model give the same
canonical JSON.
"""

from __future__ import annotations

from collections.abc import Sequence

from aicf_induct.errors import ConfigError
from aicf_induct.frontend.parameter import Buffer, Parameter
from aicf_induct.frontend.tensor import SymbolicTensor
from aicf_induct.ir.ops import ACTIVATION_TABLE

# gelu's variants in the op table: "none" (gelu), "tanh" (gelu_tanh)
GELU_APPROXIMATIONS = tuple(str(a.attrs["approximate"]) for a in ACTIVATION_TABLE.values()
                            if a.op == "gelu")


def _check(x: object, what: str = "input") -> SymbolicTensor:
    if not isinstance(x, SymbolicTensor):
        raise ConfigError(f"{what} must be a traced tensor, got {type(x).__name__}; functional "
                          "ops build IR: run the model through aicf_induct.frontend.trace")
    return x


def _param(p: object, role: str, kind: type[Parameter] = Parameter) -> Parameter:
    if not isinstance(p, kind):
        raise ConfigError(f"{role} must be a {kind.__name__}, got {type(p).__name__}")
    return p


def _last_axis(x: SymbolicTensor, dim: int, op: str) -> None:
    """The IR's softmax and concat work on the feature (last) axis only."""
    if dim not in (-1, x.ndim - 1):
        raise ConfigError(f"{op} supports only the last axis (dim=-1 or {x.ndim - 1}), "
                          f"got dim={dim}")


def _unary(op: str, x: object, **attrs: object) -> SymbolicTensor:
    t = _check(x)
    return t.tracer.emit(op, [t], attrs)


def linear(x: SymbolicTensor, weight: Parameter,
           bias: Parameter | None = None) -> SymbolicTensor:
    """y = x @ weight.T + bias; weight (out, in)."""
    t = _check(x)
    w = _param(weight, "weight")
    params = {"weight": w}
    if bias is not None:
        params["bias"] = _param(bias, "bias")
    return t.tracer.emit("linear", [t], {"out_features": w.shape[0], "bias": bias is not None},
                         params)


def relu(x: SymbolicTensor, inplace: bool = False) -> SymbolicTensor:
    return _unary("relu", x)


def gelu(x: SymbolicTensor, approximate: str = "none") -> SymbolicTensor:
    if approximate not in GELU_APPROXIMATIONS:
        raise ConfigError(f"gelu approximate must be one of {', '.join(GELU_APPROXIMATIONS)}, "
                          f"got {approximate!r}")
    return _unary("gelu", x, approximate=approximate)


def tanh(x: SymbolicTensor) -> SymbolicTensor:
    return _unary("tanh", x)


def silu(x: SymbolicTensor, inplace: bool = False) -> SymbolicTensor:
    return _unary("silu", x)


def sigmoid(x: SymbolicTensor) -> SymbolicTensor:
    return _unary("sigmoid", x)


def softmax(x: SymbolicTensor, dim: int = -1) -> SymbolicTensor:
    _last_axis(_check(x), dim, "softmax")
    return _unary("softmax", x, axis=-1)


def layer_norm(x: SymbolicTensor, weight: Parameter | None = None,
               bias: Parameter | None = None, eps: float = 1e-5) -> SymbolicTensor:
    """Normalise over the last axis; affine when weight and bias are given (both or neither)."""
    t = _check(x)
    if (weight is None) != (bias is None):
        raise ConfigError("layer_norm takes both weight and bias or neither (the IR's "
                          "layernorm has no weight-only form)")
    params = {} if weight is None else {"weight": _param(weight, "weight"),
                                        "bias": _param(bias, "bias")}
    return t.tracer.emit("layernorm", [t], {"eps": float(eps), "affine": bool(params)}, params)


def batch_norm(x: SymbolicTensor, running_mean: Buffer, running_var: Buffer,
               weight: Parameter | None = None, bias: Parameter | None = None, *,
               momentum: float = 0.1, eps: float = 1e-5) -> SymbolicTensor:
    """Batch statistics in training, running statistics in eval (the runtime chooses)."""
    t = _check(x)
    if (weight is None) != (bias is None):
        raise ConfigError("batch_norm takes both weight and bias or neither")
    params: dict[str, Parameter] = {}
    if weight is not None:
        params = {"weight": _param(weight, "weight"), "bias": _param(bias, "bias")}
    params["running_mean"] = _param(running_mean, "running_mean", Buffer)
    params["running_var"] = _param(running_var, "running_var", Buffer)
    attrs = {"eps": float(eps), "momentum": float(momentum), "affine": weight is not None}
    return t.tracer.emit("batchnorm", [t], attrs, params)


def dropout(x: SymbolicTensor, p: float = 0.5, training: bool = True,
            inplace: bool = False) -> SymbolicTensor:
    """A dropout node; with training=False it is the identity and makes no node (as torch)."""
    t = _check(x)
    if not 0.0 <= p < 1.0:
        raise ConfigError(f"dropout p must be in [0, 1), got {p}")
    return t.tracer.emit("dropout", [t], {"p": float(p)}) if training else t


def add(a: SymbolicTensor, b: SymbolicTensor) -> SymbolicTensor:
    ta, tb = _check(a, "a"), _check(b, "b")
    return ta.tracer.emit("add", [ta, tb], {})


def concat(xs: Sequence[SymbolicTensor], dim: int = -1) -> SymbolicTensor:
    """Concatenate along the feature axis; one tensor is returned as is."""
    ts = [_check(x) for x in xs]
    if not ts:
        raise ConfigError("concat needs at least one tensor")
    _last_axis(ts[0], dim, "concat")
    return ts[0] if len(ts) == 1 else ts[0].tracer.emit("concat", ts, {"axis": -1})


cat = concat  # torch's name


def cross_entropy(logits: SymbolicTensor, labels: SymbolicTensor,
                  label_smoothing: float = 0.0) -> SymbolicTensor:
    """Mean cross-entropy of logits (N, C) against int64 labels (N,)."""
    tl, ty = _check(logits, "logits"), _check(labels, "labels")
    if not 0.0 <= label_smoothing < 1.0:
        raise ConfigError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
    return tl.tracer.emit("cross_entropy", [tl, ty], {"label_smoothing": float(label_smoothing)})


def mse_loss(pred: SymbolicTensor, target: SymbolicTensor) -> SymbolicTensor:
    tp, tt = _check(pred, "pred"), _check(target, "target")
    return tp.tracer.emit("mse", [tp, tt], {})
