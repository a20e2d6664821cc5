"""Import a PyTorch `nn.Module` through torch.fx, for the ops the IR has.

The fx graph is replayed through the native functional API, so an imported model gets exactly
the node ids, attributes and parameter names that tracing the same native model gives:
call_module nodes are named by their module path, functional nodes by their op, parameters by
their `state_dict` names. torch is imported here only, when this function is called.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from aicf_induct.errors import ConfigError
from aicf_induct.frontend import functional as F
from aicf_induct.frontend.parameter import Buffer, Parameter
from aicf_induct.frontend.tensor import SymbolicTensor, Tracer
from aicf_induct.frontend.torch_layers import AICF_OP, layer_op
from aicf_induct.frontend.trace import InputShape, initial_values, input_shape
from aicf_induct.ir.graph import Graph
from aicf_induct.ir.validate import validate


@dataclass(frozen=True)
class _Attr:
    """A get_attr node's value: a parameter or buffer of the model, by qualified name."""

    name: str


class _Batch:
    """The batch size, as `x.size(0)` / `x.shape[0]` read it: only a reshape's first entry."""

    def __repr__(self) -> str:
        return "the batch size"


BATCH = _Batch()


class _Importer:
    def __init__(self, model: Any, name: str) -> None:
        import torch

        self.torch = torch
        self.model = model
        self.tracer = Tracer(name)
        self.keep: list[Parameter] = []  # tracer maps by id(): keep the objects alive
        self.made: dict[str, Parameter] = {}  # qualname -> its one Parameter
        self.storage: dict[tuple[str, int], str] = {}  # (device, data_ptr) -> first qualname

    def param(self, qualname: str, tensor: Any) -> Parameter:
        if qualname in self.made:  # a module or weight used twice: the tracer refuses the reuse
            return self.made[qualname]
        trainable = isinstance(tensor, self.torch.nn.Parameter)
        if trainable and not tensor.requires_grad:
            raise ConfigError(f"parameter '{qualname}' is frozen (requires_grad=False); the "
                              "IR trains every parameter: call requires_grad_(True) to import "
                              "it as trainable")
        value = self._values(qualname, tensor)
        key = (str(tensor.device), tensor.untyped_storage().data_ptr())
        if key in self.storage:  # tied weights: importing two copies would untie them
            raise ConfigError(f"parameters '{self.storage[key]}' and '{qualname}' share "
                              "storage (tied weights); in the IR each parameter has one "
                              "owner node (no weight sharing)")
        self.storage[key] = qualname
        p = (Parameter if trainable else Buffer)(value=value)
        self.tracer.param_names[id(p)] = qualname
        self.keep.append(p)
        self.made[qualname] = p
        return p

    def _values(self, qualname: str, tensor: Any) -> np.ndarray:
        """A weight's values as float64, after refusing one that has none yet (a lazy
        module before its first call, a model on the meta device) or holds NaN or infinity
        (which training refuses in a values file: said here, naming the weight)."""
        if self.torch.nn.parameter.is_lazy(tensor) or tensor.is_meta:
            raise ConfigError(f"parameter '{qualname}' has no values yet (a lazy module "
                              "before its first call, or a model on the meta device): call "
                              "the model once on real data, or load its weights, first")
        value: np.ndarray = tensor.detach().cpu().to(self.torch.float64).numpy().copy()
        bad = int((~np.isfinite(value)).sum())
        if bad:
            raise ConfigError(f"parameter '{qualname}' has {bad} non-finite value(s) (NaN or "
                              "infinity): training refuses them")
        return value

    def attr_param(self, v: Any, role: str) -> Parameter | None:
        if v is None:
            return None
        if not isinstance(v, _Attr):
            raise ConfigError(f"{role} must be a parameter of the model, got {v!r}")
        try:
            tensor = self.model.get_parameter(v.name)
        except AttributeError:
            try:
                tensor = self.model.get_buffer(v.name)
            except AttributeError:
                raise ConfigError(f"'{v.name}' is neither a parameter nor a buffer") from None
        return self.param(v.name, tensor)

    def sub_param(self, path: str, m: Any, attr: str) -> Parameter | None:
        t = getattr(m, attr)
        return None if t is None else self.param(f"{path}.{attr}", t)


