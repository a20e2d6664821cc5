"""torch.fx import against the native definition of the same model, with torch as the oracle."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import aicf_induct.frontend as fe
from aicf_induct.errors import ConfigError
from aicf_induct.frontend import functional as F
from aicf_induct.frontend.specs import MLPSpec, parse_model_spec
from aicf_induct.ir import fingerprint, to_json, validate
from tests.frontend.helpers import evaluate

torch = pytest.importorskip("torch")
nn = torch.nn
tF = torch.nn.functional

pytestmark = pytest.mark.torch


def check_same_model(tmodel: object, native: fe.Module, in_features: int,
                     batch: int = 7) -> None:
    """Same IR as the native model (fingerprint and canonical JSON), values equal to the
    state_dict, and the graph's eval forward equal to torch's in float64."""
    assert isinstance(tmodel, nn.Module)
    tmodel = tmodel.double().eval()
    g, values = fe.from_torch(tmodel, in_features)
    validate(g)
    gn = fe.trace(native, in_features)
    assert fingerprint(g) == fingerprint(gn)
    assert to_json(g) == to_json(gn)
    state = tmodel.state_dict()
    assert set(values) == set(g.params) <= set(state)
    for name, v in values.items():
        assert v.dtype == np.float64
        np.testing.assert_array_equal(v, state[name].numpy())
    x = np.random.default_rng(1).normal(size=(batch, in_features))
    with torch.no_grad():
        expect = tmodel(torch.from_numpy(x))
    expect = expect if isinstance(expect, tuple) else (expect,)
    got = evaluate(g, values, x)
    assert len(got) == len(expect)
    for a, b in zip(got, expect, strict=True):
        np.testing.assert_allclose(a, b.numpy(), rtol=0, atol=1e-10)


def randomize_norm_stats(model: object) -> None:
    """Non-trivial affine and running statistics, so eval-mode norms are really tested."""
    gen = torch.Generator().manual_seed(0)
    for m in model.modules():  # type: ignore[attr-defined]
        if isinstance(m, nn.BatchNorm1d | nn.LayerNorm):
            with torch.no_grad():
                m.weight.copy_(torch.rand(m.weight.shape, generator=gen) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen))
        if isinstance(m, nn.BatchNorm1d):
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=gen))
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=gen) + 0.5)


def test_sequential_with_gelu_layernorm_dropout() -> None:
    tmodel = nn.Sequential(nn.Linear(5, 16), nn.GELU(), nn.LayerNorm(16), nn.Dropout(0.2),
                           nn.Linear(16, 16), nn.GELU(approximate="tanh"), nn.Identity(),
                           nn.Linear(16, 3))
    randomize_norm_stats(tmodel)
    native = fe.Sequential(fe.Linear(5, 16), fe.GELU(), fe.LayerNorm(16), fe.Dropout(0.2),
                           fe.Linear(16, 16), fe.GELU(approximate="tanh"), fe.Identity(),
                           fe.Linear(16, 3))
    check_same_model(tmodel, native, 5)


class TorchResidualConcat(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(4, 8)
        self.block = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8))
        self.norm = nn.BatchNorm1d(8)
        self.left = nn.Linear(8, 3)
        self.right = nn.Sequential(nn.Linear(8, 5), nn.SiLU())
        self.head = nn.Linear(16, 2)

    def forward(self, x):  # type: ignore[no-untyped-def]
        h = torch.relu(self.inp(x))
        h = self.norm(h + self.block(h))
        z = torch.cat([self.left(h), self.right(h), tF.gelu(h)], dim=1)  # (N, 3 + 5 + 8)
        return self.head(z), torch.softmax(z, dim=-1)


class NativeResidualConcat(fe.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = fe.Linear(4, 8)
        self.block = fe.Sequential(fe.Linear(8, 8), fe.Tanh(), fe.Linear(8, 8))
        self.norm = fe.BatchNorm1d(8)
        self.left = fe.Linear(8, 3)
        self.right = fe.Sequential(fe.Linear(8, 5), fe.SiLU())
        self.head = fe.Linear(16, 2)

    def forward(self, x: fe.SymbolicTensor) -> tuple[fe.SymbolicTensor, fe.SymbolicTensor]:
        h = F.relu(self.inp(x))
        h = self.norm(h + self.block(h))
        z = F.concat([self.left(h), self.right(h), F.gelu(h)])
        return self.head(z), F.softmax(z, dim=-1)


def test_module_with_residual_add_concat_and_two_outputs() -> None:
    tmodel = TorchResidualConcat()
    randomize_norm_stats(tmodel)
    check_same_model(tmodel, NativeResidualConcat(), 4)
    g, _ = fe.from_torch(tmodel, 4)
    assert [n.op for n in g.nodes].count("add") == 1 and g.node("concat").op == "concat"
    assert "norm.num_batches_tracked" not in g.params


class TorchMethods(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 6)
        self.b = nn.Linear(3, 6)
        self.drop = nn.Dropout(0.5)
        self.soft = nn.Softmax(dim=1)

    def forward(self, x):  # type: ignore[no-untyped-def]
        h = self.a(x).relu().add(self.b(x).sigmoid())
        h = tF.dropout(h.tanh(), 0.1, training=self.training)  # eval: no node
        h = torch.add(tF.relu(h), torch.sigmoid(self.drop(h)))
        return self.soft(tF.gelu(h, approximate="tanh") + torch.tanh(h))


class NativeMethods(fe.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = fe.Linear(3, 6)
        self.b = fe.Linear(3, 6)
        self.drop = fe.Dropout(0.5)
        self.soft = fe.Softmax(dim=1)

    def forward(self, x: fe.SymbolicTensor) -> fe.SymbolicTensor:
        h = self.a(x).relu() + self.b(x).sigmoid()
        h = F.dropout(h.tanh(), 0.1, training=self.training)
        h = F.relu(h) + F.sigmoid(self.drop(h))
        return self.soft(F.gelu(h, approximate="tanh") + F.tanh(h))


def test_functional_calls_and_tensor_methods() -> None:
    check_same_model(TorchMethods(), NativeMethods().eval(), 3)
    g_train, _ = fe.from_torch(TorchMethods().train(), 3)
    assert sum(n.op == "dropout" for n in g_train.nodes) == 2


def test_root_leaf_and_functional_parameters() -> None:
    check_same_model(nn.Linear(3, 2), fe.Linear(3, 2), 3)

    class TorchFn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(4, 3))
            self.g = nn.Parameter(torch.rand(4) + 0.5)
            self.b = nn.Parameter(torch.randn(4))

        def forward(self, x):  # type: ignore[no-untyped-def]
            return tF.layer_norm(tF.linear(x, self.w), (4,), self.g, self.b, 1e-3)

    class NativeFn(fe.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = fe.Parameter((4, 3))
            self.g = fe.Parameter((4,))
            self.b = fe.Parameter((4,))

        def forward(self, x: fe.SymbolicTensor) -> fe.SymbolicTensor:
            return F.layer_norm(F.linear(x, self.w), self.g, self.b, 1e-3)

    check_same_model(TorchFn(), NativeFn(), 3)


class TorchMLP(nn.Module):
    """The torch twin of `build_mlp(spec, ...)`, written independently."""

    def __init__(self, spec: MLPSpec, n_in: int, n_out: int) -> None:
        super().__init__()
        acts = {"relu": nn.ReLU, "gelu": nn.GELU, "gelu_tanh": lambda: nn.GELU("tanh"),
                "tanh": nn.Tanh, "silu": nn.SiLU, "sigmoid": nn.Sigmoid}
        blocks: list[nn.Module] = []
        prev = n_in
        for w in spec.hidden_widths():
            parts: OrderedDict[str, nn.Module] = OrderedDict(linear=nn.Linear(prev, w))
            norm = {"layernorm": nn.LayerNorm, "batchnorm": nn.BatchNorm1d,
                    "none": lambda _: None}[spec.norm](w)
            for part in (["norm", "act"] if spec.norm_place == "pre" else ["act", "norm"]):
                if part == "act":
                    parts["act"] = acts[spec.act]()
                elif norm is not None:
                    parts["norm"] = norm
            if spec.dropout:
                parts["dropout"] = nn.Dropout(spec.dropout)
            block = nn.Sequential(parts)
            blocks.append(TorchResidual(block) if spec.residual and prev == w else block)
            prev = w
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(prev, n_out)

    def forward(self, x):  # type: ignore[no-untyped-def]
        return self.head(self.blocks(x))


class TorchResidual(nn.Module):
    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.block = block

    def forward(self, x):  # type: ignore[no-untyped-def]
        return x + self.block(x)


@pytest.mark.parametrize("text", [
    "mlp",
    "mlp:depth=3,width=8,act=gelu,norm=layernorm,residual=true,dropout=0.1",
    "mlp:depth=4,width=16,act=gelu_tanh,norm=batchnorm,norm_place=post,profile=bottleneck,"
    "residual=true",
    "mlp:depth=3,width=32,act=silu,profile=funnel",
    "mlp:depth=3,width=32,act=sigmoid,profile=expand,norm=layernorm,norm_place=post",
    "mlp:depth=0",
])
def test_spec_mlp_matches_its_torch_twin(text: str) -> None:
    spec = parse_model_spec(text)
    tmodel = TorchMLP(spec, 8, 3)
    randomize_norm_stats(tmodel)
    check_same_model(tmodel, fe.build_mlp(spec, 8, 3), 8)


def test_float32_import() -> None:
    g, values = fe.from_torch(nn.Sequential(nn.Linear(3, 2)), 3, dtype="float32", name="m")
    assert g.name == "m" and g.params["0.weight"].dtype == "float32"
    assert all(v.dtype == np.float32 for v in values.values())


class AddsABuffer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("c", torch.ones(3))

    def forward(self, x):  # type: ignore[no-untyped-def]
        return x + self.c


class Branches(nn.Module):
    def forward(self, x):  # type: ignore[no-untyped-def]
        return x if x.sum() > 0 else -x


class Scaled(nn.Module):
    def forward(self, x):  # type: ignore[no-untyped-def]
        return torch.relu(x) * 2


def _with_nan() -> object:
    m = nn.Sequential(nn.Linear(3, 2))
    with torch.no_grad():
        m[0].weight[0, 1] = float("nan")
    return m


@pytest.mark.parametrize(("model", "message"), [
    (Scaled(), "unsupported torch op at fx node 'mul': call_function _operator.mul"),
    (nn.Sequential(nn.Linear(3, 3), nn.ELU()),
     "unsupported torch op at fx node '_1': call_module '1' (ELU)"),
    (nn.Sequential(nn.Linear(3, 3), nn.Softmax(dim=0)), "softmax supports only the last axis"),
    (nn.Sequential(nn.LayerNorm(3, bias=False)), "both weight and bias"),
    (nn.Sequential(nn.BatchNorm1d(3, momentum=None)), "float momentum"),
    (AddsABuffer(), "fx node 'add': parameter or buffer 'c' used directly as the other addend: "
                    "only the weights of layers"),
    (Branches(), "torch.fx cannot trace Branches: TraceError"),
    # said "invalid IR: node '0': weight must be a Parameter"
    (nn.Sequential(nn.utils.parametrizations.weight_norm(nn.Linear(3, 3))),
     "'0' (ParametrizedLinear) computes its weight (weight_norm, spectral_norm"),
    (object(), "from_torch takes a torch.nn.Module, got object"),
    # NaN weights were imported, for `train --values` to refuse later; a lazy module and a
    # model on the meta device were tracebacks (ValueError, NotImplementedError)
    (_with_nan(), "parameter '0.weight' has 1 non-finite value(s) (NaN or infinity)"),
    (nn.Sequential(nn.LazyLinear(2)), "parameter '0.weight' has no values yet (a lazy module"),
    (nn.Sequential(nn.Linear(3, 2, device="meta")), "has no values yet"),
])
def test_unsupported_torch_models_raise_config_error(model: object, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        fe.from_torch(model, 3)
    assert message in str(err.value)


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(3, 3), nn.Linear(3, 3)
        self.b.weight = self.a.weight

    def forward(self, x):  # type: ignore[no-untyped-def]
        return self.b(torch.relu(self.a(x)))


class Reuse(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 3)

    def forward(self, x):  # type: ignore[no-untyped-def]
        return self.a(torch.relu(self.a(x)))


def _frozen() -> nn.Module:
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    model[0].requires_grad_(False)
    return model


class MatmulsAParameter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.W = nn.Parameter(torch.ones(3, 3))

    def forward(self, x):  # type: ignore[no-untyped-def]
        return x @ self.W


class ScalesTheBatch(nn.Module):
    def forward(self, x):  # type: ignore[no-untyped-def]
        return x.view(x.size(0) * 3, 1).view(-1, 3)


class CastsIds(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.out = nn.Linear(3, 2)

    def forward(self, x):  # type: ignore[no-untyped-def]
        return self.out(x.float())


@pytest.mark.parametrize(("model", "dtype", "message"), [
    # shared weights were imported as two copies, trained apart: the user's model untied
    (Tied(), "float64", "fx node 'b': parameters 'a.weight' and 'b.weight' share storage (tied "
                        "weights); in the IR each parameter has one owner node"),
    # a module called twice gave the IR's internal "invalid IR: node 'a_0': parameter name"
    (Reuse(), "float64", "fx node 'a_1': parameter 'a.weight' is used again after node 'a'; in "
                         "the IR each parameter has one owner node"),
    # a frozen layer was imported as trainable
    (_frozen(), "float64", "fx node '_0': parameter '0.weight' is frozen (requires_grad=False); "
                           "the IR trains every parameter"),
    (MatmulsAParameter(), "float64", "fx node 'matmul': parameter or buffer 'W' used directly "
                                     "as b: only the weights of layers (nn.Linear, F.linear,"),
    (ScalesTheBatch(), "float64", "fx node 'mul' computes with the batch size, which the IR "
                                  "leaves open: reshape with -1 first, as x.view(-1, ...)"),
    (CastsIds(), "int64", "fx node 'float_1': float() of int64 tensor 'x' has no IR op; only a "
                          "float-to-float cast"),
    # the weight was blamed: "invalid IR: node '0': weight has shape [8, 4], linear needs [8, 5]"
    (nn.Sequential(nn.Linear(4, 8)), "float64", "fx node '_0': linear at '0' takes 4 input "
                                                "features, the declared input size is 3"),
])
def test_models_the_ir_cannot_hold_are_refused_naming_the_node(model: object, dtype: str,
                                                                message: str) -> None:
    with pytest.raises(ConfigError) as err:
        fe.from_torch(model, 3, dtype=dtype)
    assert str(err.value).startswith(message)


class Idioms(nn.Module):
    """Batch-size reshapes and the casts and copies that change nothing in a float model."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 6)
        self.b = nn.Linear(6, 2)

    def forward(self, x):  # type: ignore[no-untyped-def]
        h = x.view(x.size(0), 2, 2).reshape(x.shape[0], -1).contiguous()
        h = torch.relu(self.a(h.float().to(torch.float64).double()))
        return self.b(h.view(x.size()[0], 3, 2).flatten(1))


