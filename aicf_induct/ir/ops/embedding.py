"""Token embeddings: `embedding` (integer ids -> rows of a table) and `numeric_tokenizer`
(FT-Transformer's per-feature tokens: x (B, F) -> x[..., None] * weight + bias, (B, F, d))."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from aicf_induct.ir.graph import TensorType
from aicf_induct.ir.ops.base import (
    Array,
    Attrs,
    Grads,
    OpContext,
    OpDef,
    ParamInfo,
    boolean,
    integer,
    register,
    require,
    require_float,
)


def _positive(attrs: Attrs, key: str, op: str) -> int:
    v = attrs.get(key)
    require(isinstance(v, int) and not isinstance(v, bool) and v > 0,
            f"{op} needs attr '{key}' > 0, got {v!r}")
    assert isinstance(v, int)
    return v


def _emb_infer(ins: Sequence[TensorType], attrs: Attrs) -> TensorType:
    t = ins[0]
    require(t.dtype == "int64", f"embedding ids must be int64, got {t}")
    _positive(attrs, "num_embeddings", "embedding")
    d = _positive(attrs, "embedding_dim", "embedding")
    return TensorType((*t.shape, d), "float64")


def _emb_params(ins: Sequence[TensorType], attrs: Attrs) -> dict[str, ParamInfo]:
    shape = (int(attrs["num_embeddings"]), int(attrs["embedding_dim"]))
    return {"weight": ParamInfo(shape, "normal:1.0")}  # PyTorch's nn.Embedding default


def _emb_forward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                 attrs: Attrs) -> Array:
    ids, w = ins[0], params["weight"]
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= w.shape[0]):
        raise IndexError(f"embedding ids must lie in [0, {w.shape[0]}), got "
                         f"[{int(ids.min())}, {int(ids.max())}]")
    return w[ids]


def _emb_backward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array], out: Array,
                  gout: Array, attrs: Attrs, needs: Sequence[bool]) -> Grads:
    w = params["weight"]
    gw = ctx.xp.zeros_like(w)
    ctx.xp.add.at(gw, ins[0].reshape(-1), gout.reshape(-1, w.shape[1]))  # repeated ids add up
    return [None], {"weight": gw}


register(OpDef(name="embedding", kind="layer", arity=1,
               attrs={"num_embeddings": None, "embedding_dim": None},
               checks={"num_embeddings": integer(), "embedding_dim": integer()},
               infer=_emb_infer, forward=_emb_forward, backward=_emb_backward,
               params=_emb_params, differentiable_inputs=(),
               doc="rows of weight (num_embeddings, embedding_dim) picked by int64 ids"))


def _tok_infer(ins: Sequence[TensorType], attrs: Attrs) -> TensorType:
    t = ins[0]
    require_float(t)
    require(len(t.shape) == 2 and t.shape[1] is not None,
            f"numeric_tokenizer expects (batch, features), got {t}")
    d = _positive(attrs, "d_token", "numeric_tokenizer")
    return TensorType((t.shape[0], t.shape[1], d), t.dtype)


def _tok_params(ins: Sequence[TensorType], attrs: Attrs) -> dict[str, ParamInfo]:
    f, d = int(ins[0].shape[1] or 0), int(attrs["d_token"])
    bound = f"uniform:{1.0 / math.sqrt(d)!r}"  # as rtdl's NumericalFeatureTokenizer
    out = {"weight": ParamInfo((f, d), bound)}
    if attrs.get("bias", True):
        out["bias"] = ParamInfo((f, d), bound)
    return out


def _tok_forward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                 attrs: Attrs) -> Array:
    y = ins[0][..., None] * params["weight"]  # (B, F, 1) * (F, d)
    return y + params["bias"] if "bias" in params else y


def _tok_backward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array], out: Array,
                  gout: Array, attrs: Attrs, needs: Sequence[bool]) -> Grads:
    x = ins[0]
    grads = {"weight": (gout * x[..., None]).sum(axis=0)}
    if "bias" in params:
        grads["bias"] = gout.sum(axis=0)
    gx = (gout * params["weight"]).sum(axis=-1) if needs[0] else None
    return [gx], grads


register(OpDef(name="numeric_tokenizer", kind="layer", arity=1,
               attrs={"d_token": None, "bias": True},
               checks={"d_token": integer(), "bias": boolean},
               infer=_tok_infer, forward=_tok_forward, backward=_tok_backward,
               params=_tok_params,
               doc="per-feature tokens x[..., None] * weight + bias; weight, bias (F, d)"))
