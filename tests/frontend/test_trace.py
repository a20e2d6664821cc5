from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import aicf_induct.frontend as fe
from aicf_induct.errors import AicfError, ConfigError, IRError
from aicf_induct.frontend import functional as F
from aicf_induct.ir import OPS, fingerprint, from_json, to_json, validate
from tests.frontend.helpers import evaluate


def small_mlp() -> fe.Module:
    return fe.Sequential(fe.Linear(4, 8), fe.ReLU(), fe.Linear(8, 8), fe.Tanh(), fe.Linear(8, 2))


def test_trace_sequential_gives_valid_graph_named_by_module_paths() -> None:
    g = fe.trace(small_mlp(), 4, name="tiny")
    types = validate(g)
    assert [(n.id, n.op) for n in g.nodes] == [
        ("x", "input"), ("0", "linear"), ("1", "relu"), ("2", "linear"), ("3", "tanh"),
        ("4", "linear")]
    assert list(g.params) == ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"]
    assert g.params["0.weight"].shape == (8, 4)
    assert g.params["0.weight"].init == OPS["linear"].params(
        [types["x"]], {"out_features": 8})["weight"].init
    assert g.outputs == ["4"] and types["4"].shape == (None, 2)
    assert g.name == "tiny" and g.param_count() == 4 * 8 + 8 + 8 * 8 + 8 + 8 * 2 + 2
    assert from_json(to_json(g)) == g


def test_module_registers_state_in_assignment_order() -> None:
    class Net(fe.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = fe.Sequential(fe.Linear(3, 5), fe.BatchNorm1d(5))
            self.scale = fe.Parameter((2, 5), init="normal:0.1")
            self.head = fe.Linear(5, 2, bias=False)

        def forward(self, x: fe.SymbolicTensor) -> fe.SymbolicTensor:
            return F.linear(self.body(x), self.scale)

    net = Net()
    assert [n for n, _ in net.named_modules()] == ["", "body", "body.0", "body.1", "head"]
    assert [n for n, _ in net.named_parameters()] == [
        "scale", "body.0.weight", "body.0.bias", "body.1.weight", "body.1.bias", "head.weight"]
    assert [n for n, _ in net.named_buffers()] == ["body.1.running_mean", "body.1.running_var"]
    assert net.eval() is net and not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    g = fe.trace(net, 3)
    # `head` is never called, so it is not in the graph; the functional linear gets a fresh id.
    assert [n.id for n in g.nodes] == ["x", "body.0", "body.1", "linear"]
    assert g.node("linear").params == {"weight": "scale"}
    assert g.params["scale"].init == "normal:0.1"
    assert not g.params["body.1.running_var"].trainable


def test_trace_with_values_is_deterministic_and_uses_given_values() -> None:
    model = small_mlp()
    w = np.arange(32, dtype=float).reshape(8, 4)
    model.load_state_dict({"0.weight": w})
    g, v1 = fe.trace_with_values(model, 4, seed=3)
    _, v2 = fe.trace_with_values(model, 4, seed=3)
    _, v3 = fe.trace_with_values(model, 4, seed=4)
    assert list(v1) == list(g.params)
    assert all(np.array_equal(v1[k], v2[k]) for k in v1)
    assert not np.array_equal(v1["2.weight"], v3["2.weight"])
    assert np.array_equal(v1["0.weight"], w) and v1["0.weight"] is not w
    bound = 1 / np.sqrt(8)
    assert np.all(np.abs(v1["2.weight"]) <= bound)
    _, v32 = fe.trace_with_values(model, 4, dtype="float32")
    assert all(a.dtype == np.float32 for a in v32.values())


def test_traced_forward_matches_numpy() -> None:
    model = fe.Sequential(fe.Linear(4, 6), fe.GELU("tanh"), fe.LayerNorm(6), fe.Dropout(0.3),
                          fe.Linear(6, 3), fe.Softmax(dim=-1))
    g, v = fe.trace_with_values(model, 4, seed=1)
    x = np.random.default_rng(0).normal(size=(5, 4))
    (y,) = evaluate(g, v, x)
    h = x @ v["0.weight"].T + v["0.bias"]
    h = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
    h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5)
    z = h @ v["4.weight"].T + v["4.bias"]
    expect = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
    np.testing.assert_allclose(y, expect, rtol=1e-12, atol=1e-12)


