"""Attention, tokens, convolution and pooling in the frontend: native modules trace to the
same IR as their torch twins imported through torch.fx, with torch's forward as the oracle."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

import aicf_induct.frontend as fe
from aicf_induct.errors import ConfigError
from aicf_induct.ir import fingerprint, to_json, validate
from aicf_induct.ir.patterns import patterns
from tests.frontend.helpers import evaluate

torch = pytest.importorskip("torch")
nn = torch.nn

pytestmark = pytest.mark.torch


def check_same_model(tmodel: object, native: fe.Module, in_shape: Sequence[int],
                     x: np.ndarray, dtype: str = "float64") -> None:
    """Same IR as the native model, values equal to the state_dict, eval forward = torch's."""
    assert isinstance(tmodel, nn.Module)
    tmodel = tmodel.double().eval()
    g, values = fe.from_torch(tmodel, list(in_shape), dtype=dtype)
    validate(g)
    gn = fe.trace(native, list(in_shape), dtype=dtype)
    assert to_json(g) == to_json(gn)
    assert fingerprint(g) == fingerprint(gn)
    state = tmodel.state_dict()
    assert set(values) == set(g.params) == set(state)
    for name, v in values.items():
        np.testing.assert_array_equal(v, state[name].numpy())
    with torch.no_grad():
        expect = tmodel(torch.from_numpy(x))
    (got,) = evaluate(g, values, x)
    np.testing.assert_allclose(got, expect.numpy(), rtol=0, atol=1e-10)


class TorchTokenizer(nn.Module):
    aicf_op = "numeric_tokenizer"  # imported as the IR op (torch has no such layer)

    def __init__(self, n_features: int, d: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_features, d))
        self.bias = nn.Parameter(torch.randn(n_features, d))

    def forward(self, x: object) -> object:
        return x[..., None] * self.weight + self.bias  # type: ignore[index]


def _ftt_layers(lib: object, tokenizer: object) -> dict[str, object]:
    L = lib  # torch.nn or aicf_induct.frontend: the same constructor names
    return {"tok": tokenizer, "attn": L.MultiheadAttention(8, 2, batch_first=True),  # type: ignore[attr-defined]
            "norm1": L.LayerNorm(8), "ff1": L.Linear(8, 16), "act": L.ReLU(),  # type: ignore[attr-defined]
            "ff2": L.Linear(16, 8), "norm2": L.LayerNorm(8), "head": L.Linear(8, 3)}  # type: ignore[attr-defined]


def _ftt_forward(m: object, x: object) -> object:
    h = m.tok(x)  # type: ignore[attr-defined]
    a = m.attn(h, h, h, need_weights=False)[0]  # type: ignore[attr-defined]
    h = m.norm1(h + a)  # type: ignore[attr-defined]
    h = m.norm2(h + m.ff2(m.act(m.ff1(h))))  # type: ignore[attr-defined]
    return m.head(h.mean(1))  # type: ignore[attr-defined,union-attr]


class TorchFTT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        for k, v in _ftt_layers(nn, TorchTokenizer(5, 8)).items():
            setattr(self, k, v)

    forward = _ftt_forward


class NativeFTT(fe.Module):
    def __init__(self) -> None:
        super().__init__()
        for k, v in _ftt_layers(fe, fe.NumericTokenizer(5, 8)).items():
            setattr(self, k, v)

    forward = _ftt_forward


def test_ft_transformer_native_and_torch_give_one_ir() -> None:
    torch.manual_seed(0)
    x = np.random.default_rng(0).normal(size=(6, 5))
    check_same_model(TorchFTT(), NativeFTT(), [5], x)
    p = patterns(fe.trace(NativeFTT(), 5))
    assert (p["attention.blocks"], p["attention.heads"], p["token.width"]) == (1.0, 2.0, 8.0)


def _cnn(L: object) -> object:
    return L.Sequential(L.Conv2d(1, 4, 3, padding=1), L.ReLU(), L.MaxPool2d(2),  # type: ignore[attr-defined]
                        L.Conv2d(4, 6, (3, 2), stride=(1, 2)), L.ReLU(),  # type: ignore[attr-defined]
                        L.AvgPool2d(2, stride=1, padding=1), L.Flatten(),  # type: ignore[attr-defined]
                        L.Linear(6 * 3 * 3, 10))  # type: ignore[attr-defined]


def test_small_cnn_native_and_torch_give_one_ir() -> None:
    torch.manual_seed(1)
    x = np.random.default_rng(1).normal(size=(4, 1, 8, 8))
    check_same_model(_cnn(nn), _cnn(fe), [1, 8, 8], x)  # type: ignore[arg-type]
    p = patterns(fe.trace(_cnn(fe), [1, 8, 8]))  # type: ignore[arg-type]
    assert (p["conv.stages"], p["conv.channels_max"]) == (2.0, 6.0)