def _arg(node: Any, i: int, key: str, default: Any, env: dict[Any, Any]) -> Any:
    """Positional argument i or keyword `key` of an fx node, with fx nodes replaced by values."""
    v = node.args[i] if i < len(node.args) else node.kwargs.get(key, default)
    return _resolve(v, env)


def _resolve(v: Any, env: dict[Any, Any]) -> Any:
    if isinstance(v, list | tuple):
        return type(v)(_resolve(u, env) for u in v)
    return env[v] if hasattr(v, "op") and v in env else v


def _tensor(v: Any, what: str) -> SymbolicTensor:
    if isinstance(v, _Attr):
        raise ConfigError(f"parameter or buffer '{v.name}' used directly as {what}: only the "
                          "weights of layers (nn.Linear, F.linear, norms, ...) are IR "
                          "parameters")
    if not isinstance(v, SymbolicTensor):
        raise ConfigError(f"{what} must be a tensor computed from the input, got {v!r}")
    return v


def _module_op(imp: _Importer, path: str, m: Any, x: SymbolicTensor) -> Any:
    """The node for one call_module of a supported torch.nn layer; None if unsupported."""
    nn = imp.torch.nn
    if nn.utils.parametrize.is_parametrized(m) or hasattr(m, "weight_g"):
        raise ConfigError(f"'{path}' ({type(m).__name__}) computes its weight (weight_norm, "
                          "spectral_norm or another parametrization); the IR holds plain "
                          "weights: remove it first (torch.nn.utils.parametrize."
                          "remove_parametrizations)")
    beyond = layer_op(imp.torch, path, m, x, imp.sub_param)
    if beyond is not None:
        return beyond
    if isinstance(m, nn.Linear):
        return F.linear(x, imp.sub_param(path, m, "weight"),  # type: ignore[arg-type]
                        imp.sub_param(path, m, "bias"))
    simple: dict[type, Callable[[SymbolicTensor], SymbolicTensor]] = {
        nn.ReLU: F.relu, nn.Tanh: F.tanh, nn.SiLU: F.silu, nn.Sigmoid: F.sigmoid}
    if type(m) in simple:
        return simple[type(m)](x)
    if isinstance(m, nn.GELU):
        return F.gelu(x, m.approximate)
    if isinstance(m, nn.Softmax):
        if m.dim is None:
            raise ConfigError(f"nn.Softmax at '{path}' needs an explicit dim")
        return F.softmax(x, m.dim)
    if isinstance(m, nn.Dropout):
        return F.dropout(x, m.p)
    if isinstance(m, nn.LayerNorm):
        if len(m.normalized_shape) != 1:
            raise ConfigError(f"nn.LayerNorm at '{path}' must normalise the last axis only, "
                              f"got normalized_shape={tuple(m.normalized_shape)}")
        return F.layer_norm(x, imp.sub_param(path, m, "weight"), imp.sub_param(path, m, "bias"),
                            m.eps)
    if isinstance(m, nn.BatchNorm1d):
        if m.running_mean is None or m.momentum is None:
            raise ConfigError(f"nn.BatchNorm1d at '{path}' needs track_running_stats=True and a "
                              "float momentum")
        return F.batch_norm(x, imp.sub_param(path, m, "running_mean"),  # type: ignore[arg-type]
                            imp.sub_param(path, m, "running_var"),  # type: ignore[arg-type]
                            imp.sub_param(path, m, "weight"), imp.sub_param(path, m, "bias"),
                            momentum=float(m.momentum), eps=m.eps)
    return None