def test_residual_concat_and_multiple_outputs() -> None:
    class Net(fe.Module):
        def __init__(self) -> None:
            super().__init__()
            self.res = fe.Residual(fe.Sequential(fe.Linear(4, 4), fe.SiLU()))
            self.cat = fe.Concat(fe.Linear(4, 3), fe.Sigmoid())
            self.out = fe.Linear(7, 2)

        def forward(self, x: fe.SymbolicTensor) -> tuple[fe.SymbolicTensor, ...]:
            h = self.res(x)
            return self.out(self.cat(h)), h.relu()

    g = fe.trace(Net(), 4)
    assert [(n.id, n.op, n.inputs) for n in g.nodes] == [
        ("x", "input", ()), ("res.block.0", "linear", ("x",)),
        ("res.block.1", "silu", ("res.block.0",)), ("add", "add", ("x", "res.block.1")),
        ("cat.branches.0", "linear", ("add",)), ("cat.branches.1", "sigmoid", ("add",)),
        ("concat", "concat", ("cat.branches.0", "cat.branches.1")),
        ("out", "linear", ("concat",)), ("relu", "relu", ("add",))]
    assert g.outputs == ["out", "relu"]


def test_sum_of_branches_traces_as_adds() -> None:
    branches = [fe.Linear(3, 2) for _ in range(3)]
    g = fe.trace(lambda x: sum(b(x) for b in branches), 3)
    assert [n.op for n in g.nodes] == ["input", "linear", "linear", "add", "linear", "add"]


def test_a_module_called_twice_without_parameters_gets_fresh_ids() -> None:
    act = fe.ReLU()
    model = fe.Sequential(fe.Linear(3, 3), act)
    g = fe.trace(lambda x: act(model(x)), 3)  # a plain callable traces too
    assert [n.op for n in g.nodes] == ["input", "linear", "relu", "relu"]
    assert len({n.id for n in g.nodes}) == 4


def test_root_leaf_module_and_functional_losses() -> None:
    g = fe.trace(fe.Linear(3, 2), 3)
    assert [n.id for n in g.nodes] == ["x", "linear"] and list(g.params) == ["weight", "bias"]
    lin = fe.Linear(3, 4)

    def loss(x: fe.SymbolicTensor, y: fe.SymbolicTensor) -> fe.SymbolicTensor:
        return F.cross_entropy(lin(x), y, label_smoothing=0.1)

    g2 = fe.trace(loss, 3, extra_inputs={"y": ([None], "int64")})
    assert [n.op for n in g2.nodes] == ["input", "input", "linear", "cross_entropy"]
    assert g2.node("cross_entropy").attrs == {"label_smoothing": 0.1}
    g3 = fe.trace(lambda x, t: F.mse_loss(x, t), 3, extra_inputs={"t": (3, "float64")})
    assert g3.nodes[-1].op == "mse" and validate(g3)["mse"].shape == ()


