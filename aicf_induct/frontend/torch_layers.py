"""torch.nn layers beyond MLPs, replayed through the native functional API for the torch.fx
importer: Embedding, Conv2d, MaxPool2d, AvgPool2d, Flatten, MultiheadAttention, and any
module that declares `aicf_op = "numeric_tokenizer"` (torch has no such layer: a model's own
tokenizer class opts in, with `weight` (F, d) and an optional `bias` (F, d)).

torch is passed in, never imported here, so this module loads without it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aicf_induct.errors import ConfigError
from aicf_induct.frontend import functional as F
from aicf_induct.frontend.parameter import Parameter
from aicf_induct.frontend.tensor import SymbolicTensor

SubParam = Callable[[str, Any, str], Parameter | None]  # (path, module, attr) -> Parameter

# the module attribute that makes a user's torch module an IR op (traced as an fx leaf)
AICF_OP = "aicf_op"


def _no_ceil(path: str, m: Any) -> None:
    if getattr(m, "ceil_mode", False) or getattr(m, "dilation", 1) not in (1, (1, 1)):
        raise ConfigError(f"{type(m).__name__} at '{path}' must use ceil_mode=False and "
                          "dilation 1")


def _conv(nn: Any, path: str, m: Any, x: SymbolicTensor, sub: SubParam) -> SymbolicTensor:
    if m.groups != 1 or m.dilation != (1, 1) or m.padding_mode != "zeros" \
            or isinstance(m.padding, str):
        raise ConfigError(f"nn.Conv2d at '{path}' must have groups=1, dilation=1 and "
                          "numeric zero padding")
    return F.conv2d(x, sub(path, m, "weight"), sub(path, m, "bias"),  # type: ignore[arg-type]
                    list(m.stride), list(m.padding))


def _attention(nn: Any, path: str, m: Any, x: SymbolicTensor,
               sub: SubParam) -> tuple[SymbolicTensor, None]:
    if not m.batch_first or not m._qkv_same_embed_dim or m.bias_k is not None \
            or m.add_zero_attn:
        raise ConfigError(f"nn.MultiheadAttention at '{path}' must be batch_first, with one "
                          "embed_dim for q/k/v, no bias_k/bias_v and no add_zero_attn")
    out = F.self_attention(x, m.num_heads, sub(path, m, "in_proj_weight"),  # type: ignore[arg-type]
                           sub(path, m, "in_proj_bias"),
                           sub(f"{path}.out_proj", m.out_proj, "weight"),  # type: ignore[arg-type]
                           sub(f"{path}.out_proj", m.out_proj, "bias"), float(m.dropout))
    return out, None  # as torch: (output, attention weights)


def layer_op(torch: Any, path: str, m: Any, x: SymbolicTensor, sub: SubParam) -> Any:
    """The value of one call_module of these layers; None if `m` is none of them."""
    nn = torch.nn
    if getattr(m, AICF_OP, None) == "numeric_tokenizer":
        return F.numeric_tokenizer(x, sub(path, m, "weight"),  # type: ignore[arg-type]
                                   sub(path, m, "bias"))
    if isinstance(m, nn.Embedding):
        if m.padding_idx is not None or m.max_norm is not None:
            raise ConfigError(f"nn.Embedding at '{path}' must have no padding_idx or max_norm")
        return F.embedding(x, sub(path, m, "weight"))  # type: ignore[arg-type]
    if isinstance(m, nn.Conv2d):
        return _conv(nn, path, m, x, sub)
    if isinstance(m, nn.MaxPool2d | nn.AvgPool2d):
        _no_ceil(path, m)
        if isinstance(m, nn.AvgPool2d) and (not m.count_include_pad or m.divisor_override):
            raise ConfigError(f"nn.AvgPool2d at '{path}' must count the padding "
                              "(count_include_pad=True, no divisor_override)")
        pool = F.max_pool2d if isinstance(m, nn.MaxPool2d) else F.avg_pool2d
        return pool(x, m.kernel_size, m.stride, m.padding)
    if isinstance(m, nn.Flatten):
        return F.flatten(x, m.start_dim, m.end_dim)
    if isinstance(m, nn.MultiheadAttention):
        return _attention(nn, path, m, x, sub)
    return None
