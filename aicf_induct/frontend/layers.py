"""Layers beyond MLPs, PyTorch-named so a native model and its torch twin share parameter
names: `Embedding`, `NumericTokenizer` (FT-Transformer), `MultiheadAttention` (self-attention,
batch first), `Conv2d`, `MaxPool2d`, `AvgPool2d`, `Flatten`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from aicf_induct.errors import ConfigError
from aicf_induct.frontend import functional as F
from aicf_induct.frontend.module import Module, positive_sizes
from aicf_induct.frontend.parameter import Parameter
from aicf_induct.frontend.tensor import SymbolicTensor

IntPair = int | Sequence[int]


class Embedding(Module):
    leaf = True

    def __init__(self, num_embeddings: int, embedding_dim: int) -> None:
        super().__init__()
        positive_sizes(num_embeddings=num_embeddings, embedding_dim=embedding_dim)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = Parameter((num_embeddings, embedding_dim))  # N(0, 1), as torch

    def forward(self, ids: SymbolicTensor) -> SymbolicTensor:
        return F.embedding(ids, self.weight)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"


class NumericTokenizer(Module):
    """x (N, F) -> (N, F, d_token): one learned token per feature, scaled by its value."""

    leaf = True

    def __init__(self, n_features: int, d_token: int, bias: bool = True) -> None:
        super().__init__()
        positive_sizes(n_features=n_features, d_token=d_token)
        self.n_features, self.d_token = n_features, d_token
        self.weight = Parameter((n_features, d_token))
        self.bias = Parameter((n_features, d_token)) if bias else None

    def forward(self, x: SymbolicTensor) -> SymbolicTensor:
        return F.numeric_tokenizer(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"{self.n_features}, d_token={self.d_token}, bias={self.bias is not None}"


class _OutProj(Module):
    """Holds out_proj.weight / out_proj.bias under torch's names; the attention node owns them."""

    def __init__(self, d: int, bias: bool) -> None:
        super().__init__()
        self.weight = Parameter((d, d))
        self.bias = Parameter((d,), "zeros") if bias else None


class MultiheadAttention(Module):
    """Self-attention over (N, T, embed_dim), called as torch's batch-first module:
    `attn(x, x, x)` returns `(out, None)` (attention weights are not an IR value)."""

    leaf = True

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0,
                 bias: bool = True, batch_first: bool = True) -> None:
        super().__init__()
        positive_sizes(embed_dim=embed_dim, num_heads=num_heads)
        if embed_dim % num_heads:
            raise ConfigError(f"num_heads={num_heads} must divide embed_dim={embed_dim}")
        if not batch_first:
            raise ConfigError("MultiheadAttention supports batch_first=True only")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.in_proj_weight = Parameter((3 * embed_dim, embed_dim), "xavier_uniform")
        self.in_proj_bias = Parameter((3 * embed_dim,), "zeros") if bias else None
        self.out_proj = _OutProj(embed_dim, bias)

    def forward(self, query: SymbolicTensor, key: Any = None, value: Any = None,
                need_weights: bool = True, **unsupported: Any) -> tuple[SymbolicTensor, None]:
        if (key is not None and key is not query) or (value is not None and value is not query):
            raise ConfigError("MultiheadAttention supports self-attention only (query, key "
                              "and value the same tensor)")
        if unsupported:
            raise ConfigError(f"MultiheadAttention does not support {sorted(unsupported)}")
        out = F.self_attention(query, self.num_heads, self.in_proj_weight, self.in_proj_bias,
                               self.out_proj.weight, self.out_proj.bias, self.dropout)
        return out, None

    def extra_repr(self) -> str:
        return f"{self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}"


class Conv2d(Module):
    leaf = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntPair,
                 stride: IntPair = 1, padding: IntPair = 0, bias: bool = True) -> None:
        super().__init__()
        positive_sizes(in_channels=in_channels, out_channels=out_channels)
        kh, kw = F._pair(kernel_size, "kernel_size")
        self.stride, self.padding = F._pair(stride, "stride"), F._pair(padding, "padding")
        bound = f"uniform:{1.0 / math.sqrt(in_channels * kh * kw)!r}"  # torch's default
        self.weight = Parameter((out_channels, in_channels, kh, kw), bound)
        self.bias = Parameter((out_channels,), bound) if bias else None

    def forward(self, x: SymbolicTensor) -> SymbolicTensor:
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding)

    def extra_repr(self) -> str:
        o, c, kh, kw = self.weight.shape
        return f"{c}, {o}, kernel_size={[kh, kw]}, stride={self.stride}, padding={self.padding}"


class _Pool2d(Module):
    leaf = True
    mode = ""

    def __init__(self, kernel_size: IntPair, stride: IntPair | None = None,
                 padding: IntPair = 0) -> None:
        super().__init__()
        self.kernel_size = F._pair(kernel_size, "kernel_size")
        self.stride = self.kernel_size if stride is None else F._pair(stride, "stride")
        self.padding = F._pair(padding, "padding")

    def forward(self, x: SymbolicTensor) -> SymbolicTensor:
        pool = F.max_pool2d if self.mode == "max" else F.avg_pool2d
        return pool(x, self.kernel_size, self.stride, self.padding)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxPool2d(_Pool2d):
    mode = "max"


class AvgPool2d(_Pool2d):
    """Padding counts in the average (torch's count_include_pad=True)."""

    mode = "avg"


class Flatten(Module):
    """(N, ...) -> (N, prod(...)): a reshape node (none when the input is already 2-D)."""

    leaf = True

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: SymbolicTensor) -> SymbolicTensor:
        return F.flatten(x, self.start_dim, self.end_dim)