def _function_op(imp: _Importer, node: Any, env: dict[Any, Any]) -> Any:
    """The node for one call_function / call_method; `_UNSUPPORTED` if there is no IR op."""
    torch, tf = imp.torch, imp.torch.nn.functional
    t = node.target

    def a(i: int, key: str, default: Any = None) -> Any:
        return _arg(node, i, key, default, env)

    method = node.op == "call_method"
    x = a(0, "input")
    if (method and t == "relu") or t in (torch.relu, tf.relu):
        return F.relu(_tensor(x, "input"))
    if (method and t == "tanh") or t in (torch.tanh, tf.tanh):
        return F.tanh(_tensor(x, "input"))
    if (method and t == "sigmoid") or t in (torch.sigmoid, tf.sigmoid):
        return F.sigmoid(_tensor(x, "input"))
    if t is tf.silu:
        return F.silu(_tensor(x, "input"))
    if t is tf.gelu:
        return F.gelu(_tensor(x, "input"), a(1, "approximate", "none"))
    if (method and t == "softmax") or t in (torch.softmax, tf.softmax):
        dim = a(1, "dim")
        if dim is None:
            raise ConfigError(f"softmax at fx node '{node.name}' needs an explicit dim")
        return F.softmax(_tensor(x, "input"), dim)
    if (method and t == "add") or t in (operator.add, torch.add):
        if a(2, "alpha", 1) != 1:
            raise ConfigError(f"add with alpha at fx node '{node.name}' has no IR op")
        other = a(1, "other")
        return F.add(_tensor(x, "input"), _tensor(other, "the other addend"))
    if t in (torch.cat, torch.concat):
        xs = [_tensor(v, "each concatenated tensor") for v in a(0, "tensors")]
        return F.concat(xs, a(1, "dim", 0))
    if t is tf.dropout:
        return F.dropout(_tensor(x, "input"), a(1, "p", 0.5), a(2, "training", True))
    if t is tf.linear:
        return F.linear(_tensor(x, "input"), imp.attr_param(a(1, "weight"), "weight"),  # type: ignore[arg-type]
                        imp.attr_param(a(2, "bias"), "bias"))
    beyond = _beyond_function_op(imp, node, env)
    if beyond is not _UNSUPPORTED:
        return beyond
    if t is tf.layer_norm:
        shape = a(1, "normalized_shape")
        if len(shape) != 1:
            raise ConfigError(f"layer_norm at fx node '{node.name}' must normalise the last "
                              "axis only")
        return F.layer_norm(_tensor(x, "input"), imp.attr_param(a(2, "weight"), "weight"),
                            imp.attr_param(a(3, "bias"), "bias"), a(4, "eps", 1e-5))
    return _UNSUPPORTED


_UNSUPPORTED = object()


def _beyond_function_op(imp: _Importer, node: Any, env: dict[Any, Any]) -> Any:
    """Shape ops, matmul, reductions and indexing the tuple an attention layer returns."""
    torch, t, method = imp.torch, node.target, node.op == "call_method"

    def a(i: int, key: str, default: Any = None) -> Any:
        return _arg(node, i, key, default, env)

    x = a(0, "input")
    if t is operator.getitem and isinstance(x, tuple):  # (out, weights) of attention; a shape
        v = x[a(1, "index")]
        if v is None and node.users:  # `out, _ = attn(...)` unpacks an unused getitem too
            raise ConfigError(f"fx node '{node.name}' reads attention weights, which the IR "
                              "does not compute")
        return v
    if (method and t == "size") or (t is getattr and a(1, "name") == "shape"):
        dims = tuple(BATCH if d is None else d for d in _tensor(x, "input").shape)
        dim = a(1, "dim") if method else None
        if dim is not None and not (isinstance(dim, int) and -len(dims) <= dim < len(dims)):
            raise ConfigError(f"size at fx node '{node.name}': dim {dim!r} is out of range "
                              f"for a rank-{len(dims)} tensor")
        return dims if dim is None else dims[dim]
    if method and t == "contiguous":
        return _tensor(x, "input")
    if (method and t in ("float", "double", "to")) or (method and t == "type" and
                                                       node.args[1:]):
        return _float_cast(imp, node, _tensor(x, "input"), env)
    if (method and t == "matmul") or t in (operator.matmul, torch.matmul, torch.bmm):
        return F.matmul(_tensor(x, "a"), _tensor(a(1, "other"), "b"))
    if (method and t == "flatten") or t is torch.flatten:
        return F.flatten(_tensor(x, "input"), a(1, "start_dim", 0), a(2, "end_dim", -1))
    if (method and t == "transpose") or t is torch.transpose:
        return F.transpose(_tensor(x, "input"), a(1, "dim0"), a(2, "dim1"))
    if method and t == "permute":
        dims = node.args[1:] if len(node.args) > 2 else a(1, "dims")
        return F.permute(_tensor(x, "input"), list(_resolve(dims, env)))
    if method and t in ("reshape", "view"):
        shape = node.args[1:] if len(node.args) > 2 else a(1, "shape")
        target: list[Any] = list(_resolve(list(shape), env))
        if len(target) == 1 and isinstance(target[0], list | tuple):
            target = list(target[0])
        if target and target[0] is BATCH:  # x.view(x.size(0), ...): the batch axis kept
            target[0] = -1
        if any(d is BATCH for d in target):
            raise ConfigError(f"{t} at fx node '{node.name}' moves the batch size off axis 0")
        return _tensor(x, "input").reshape(*target)
    if (method and t in ("mean", "sum")) or t in (torch.mean, torch.sum):
        dim = a(1, "dim")
        if not isinstance(dim, int):
            raise ConfigError(f"{_target_name(t)} at fx node '{node.name}' needs one int dim, "
                              f"got {dim!r}")
        reduce = F.mean if t in ("mean", torch.mean) else F.sum
        return reduce(_tensor(x, "input"), dim, bool(a(2, "keepdim", False)))
    return _UNSUPPORTED