@pytest.mark.parametrize(("forward", "match"), [
    (lambda x: x * 2, r"'\*' on traced tensor 'x' has no IR op"),
    # every other arithmetic the IR lacks: the same message, not Python's TypeError
    (lambda x: -x, r"^'unary -' on traced tensor 'x' has no IR op \(supported: \+ and @ of two"),
    (lambda x: x / 2, r"^'/' on traced tensor 'x' has no IR op"),
    (lambda x: 2 / x, r"^'/' on traced tensor 'x' has no IR op"),
    (lambda x: x ** 2, r"^'\*\*' on traced tensor 'x' has no IR op"),
    (lambda x: x[:, 0], r"^'\[...\] \(indexing\)' on traced tensor 'x' has no IR op"),
    (lambda x: x + 1.0, r"^'\+ 1.0' on traced tensor 'x' has no IR op"),
    (lambda x: 1.0 + x, r"^'1.0 \+' on traced tensor 'x' has no IR op"),
    (lambda x: x @ np.ones((3, 3)), r"^'@ ndarray' on traced tensor 'x' has no IR op"),
    (lambda x: F.softmax(x, dim=0), "softmax supports only the last axis"),
    (lambda x: 3, "forward must return a traced tensor"),
    (lambda x: [x] if x else x, "control flow"),
    (lambda x: F.relu(np.zeros(3)), "must be a traced tensor"),
    (lambda x: F.layer_norm(x, fe.Parameter((3,))), "both weight and bias"),
])
def test_untraceable_forwards_raise_config_error(forward: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        fe.trace(forward, 3)  # type: ignore[arg-type]


def test_parameter_misuse_is_reported() -> None:
    shared = fe.Linear(3, 3)
    with pytest.raises(ConfigError, match="one owner node"):
        fe.trace(fe.Sequential(shared, fe.ReLU(), shared), 3)
    with pytest.raises(ConfigError, match=r"^linear at '0' takes 5 input features, the declared "
                                          r"input size is 4 \(the in_features traced with\)$"):
        fe.trace(fe.Sequential(fe.Linear(5, 3)), 4)  # blames the input size, not the weight
    with pytest.raises(ConfigError, match=r"^linear takes 5 input features, its input 'relu' "
                                          "has 4$"):
        fe.trace(lambda x: F.linear(F.relu(x), fe.Parameter((3, 5))), 4)
    bad = fe.Parameter((3,))
    with pytest.raises(ConfigError, match="running_mean must be a Buffer"):
        fe.trace(lambda x: F.batch_norm(x, bad, fe.Buffer((3,))), 3)
    with pytest.raises(IRError, match="weight must be a Parameter"):
        fe.trace(lambda x: F.linear(x, fe.Buffer((3, 3))), 3)
    with pytest.raises(ConfigError, match="unknown initializer"):
        fe.Parameter((3,), init="glorot")
    with pytest.raises(ConfigError, match=r"^in_features must be an int > 0, got 4.7$"):
        fe.Linear(4.7, 3)  # type: ignore[arg-type]  # was silently in_features 4
    with pytest.raises(ConfigError, match=r"^Parameter shape must be ints, got \(3, 4.7\)$"):
        fe.Parameter((3, 4.7))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^Parameter value is not an array of numbers \("
                                          "could not convert string to float: 'a'\\)$"):
        fe.Parameter(value=[["a"] * 4] * 2)
    with pytest.raises(ConfigError, match="unknown parameter name"):
        fe.Linear(2, 2).load_state_dict({"weights": np.zeros((2, 2))})
    with pytest.raises(ConfigError, match=r"^'weight': not an array of numbers \(could not "
                                          "convert string to float: 'a'\\)$"):
        fe.Linear(4, 2).load_state_dict({"weight": [["a"] * 4] * 2})  # NumPy's ValueError


def test_a_traced_tensor_is_not_iterable() -> None:
    with pytest.raises(TypeError, match="not iterable"):  # __getitem__ must not make it so
        fe.trace(lambda x: list(x), 3)  # type: ignore[arg-type]


def test_fingerprint_ignores_names_but_not_structure() -> None:
    a = fe.trace(small_mlp(), 4)
    b = fe.trace(fe.Sequential(fe.Sequential(fe.Linear(4, 8), fe.ReLU()), fe.Linear(8, 8),
                               fe.Tanh(), fe.Linear(8, 2)), 4)
    c = fe.trace(fe.Sequential(fe.Linear(4, 8), fe.GELU(), fe.Linear(8, 8), fe.Tanh(),
                               fe.Linear(8, 2)), 4)
    assert to_json(a) != to_json(b) and fingerprint(a) == fingerprint(b) != fingerprint(c)


def test_importing_the_frontend_does_not_import_torch() -> None:
    code = "import sys, aicf_induct.frontend; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
    assert issubclass(ConfigError, AicfError)
