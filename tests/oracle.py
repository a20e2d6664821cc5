"""Shared oracle helpers: evaluate an IR graph with PyTorch autograd (CPU, float64), and
finite differences. Tests compare our reference ops, interpreter and compiled plans to these."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from aicf_induct.ir.graph import Graph
from aicf_induct.ir.ops import OPS


def torch_op(op: str, ins: list[Any], p: Mapping[str, Any], attrs: Mapping[str, Any],
             training: bool) -> Any:
    import torch
    import torch.nn.functional as F

    a = OPS[op].full_attrs(attrs)
    if op == "linear":
        return F.linear(ins[0], p["weight"], p.get("bias"))
    if op == "relu":
        return F.relu(ins[0])
    if op == "gelu":
        return F.gelu(ins[0], approximate=a["approximate"])
    if op == "tanh":
        return torch.tanh(ins[0])
    if op == "silu":
        return F.silu(ins[0])
    if op == "sigmoid":
        return torch.sigmoid(ins[0])
    if op == "softmax":
        return F.softmax(ins[0], dim=-1)
    if op == "layernorm":
        d = ins[0].shape[-1]
        return F.layer_norm(ins[0], (d,), p.get("weight"), p.get("bias"), a["eps"])
    if op == "batchnorm":
        rm, rv = p["running_mean"].clone(), p["running_var"].clone()
        return F.batch_norm(ins[0], rm, rv, p.get("weight"), p.get("bias"), training,
                            a["momentum"], a["eps"])
    if op == "add":
        return ins[0] + ins[1]
    if op == "concat":
        return torch.cat(ins, dim=a["axis"])
    new_ops = _new_ops()
    if op in new_ops:
        return new_ops[op](ins, p, a, training)
    if op == "cross_entropy":
        return F.cross_entropy(ins[0], ins[1], label_smoothing=a["label_smoothing"])
    if op == "mse":
        return F.mse_loss(ins[0], ins[1].reshape(ins[0].shape))
    raise NotImplementedError(op)


def _attention(ins: list[Any], p: Mapping[str, Any], a: Mapping[str, Any],
               training: bool) -> Any:
    import torch.nn.functional as F

    x = ins[0].transpose(0, 1)  # (T, B, d): PyTorch's functional form is sequence-first
    d = x.shape[-1]
    y, _ = F.multi_head_attention_forward(
        x, x, x, d, a["heads"], p["in_weight"], p.get("in_bias"), None, None, False,
        a["dropout"], p["out_weight"], p.get("out_bias"), training=training, need_weights=False)
    return y.transpose(0, 1)


def _new_ops() -> dict[str, Callable[..., Any]]:
    """PyTorch forms of the ops beyond the MLP set: (ins, params, full attrs, training)."""
    import torch
    import torch.nn.functional as F

    return {
        "reshape": lambda i, p, a, t: i[0].reshape(i[0].shape[0], *a["shape"]),
        "transpose": lambda i, p, a, t: i[0].permute(*a["perm"]),
        "mean": lambda i, p, a, t: i[0].mean(dim=a["axis"], keepdim=a["keepdims"]),
        "sum": lambda i, p, a, t: i[0].sum(dim=a["axis"], keepdim=a["keepdims"]),
        "matmul": lambda i, p, a, t: torch.matmul(i[0], i[1]),
        "embedding": lambda i, p, a, t: F.embedding(i[0], p["weight"]),
        "numeric_tokenizer": lambda i, p, a, t: (
            i[0][..., None] * p["weight"] + p.get("bias", 0.0)),
        "attention": _attention,
        "conv2d": lambda i, p, a, t: F.conv2d(i[0], p["weight"], p.get("bias"),
                                              tuple(a["stride"]), tuple(a["padding"])),
        "pool": lambda i, p, a, t: (F.max_pool2d if a["mode"] == "max" else F.avg_pool2d)(
            i[0], tuple(a["kernel_size"]), tuple(a["stride"]), tuple(a["padding"])),
    }


def torch_forward(graph: Graph, tensors: Mapping[str, Any], feeds: Mapping[str, np.ndarray],
                  training: bool = False) -> dict[str, Any]:
    """Every node's value as a torch tensor, parameters taken from `tensors` by name.
    Dropout is not supported here (its mask is ours); use p=0 or eval mode."""
    import torch

    vals: dict[str, Any] = {}
    for n in graph.nodes:
        if n.op == "input":
            v = feeds[n.id]
            dtype = torch.int64 if v.dtype == np.int64 else torch.float64
            vals[n.id] = torch.tensor(v, dtype=dtype)
        elif n.op == "dropout":
            vals[n.id] = vals[n.inputs[0]]
        else:
            vals[n.id] = torch_op(n.op, [vals[i] for i in n.inputs],
                                  {r: tensors[p] for r, p in n.params.items()}, n.attrs,
                                  training)
    return vals


def torch_graph(graph: Graph, params: Mapping[str, np.ndarray], feeds: Mapping[str, np.ndarray],
                loss: str | None, training: bool = False) -> tuple[dict[str, np.ndarray],
                                                                   dict[str, np.ndarray]]:
    """Node values and (with `loss`) parameter gradients computed by PyTorch autograd."""
    import torch

    tp = {k: torch.tensor(v, dtype=torch.float64,
                          requires_grad=graph.params[k].trainable) for k, v in params.items()}
    vals = torch_forward(graph, tp, feeds, training)
    grads: dict[str, np.ndarray] = {}
    if loss is not None:
        vals[loss].backward()
        grads = {k: (t.grad.numpy() if t.grad is not None else np.zeros(t.shape))
                 for k, t in tp.items() if graph.params[k].trainable}
    return {k: v.detach().numpy() for k, v in vals.items()}, grads


def finite_difference(f: Callable[[], float], x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of scalar f() with respect to array x (modified in place)."""
    g = np.zeros_like(x)
    flat, gflat = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        hi = f()
        flat[i] = old - eps
        lo = f()
        flat[i] = old
        gflat[i] = (hi - lo) / (2 * eps)
    return g


def assert_rel_close(actual: Any, expected: Any, rtol: float = 1e-6, atol: float = 1e-10,
                     what: str = "") -> None:
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), rtol=rtol, atol=atol,
                               err_msg=what)