def _float_cast(imp: _Importer, node: Any, x: SymbolicTensor, env: dict[Any, Any]) -> Any:
    """`.float()`, `.double()`, `.to(torch.float32)` of a float tensor: the IR has one float
    dtype (from_torch's `dtype`), so, as ONNX's float Casts, they are the identity."""
    torch = imp.torch
    args = [_resolve(v, env) for v in (*node.args[1:], *node.kwargs.values())]
    dtypes = [v for v in args if isinstance(v, torch.dtype)]
    floats = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
    if x.dtype == "int64" or any(d not in floats for d in dtypes) or (
            node.target in ("to", "type") and not dtypes):
        call = f"{node.target}({', '.join(map(repr, args))})"
        raise ConfigError(f"fx node '{node.name}': {call} of {x.dtype} tensor '{x.id}' has "
                          "no IR op; only a float-to-float cast (the identity in the IR) has one")
    return x


def _reads_batch(v: Any) -> bool:
    return v is BATCH or (isinstance(v, list | tuple) and any(_reads_batch(u) for u in v))


def _target_name(target: Any) -> str:
    if isinstance(target, str):
        return target
    mod = getattr(target, "__module__", None) or ""
    return f"{mod}.{getattr(target, '__name__', repr(target))}".lstrip(".")


def _assert_default() -> Any:
    """fx's guard on an argument traced as its default (None: a torch without it)."""
    try:
        from torch.fx._symbolic_trace import _assert_is_none
    except ImportError:  # pragma: no cover - another torch
        return None
    return _assert_is_none


# nn.MultiheadAttention.forward's arguments after the query and key/value that change its
# output (position, name, their default); need_weights and average_attn_weights shape only
# the weights output
_ATTENTION_MASKS = ((3, "key_padding_mask", None), (5, "attn_mask", None),
                    (7, "is_causal", False))


def _check_attention_call(node: Any, x: Any, env: dict[Any, Any]) -> None:
    """A ConfigError for a call of nn.MultiheadAttention the IR's self-attention does not
    compute: key or value another tensor, or a mask (which it would drop, silently)."""
    if any(_arg(node, i, k, x, env) is not x for i, k in ((1, "key"), (2, "value"))):
        raise ConfigError(f"nn.MultiheadAttention at fx node '{node.name}' supports "
                          "self-attention only (query, key and value the same tensor)")
    for i, key, default in _ATTENTION_MASKS:
        v = _arg(node, i, key, default, env)
        if v is not None and v is not False:
            raise ConfigError(f"nn.MultiheadAttention at fx node '{node.name}': {key} is "
                              f"not supported (the IR's attention attends to every position "
                              f"of the row); import the model without it")


