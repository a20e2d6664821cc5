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


def _axis(x: SymbolicTensor, dim: int, op: str) -> int:
    """`dim` as a non-negative axis of x; the batch axis (0) is refused."""
    if not isinstance(dim, int) or not -x.ndim <= dim < x.ndim:
        raise ConfigError(f"{op} dim must be an int in [-{x.ndim}, {x.ndim}), got {dim!r}")
    if dim % x.ndim == 0:
        raise ConfigError(f"{op} cannot work along the batch axis (dim={dim})")
    return dim % x.ndim


def _at(t: SymbolicTensor) -> str:
    """" at 'path'" for the node the tracer's current module will name, else ""."""
    path = t.tracer.next_node_id()
    return f" at '{path}'" if path else ""


def _unary(op: str, x: object, **attrs: object) -> SymbolicTensor:
    t = _check(x)
    return t.tracer.emit(op, [t], attrs)


def linear(x: SymbolicTensor, weight: Parameter,
           bias: Parameter | None = None) -> SymbolicTensor:
    """y = x @ weight.T + bias; weight (out, in)."""
    t = _check(x)
    w = _param(weight, "weight")
    if t.shape and t.shape[-1] is not None and len(w.shape) == 2 and t.shape[-1] != w.shape[1]:
        # blame the input, not the weight: most often the declared input size is wrong
        declared = t.tracer.graph.node(t.id).op == "input"
        got = (f"the declared input size is {t.shape[-1]} (the in_features traced with)"
               if declared else f"its input '{t.id}' has {t.shape[-1]}")
        raise ConfigError(f"linear{_at(t)} takes {w.shape[1]} input features, {got}")
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
    """Concatenate along `dim` (any axis but the batch axis); one tensor is returned as is.
    The last axis is always written -1 (as the MLP graphs have it), others as their index."""
    ts = [_check(x) for x in xs]
    if not ts:
        raise ConfigError("concat needs at least one tensor")
    axis = _axis(ts[0], dim, "concat")
    axis = -1 if axis == ts[0].ndim - 1 else axis
    return ts[0] if len(ts) == 1 else ts[0].tracer.emit("concat", ts, {"axis": axis})


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


# -- beyond MLPs: tokens, attention, images, shapes ------------------------------------------

def _pair(v: int | Sequence[int], what: str) -> list[int]:
    """A size given as an int or a pair of ints, each at least 1 (padding: at least 0); a
    kernel or stride of 0 divided by zero in the op's shape rule."""
    pair = [v, v] if isinstance(v, int) else list(v) if isinstance(v, list | tuple) else []
    least = 0 if what == "padding" else 1
    if len(pair) != 2 or not all(isinstance(a, int) and not isinstance(a, bool) and a >= least
                                 for a in pair):
        raise ConfigError(f"{what} must be an int >= {least} or a pair of them, got {v!r}")
    return [int(a) for a in pair]


def embedding(ids: SymbolicTensor, weight: Parameter) -> SymbolicTensor:
    """Rows of weight (num_embeddings, dim) picked by int64 ids."""
    t, w = _check(ids, "ids"), _param(weight, "weight")
    if len(w.shape) != 2:
        raise ConfigError(f"embedding weight must be (num_embeddings, dim), got {list(w.shape)}")
    return t.tracer.emit("embedding", [t], {"num_embeddings": w.shape[0],
                                            "embedding_dim": w.shape[1]}, {"weight": w})


def numeric_tokenizer(x: SymbolicTensor, weight: Parameter,
                      bias: Parameter | None = None) -> SymbolicTensor:
    """FT-Transformer's per-feature tokens: x (N, F) -> x[..., None] * weight + bias (N, F, d)."""
    t, w = _check(x), _param(weight, "weight")
    params = {"weight": w} if bias is None else {"weight": w, "bias": _param(bias, "bias")}
    return t.tracer.emit("numeric_tokenizer", [t], {"d_token": w.shape[-1],
                                                    "bias": bias is not None}, params)


def self_attention(x: SymbolicTensor, num_heads: int, in_proj_weight: Parameter,
                   in_proj_bias: Parameter | None, out_proj_weight: Parameter,
                   out_proj_bias: Parameter | None, dropout_p: float = 0.0) -> SymbolicTensor:
    """Multi-head self-attention of x (N, T, d) with packed q/k/v and output projections, as
    torch's nn.MultiheadAttention(d, num_heads, batch_first=True)(x, x, x)[0]."""
    t = _check(x)
    if (in_proj_bias is None) != (out_proj_bias is None):
        raise ConfigError("self_attention takes both projection biases or neither")
    if not 0.0 <= dropout_p < 1.0:
        raise ConfigError(f"attention dropout must be in [0, 1), got {dropout_p}")
    params = {"in_weight": _param(in_proj_weight, "in_proj_weight"),
              "out_weight": _param(out_proj_weight, "out_proj_weight")}
    if in_proj_bias is not None:
        params["in_bias"] = _param(in_proj_bias, "in_proj_bias")
        params["out_bias"] = _param(out_proj_bias, "out_proj_bias")
    attrs = {"heads": int(num_heads), "dropout": float(dropout_p),
             "bias": in_proj_bias is not None}
    return t.tracer.emit("attention", [t], attrs, params)