def test_batch_size_reshapes_and_no_op_casts_import() -> None:
    model = Idioms().double().eval()
    g, values = fe.from_torch(model, 4)
    assert [n.op for n in g.nodes] == ["input", "reshape", "reshape", "linear", "relu",
                                       "reshape", "reshape", "linear"]
    x = np.random.default_rng(0).normal(size=(5, 4))
    with torch.no_grad():
        expect = model(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(evaluate(g, values, x)[0], expect, rtol=0, atol=1e-6)  # float()


class Masked(nn.Module):
    """The usual optional second argument: the model is called with x alone."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 3)

    def forward(self, x, mask=None):  # type: ignore[no-untyped-def]
        h = self.a(x)
        if mask is not None:
            h = h * mask
        return torch.relu(h)


def test_an_argument_that_defaults_to_none_is_traced_as_none() -> None:
    """`forward(self, x, mask=None)` was refused: 'from_torch supports one input; fx node
    'mask' is another'."""
    model = Masked().double().eval()
    g, values = fe.from_torch(model, 4)
    assert [n.op for n in g.nodes] == ["input", "linear", "relu"]
    x = np.random.default_rng(0).normal(size=(5, 4))
    with torch.no_grad():
        expect = model(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(evaluate(g, values, x)[0], expect, rtol=0, atol=1e-12)


class AttentionWeights(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(4, 1, batch_first=True)

    def forward(self, x):  # type: ignore[no-untyped-def]
        return self.attn(x, x, x)  # (out, weights)


def test_a_model_returning_attention_weights_is_told_to_return_the_output_only() -> None:
    """It said "a model output must be a tensor computed from the input, got None"."""
    with pytest.raises(ConfigError, match=r"a model output is None: attention weights .* "
                                          r"return its first output only$"):
        fe.from_torch(AttentionWeights(), (2, 4))