def _import_node(imp: _Importer, gm: Any, node: Any, env: dict[Any, Any],
                 in_features: InputShape, dtype: str) -> Any:
    """The value of one fx node: a symbolic tensor, an attribute, or the output list."""
    tracer = imp.tracer
    if node.op == "placeholder":
        if node.args:  # an argument with a default (`mask=None`), traced as that value
            return node.args[0]
        if tracer.graph.nodes:
            raise ConfigError(f"from_torch supports one input; fx node '{node.name}' is another")
        return tracer.input(input_shape(in_features), dtype, "x")
    if node.op == "call_function" and node.target is _assert_default():
        return None  # fx's guard that such an argument keeps its default
    if node.op == "get_attr":
        return _Attr(node.target)
    if node.op == "call_module":
        m = gm.get_submodule(node.target)
        x = _tensor(_arg(node, 0, "input", None, env), f"the input of '{node.target}'")
        if isinstance(m, imp.torch.nn.Identity):
            return x
        if isinstance(m, imp.torch.nn.MultiheadAttention):
            _check_attention_call(node, x, env)
        with tracer.path_scope(node.target):
            out = _module_op(imp, node.target, m, x)
        if out is None:
            kind = type(m).__name__
            raise ConfigError(f"unsupported torch op at fx node '{node.name}': call_module "
                              f"'{node.target}' ({kind}){VIA_ONNX if kind in ONNX_ONLY else ''}")
        return out
    if node.op in ("call_function", "call_method"):
        out = _function_op(imp, node, env)
        if out is _UNSUPPORTED and _reads_batch(_resolve(list(node.args), env)):
            raise ConfigError(f"fx node '{node.name}' computes with the batch size, which the "
                              "IR leaves open: reshape with -1 first, as x.view(-1, ...)")
        if out is _UNSUPPORTED:
            raise ConfigError(f"unsupported torch op at fx node '{node.name}': {node.op} "
                              f"{_target_name(node.target)}")
        return out
    res = _resolve(node.args[0], env)  # the output node
    outs = res if isinstance(res, list | tuple) else [res]
    if any(v is None for v in outs):  # what an attention layer returns as its weights
        raise ConfigError("a model output is None: attention weights (nn.MultiheadAttention "
                          "returns (out, weights)), which the IR does not compute: return "
                          "its first output only")
    return [_tensor(v, "a model output") for v in outs]


# modules fx keeps whole (no IR op of their own) that the ONNX importer takes apart
ONNX_ONLY = frozenset({"TransformerEncoderLayer", "TransformerEncoder"})
VIA_ONNX = ("; its ONNX export imports: torch.onnx.export(model.eval(), ..., dynamo=False), "
            "then `aicf-induct ir import` (docs/ir.md)")


def from_torch(model: Any, in_features: InputShape, *, name: str = "",
               dtype: str = "float64") -> tuple[Graph, dict[str, np.ndarray]]:
    """The IR of a torch model and its parameter and buffer values (NumPy copies, `dtype`),
    named as in `model.state_dict()`. Unsupported ops raise ConfigError naming the fx node."""
    import torch.fx

    if not isinstance(model, torch.nn.Module):
        raise ConfigError(f"from_torch takes a torch.nn.Module, got {type(model).__name__}")
    class _Tracer(torch.fx.Tracer):  # a model's own `aicf_op` layers stay one fx node
        def is_leaf_module(self, m: Any, qualname: str) -> bool:
            return hasattr(m, AICF_OP) or super().is_leaf_module(m, qualname)

    # arguments after the input that default to None (`forward(self, x, mask=None)`): traced
    # as None, as the model is called with one input (fx guards other defaults with ops the
    # IR has not)
    params = list(inspect.signature(model.forward).parameters.values())[1:]
    defaults = {p.name: None for p in params if p.default is None}
    try:
        gm = torch.fx.GraphModule(model, _Tracer().trace(model, concrete_args=defaults or None))
    except Exception as err:  # fx raises TraceError, TypeError, ... on untraceable code
        raise ConfigError(f"torch.fx cannot trace {type(model).__name__}: "
                          f"{type(err).__name__}: {err}") from err
    imp = _Importer(model, name)
    tracer = imp.tracer
    env: dict[Any, Any] = {}
    outputs: list[SymbolicTensor] = []
    for node in gm.graph.nodes:
        try:
            result = _import_node(imp, gm, node, env, in_features, dtype)
        except ConfigError as err:
            if "fx node" in str(err):
                raise
            raise ConfigError(f"fx node '{node.name}': {err}") from None
        if node.op == "output":
            outputs = result
        else:
            env[node] = result
    graph = tracer.builder.output(*[t.id for t in outputs])
    validate(graph)
    return graph, initial_values(graph, tracer.bound)