def conv2d(x: SymbolicTensor, weight: Parameter, bias: Parameter | None = None,
           stride: int | Sequence[int] = 1, padding: int | Sequence[int] = 0) -> SymbolicTensor:
    """2-D convolution of (N, C, H, W); weight (out, C, kh, kw)."""
    t, w = _check(x), _param(weight, "weight")
    if len(w.shape) != 4:
        raise ConfigError(f"conv2d weight must be (out, in, kh, kw), got {list(w.shape)}")
    params = {"weight": w} if bias is None else {"weight": w, "bias": _param(bias, "bias")}
    attrs = {"out_channels": w.shape[0], "kernel_size": list(w.shape[2:]),
             "stride": _pair(stride, "stride"), "padding": _pair(padding, "padding"),
             "bias": bias is not None}
    return t.tracer.emit("conv2d", [t], attrs, params)


def _pool(mode: str, x: SymbolicTensor, kernel_size: int | Sequence[int],
          stride: int | Sequence[int] | None, padding: int | Sequence[int]) -> SymbolicTensor:
    kernel = _pair(kernel_size, "kernel_size")
    attrs = {"mode": mode, "kernel_size": kernel,
             "stride": kernel if stride is None else _pair(stride, "stride"),
             "padding": _pair(padding, "padding")}
    return _unary("pool", x, **attrs)


def max_pool2d(x: SymbolicTensor, kernel_size: int | Sequence[int],
               stride: int | Sequence[int] | None = None,
               padding: int | Sequence[int] = 0) -> SymbolicTensor:
    return _pool("max", x, kernel_size, stride, padding)


def avg_pool2d(x: SymbolicTensor, kernel_size: int | Sequence[int],
               stride: int | Sequence[int] | None = None,
               padding: int | Sequence[int] = 0) -> SymbolicTensor:
    """Average over each window, padding counted (torch's count_include_pad=True)."""
    return _pool("avg", x, kernel_size, stride, padding)


def reshape(x: SymbolicTensor, shape: Sequence[int]) -> SymbolicTensor:
    """Reshape each example to `shape` (the batch axis is kept and not part of `shape`)."""
    t = _check(x)
    known = [int(d or 0) for d in t.shape[1:]]
    n = 1
    for d in known:
        n *= d
    fixed = 1
    for d in shape:
        fixed *= d if d != -1 else 1
    concrete = [n // fixed if d == -1 and fixed else d for d in shape]  # canonical: no -1
    return _unary("reshape", t, shape=concrete)


def flatten(x: SymbolicTensor, start_dim: int = 1, end_dim: int = -1) -> SymbolicTensor:
    """Flatten every axis after the batch into one (torch's default for nn.Flatten)."""
    t = _check(x)
    if start_dim != 1 or end_dim not in (-1, t.ndim - 1):
        raise ConfigError(f"flatten supports start_dim=1, end_dim=-1 only, got "
                          f"start_dim={start_dim}, end_dim={end_dim}")
    return t if t.ndim == 2 else reshape(t, [-1])


def permute(x: SymbolicTensor, dims: Sequence[int]) -> SymbolicTensor:
    t = _check(x)
    perm = [d % t.ndim if isinstance(d, int) else d for d in dims]
    if sorted(perm) != list(range(t.ndim)) or perm[0] != 0:
        raise ConfigError(f"permute needs a permutation of the {t.ndim} axes keeping the batch "
                          f"axis first, got {list(dims)}")
    return _unary("transpose", t, perm=perm)


def transpose(x: SymbolicTensor, dim0: int, dim1: int) -> SymbolicTensor:
    t = _check(x)
    a, b = _axis(t, dim0, "transpose"), _axis(t, dim1, "transpose")
    perm = list(range(t.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return _unary("transpose", t, perm=perm)


def matmul(a: SymbolicTensor, b: SymbolicTensor) -> SymbolicTensor:
    """Batched a @ b over the last two axes, leading axes broadcast."""
    ta, tb = _check(a, "a"), _check(b, "b")
    return ta.tracer.emit("matmul", [ta, tb], {})


def mean(x: SymbolicTensor, dim: int, keepdim: bool = False) -> SymbolicTensor:
    t = _check(x)
    return _unary("mean", t, axis=_axis(t, dim, "mean"), keepdims=bool(keepdim))


def sum(x: SymbolicTensor, dim: int, keepdim: bool = False) -> SymbolicTensor:
    t = _check(x)
    return _unary("sum", t, axis=_axis(t, dim, "sum"), keepdims=bool(keepdim))