class Bag(nn.Module):
    """Embedded ids, attention scores by matmul, pooled by sum and transpose."""

    def __init__(self, lib: object) -> None:
        super().__init__()
        self.emb = lib.Embedding(7, 4)  # type: ignore[attr-defined]
        self.head = lib.Linear(4, 2)  # type: ignore[attr-defined]

    def forward(self, ids: object) -> object:
        e = self.emb(ids)
        s = (e @ e.transpose(1, 2)).softmax(-1)  # type: ignore[attr-defined]
        return self.head((s @ e).sum(1))


class NativeBag(fe.Module):
    forward = Bag.forward

    def __init__(self) -> None:
        super().__init__()
        self.emb, self.head = fe.Embedding(7, 4), fe.Linear(4, 2)


def test_embedding_matmul_transpose_sum_native_and_torch_give_one_ir() -> None:
    torch.manual_seed(2)
    ids = np.random.default_rng(2).integers(0, 7, size=(5, 6))
    check_same_model(Bag(nn), NativeBag(), [6], ids, dtype="int64")


def test_first_unsupported_fx_node_is_named() -> None:
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(1, 2, 3)
            self.up = nn.Upsample(scale_factor=2)

        def forward(self, x: object) -> object:
            return torch.cumsum(self.up(self.conv(x)), 1)

    with pytest.raises(ConfigError, match=r"fx node 'up'.*call_module 'up' \(Upsample\)"):
        fe.from_torch(M().double(), [1, 6, 6])


def test_cross_attention_and_attention_weights_are_refused_naming_the_node() -> None:
    class Cross(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q = nn.Linear(4, 4)
            self.attn = nn.MultiheadAttention(4, 1, batch_first=True)

        def forward(self, x: object) -> object:
            return self.attn(self.q(x), x, x)[0]

    with pytest.raises(ConfigError, match=r"fx node 'attn'.*self-attention only"):
        fe.from_torch(Cross(), [3, 4])

    class Weights(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(4, 1, batch_first=True)

        def forward(self, x: object) -> object:
            return self.attn(x, x, x)[1]

    with pytest.raises(ConfigError, match=r"fx node 'getitem'.*attention weights"):
        fe.from_torch(Weights(), [3, 4])


@pytest.mark.parametrize("call", [
    lambda m, x: m.attn(x, x, x, attn_mask=m.causal, need_weights=False)[0],
    lambda m, x: m.attn(x, x, x, key_padding_mask=m.padding)[0],
    lambda m, x: m.attn(x, x, x, m.padding)[0],  # positional
    lambda m, x: m.attn(x, x, x, need_weights=False, attn_mask=m.causal, is_causal=True)[0],
])
def test_an_attention_mask_is_refused_not_dropped(call: object) -> None:
    """The import computed unmasked attention, silently: 0.27 off torch's output."""
    class Masked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(4, 2, batch_first=True)
            self.register_buffer("causal", torch.triu(torch.full((3, 3), float("-inf")), 1))
            self.register_buffer("padding", torch.tensor([[False, False, True]]))

        def forward(self, x: object) -> object:
            return call(self, x)  # type: ignore[operator]

    with pytest.raises(ConfigError, match=r"^nn.MultiheadAttention at fx node 'attn': "
                                          r"(attn_mask|key_padding_mask) is not supported"):
        fe.from_torch(Masked(), [3, 4])


def test_unpacking_attention_imports_unless_the_weights_are_used() -> None:
    class Unpacked(nn.Module):
        def __init__(self, use_weights: bool) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(4, 2, batch_first=True)
            self.use_weights = use_weights

        def forward(self, x: object) -> object:
            out, w = self.attn(x, x, x)  # fx writes getitem_1 for w, used or not
            return (out, w) if self.use_weights else out

    torch.manual_seed(3)
    model = Unpacked(False).double().eval()
    g, values = fe.from_torch(model, [3, 4])
    x = np.random.default_rng(3).normal(size=(5, 3, 4))
    with torch.no_grad():
        expect = model(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(evaluate(g, values, x)[0], expect, rtol=0, atol=1e-10)
    with pytest.raises(ConfigError, match=r"^fx node 'getitem_1' reads attention weights"):
        fe.from_torch(Unpacked(True), [3, 4])


def test_native_layers_refuse_what_the_ir_cannot_express() -> None:
    with pytest.raises(ConfigError, match="must divide"):
        fe.MultiheadAttention(6, 4)
    with pytest.raises(ConfigError, match="start_dim=1"):
        fe.trace(fe.Flatten(start_dim=2), [2, 3, 4])
    with pytest.raises(ConfigError, match="batch axis"):
        fe.trace(lambda x: x.mean(0), [3, 4])
    with pytest.raises(ConfigError, match="self-attention only"):
        fe.trace(lambda x: fe.MultiheadAttention(4, 2)(x, fe.Linear(4, 4)(x), x)[0], [3, 4])
