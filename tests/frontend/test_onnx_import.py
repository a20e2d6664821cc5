"""ONNX import: an MLP, an FT-Transformer and a small CNN exported from PyTorch (the
TorchScript exporter) import, match onnxruntime's output on their first forward through the
executor, and train; unsupported nodes are one error naming the node; the CLI writes IR and
values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from aicf_induct.cli.main import main
from aicf_induct.errors import ConfigError
from aicf_induct.ir import canonical, fingerprint
from aicf_induct.problems import load_problem
from aicf_induct.runtime.trainer import TrainConfig, Trainer

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
nn = torch.nn
# the TorchScript exporter (dynamo=False: the dynamo one needs onnxscript) warns that it is old
pytestmark = [pytest.mark.filterwarnings("ignore:You are using the legacy TorchScript"),
              pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")]

from aicf_induct.frontend.onnx_import import from_onnx  # noqa: E402  (needs onnx)
from aicf_induct.frontend.torch_import import from_torch  # noqa: E402


class Tokenizer(nn.Module):
    aicf_op = "numeric_tokenizer"  # from_torch reads it as the IR op

    def __init__(self, f: int, d: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(f, d) / d ** 0.5)
        self.bias = nn.Parameter(torch.randn(f, d) / d ** 0.5)

    def forward(self, x: Any) -> Any:
        return x[..., None] * self.weight + self.bias


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.attn_norm = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ffn_norm = nn.LayerNorm(d)
        self.ffn = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x: Any) -> Any:
        h = self.attn_norm(x)
        x = x + self.attn(h, h, h)[0]
        return x + self.ffn(self.ffn_norm(x))


class FTT(nn.Module):
    def __init__(self, f: int, out: int, d: int = 8, heads: int = 2, depth: int = 2) -> None:
        super().__init__()
        self.tokenizer = Tokenizer(f, d)
        self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, out)

    def forward(self, x: Any) -> Any:
        return self.head(torch.relu(self.norm(self.blocks(self.tokenizer(x))).mean(1)))


class CNN(nn.Module):
    def __init__(self, out: int) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(4, 8, 3, padding=1), nn.SiLU(), nn.AvgPool2d(2), nn.Flatten())
        self.head = nn.Linear(8 * 2 * 2, out)

    def forward(self, x: Any) -> Any:
        return self.head(self.features(x.reshape(x.shape[0], 1, 8, 8)))  # shape arithmetic


def mlp(f: int, out: int) -> Any:
    return nn.Sequential(nn.Linear(f, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.1),
                         nn.Linear(32, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 16),
                         nn.Tanh(), nn.Linear(16, out))


def export(model: Any, n_features: int, path: Path) -> Path:
    model.eval()
    torch.onnx.export(model, (torch.randn(4, n_features),), str(path), dynamo=False,
                      opset_version=17, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    return path


def _model(kind: str, problem: Any) -> Any:
    torch.manual_seed(0)
    f, out = problem.n_features, problem.n_outputs
    if kind == "mlp":
        model = mlp(f, out)
        model.train()
        with torch.no_grad():  # running statistics that are not the initial 0 / 1
            for _ in range(3):
                model(torch.from_numpy(problem.train.X[:64]).float())
        return model
    return FTT(f, out) if kind == "ftt" else CNN(out)


@pytest.mark.parametrize("kind,dataset,ops", [
    ("mlp", "wine", {"batchnorm", "layernorm", "gelu", "tanh"}),
    ("ftt", "wine", {"numeric_tokenizer", "attention", "layernorm", "gelu", "mean"}),
    ("cnn", "digits", {"reshape", "conv2d", "pool", "silu"}),
])
def test_exported_models_import_match_onnxruntime_and_train(kind: str, dataset: str,
                                                            ops: set[str],
                                                            tmp_path: Path) -> None:
    problem = load_problem(dataset, seed=0)
    path = export(_model(kind, problem), problem.n_features, tmp_path / f"{kind}.onnx")
    graph, values = from_onnx(path)
    assert ops <= {n.op for n in graph.nodes}
    trainer = Trainer(problem, graph, TrainConfig(epochs=3, lr=3e-3, backend="numpy"),
                      values=values)
    x = problem.val.X.astype(np.float32)  # what onnxruntime computes on
    ours = trainer.executor.predict(x.astype(np.float64))
    theirs = ort.InferenceSession(str(path)).run(None, {"x": x})[0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    before, _ = trainer.evaluate(problem.val)
    trainer.fit()
    after, _ = trainer.evaluate(problem.val)
    assert after < 0.9 * before  # it trains


def test_attention_names_and_structure_agree_with_the_torch_importer(tmp_path: Path) -> None:
    torch.manual_seed(1)
    model = FTT(6, 3, d=12, heads=3, depth=1).eval()
    g_onnx, v_onnx = from_onnx(export(model, 6, tmp_path / "ftt.onnx"))
    g_fx, v_fx = from_torch(model, 6)
    assert fingerprint(g_onnx) == fingerprint(g_fx)  # heads=3 found, eps read back as 1e-05
    attn = g_onnx.node("blocks.0.attn")
    assert attn.attrs["heads"] == 3
    assert attn.params["out_weight"] == "blocks.0.attn.out_proj.weight"
    for name in ("blocks.0.attn.in_proj_weight", "blocks.0.attn.out_proj.weight",
                 "blocks.0.ffn.0.weight", "tokenizer.weight"):
        np.testing.assert_allclose(v_onnx[name], v_fx[name], rtol=1e-6, atol=1e-7)


def test_the_first_unsupported_node_is_named(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(), nn.Linear(8, 2), nn.ELU())
    path = export(model, 4, tmp_path / "leaky.onnx")
    with pytest.raises(ConfigError, match=r"^unsupported ONNX node '/1/LeakyRelu' "
                                          r"\(LeakyRelu\): the IR has no such op$"):
        from_onnx(path)


def test_a_layer_norm_below_opset_17_gets_a_hint(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 2)).eval()
    path = tmp_path / "ln13.onnx"
    torch.onnx.export(model, (torch.randn(3, 4),), str(path), dynamo=False, opset_version=13,
                      input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    with pytest.raises(ConfigError, match=r"'/1/Sub' \(Sub\): the IR has no such op \(a layer "
                                          r"norm exported below opset 17 .* >= 17"):
        from_onnx(path)


@pytest.mark.parametrize("kind", ["ftt", "cnn"])
def test_a_fixed_batch_export_imports_for_any_batch(kind: str, tmp_path: Path) -> None:
    torch.manual_seed(0)
    f = 64 if kind == "cnn" else 6
    model = (CNN(3) if kind == "cnn" else FTT(f, 3)).eval()
    path = tmp_path / f"{kind}.onnx"  # no dynamic axes: batch sizes 4 are folded in
    torch.onnx.export(model, (torch.randn(4, f),), str(path), dynamo=False, opset_version=17,
                      input_names=["x"])
    graph, values = from_onnx(path)
    from aicf_induct.runtime.interpreter import interpret

    x = np.random.default_rng(0).standard_normal((7, f)).astype(np.float32)
    ours = interpret(graph, values, {"x": x.astype(np.float64)}).values[graph.outputs[0]]
    with torch.no_grad():
        theirs = model(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


class Bag(nn.Module):
    """int64 ids -> embedding -> [sum, mean over tokens] concatenated -> linear -> softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(11, 4)
        self.out = nn.Linear(8, 3)

    def forward(self, ids: Any) -> Any:
        e = self.emb(ids)
        return torch.softmax(self.out(torch.cat([e.sum(1), e.mean(1)], dim=1)), dim=-1)


def test_embedding_concat_sum_softmax(tmp_path: Path) -> None:
    torch.manual_seed(0)
    path = tmp_path / "bag.onnx"
    torch.onnx.export(Bag().eval(), (torch.randint(0, 11, (4, 5)),), str(path), dynamo=False,
                      opset_version=17, input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    graph, values = from_onnx(path)
    assert graph.inputs[0].attrs["dtype"] == "int64"
    assert {"embedding", "sum", "mean", "concat", "linear", "softmax"} <= {
        n.op for n in graph.nodes}
    assert graph.params["emb.weight"].shape == (11, 4)
    from aicf_induct.runtime.interpreter import interpret

    ids = np.random.default_rng(0).integers(0, 11, (6, 5))
    ours = interpret(graph, values, {"x": ids}).values[graph.outputs[0]]
    theirs = ort.InferenceSession(str(path)).run(None, {"x": ids})[0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


class SelfSimilarity(nn.Module):
    def forward(self, x: Any) -> Any:  # attention without projections: generic IR ops
        return torch.softmax(x @ x.transpose(1, 2), dim=-1) @ x


def test_an_attention_like_scope_without_projections_imports_node_by_node(
        tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(Tokenizer(5, 4), SelfSimilarity(), nn.Flatten(), nn.Linear(20, 2))
    path = export(model, 5, tmp_path / "sim.onnx")
    graph, values = from_onnx(path)
    assert {"matmul", "transpose", "softmax"} <= {n.op for n in graph.nodes}
    assert "attention" not in {n.op for n in graph.nodes}
    x = np.random.default_rng(0).standard_normal((7, 5)).astype(np.float32)
    from aicf_induct.runtime.interpreter import interpret

    ours = interpret(graph, values, {"x": x.astype(np.float64)}).values[graph.outputs[0]]
    theirs = ort.InferenceSession(str(path)).run(None, {"x": x})[0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


class Tied(nn.Module):
    def __init__(self, reuse: bool) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
        self.b.weight = self.a.weight
        self.reuse = reuse

    def forward(self, x: Any) -> Any:
        return (self.a if self.reuse else self.b)(torch.relu(self.a(x)))


@pytest.mark.parametrize(("reuse", "second"), [(False, "/b/Gemm"), (True, "/a_1/Gemm")])
def test_shared_weights_are_refused_naming_both_nodes(reuse: bool, second: str,
                                                      tmp_path: Path) -> None:
    # they were imported as two copies ('a.weight', 'a_0.weight') and trained apart
    path = export(Tied(reuse), 4, tmp_path / "tied.onnx")
    with pytest.raises(ConfigError, match=rf"^initializer 'a.weight' is a parameter of ONNX "
                                          rf"nodes '/a/Gemm' and '{second}' \(tied or reused "
                                          r"weights.*one owner node \(no weight sharing\)$"):
        from_onnx(path)


def test_equal_initializers_the_exporter_merged_stay_separate_parameters(
        tmp_path: Path) -> None:
    # in eval mode the exporter keeps one of two equal initializers and reads the other
    # through an Identity: two fresh layer norms are no tied weights
    model = nn.Sequential(nn.LayerNorm(4), nn.Linear(4, 4), nn.LayerNorm(4))
    graph, _ = from_onnx(export(model, 4, tmp_path / "ln.onnx"))
    assert {"0.weight", "0.bias", "2.weight", "2.bias"} <= set(graph.params)


class Minus(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)

    def forward(self, x: Any) -> Any:
        return x - self.a(x)


def test_hints_depend_on_the_opset(tmp_path: Path) -> None:
    # at opset 17 a Sub is no layer norm: no hint to export at opset >= 17
    with pytest.raises(ConfigError, match=r"^unsupported ONNX node '/Sub' \(Sub\): the IR has "
                                          r"no such op$"):
        from_onnx(export(Minus(), 4, tmp_path / "sub.onnx"))
    # below opset 20 a tanh GELU is Mul, Pow, Tanh, ...: it had no hint
    gelu = nn.Sequential(nn.Linear(4, 4), nn.GELU("tanh"), nn.Linear(4, 2))
    with pytest.raises(ConfigError, match=r"^unsupported ONNX node '/1/Mul' \(Mul\): the IR has "
                                          r"no such op \(a tanh GELU exported below opset 20 "
                                          r".*opset_version >= 20 to get one Gelu node\)$"):
        from_onnx(export(gelu, 4, tmp_path / "gelu.onnx"))
    # only where the model holds the rest of such a layer: x - tanh(x) at opset 16 is no
    # layer norm, x * tanh(x) at 17 no tanh GELU (each got that hint)
    for model, op, opset in ((Minus(), "Sub", 16), (Times(), "Mul", 17)):
        path = tmp_path / f"{op}.onnx"
        torch.onnx.export(model.eval(), (torch.randn(4, 4),), str(path), dynamo=False,
                          opset_version=opset, input_names=["x"])
        with pytest.raises(ConfigError, match=rf"^unsupported ONNX node '/{op}' \({op}\): "
                                              r"the IR has no such op$"):
            from_onnx(path)


class Times(nn.Module):
    def forward(self, x: Any) -> Any:
        return x * torch.tanh(x)


def _hand_built(node: Any, producer: str = "") -> Any:
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    inits = [numpy_helper.from_array(np.ones(4, np.float32), n) for n in ("s", "b", "m", "v")]
    graph = helper.make_graph([node], "g", [x], [helper.make_empty_tensor_value_info("y")],
                              [i for i in inits if i.name in node.input])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.producer_name = producer
    return model


def test_batchnorm_in_training_mode_is_refused_for_that_reason() -> None:
    from onnx import helper

    bn = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn",
                          training_mode=1)  # on (N, 4): said "(got rank 2)"
    with pytest.raises(ConfigError, match=r"^unsupported ONNX node 'bn' \(BatchNormalization\): "
                                          r"training_mode=1: only the inference form"):
        from_onnx(_hand_built(bn))


def test_a_batch_moving_transpose_of_the_dynamo_exporter_says_to_use_dynamo_false() -> None:
    from onnx import helper

    node = helper.make_node("Transpose", ["x"], ["y"], name="node_transpose", perm=[1, 0])
    with pytest.raises(ConfigError, match=r"moves the batch axis \(torch's dynamo exporter "
                                          r"writes attention so: export with "
                                          r"torch.onnx.export\(..., dynamo=False\)\)$"):
        from_onnx(_hand_built(node, producer="pytorch"))


def test_a_missing_external_weight_file_is_named(tmp_path: Path) -> None:
    path = export(nn.Sequential(nn.Linear(4, 2)), 4, tmp_path / "m.onnx")
    onnx.save_model(onnx.load(str(path)), str(path), save_as_external_data=True,
                    location="w.bin", size_threshold=0)
    (tmp_path / "w.bin").unlink()  # said: not an ONNX model (ValidationError: Data of ...)
    with pytest.raises(ConfigError, match=r"^.*m.onnx: its weights are stored in a separate "
                                          r"file, .*w.bin, which is missing"):
        from_onnx(path)


class Moves(nn.Module):
    def forward(self, x: Any) -> Any:
        return x.t()


def test_a_node_that_moves_the_batch_axis_is_refused(tmp_path: Path) -> None:
    path = export(Moves(), 4, tmp_path / "t.onnx")
    with pytest.raises(ConfigError, match=r"unsupported ONNX node '.*Transpose' \(Transpose\): "
                                          r"perm \[1, 0\] moves the batch axis"):
        from_onnx(path)


def test_cli_import_writes_ir_and_values(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         ) -> None:
    problem = load_problem("wine", seed=0)
    path = export(_model("mlp", problem), problem.n_features, tmp_path / "m.onnx")
    out, vals = tmp_path / "m.json", tmp_path / "m.npz"
    assert main(["ir", "import", str(path), "-o", str(out), "--values", str(vals)]) == 0
    assert "IR written to" in capsys.readouterr().out
    graph = canonical.load(str(out))
    with np.load(vals) as arrays:
        assert set(arrays.files) == set(graph.params)
        assert arrays["0.weight"].shape == (32, problem.n_features)
    # a bad model: one error line naming the node, exit 2, nothing written
    bad = export(nn.Sequential(nn.Linear(4, 4), nn.Hardswish()), 4, tmp_path / "b.onnx")
    assert main(["ir", "import", str(bad), "-o", str(tmp_path / "b.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unsupported ONNX node '/1/HardSwish' (HardSwish)")
    assert err.count("\n") == 1 and not (tmp_path / "b.json").exists()
    not_onnx = tmp_path / "x.onnx"
    not_onnx.write_text("hello")
    assert main(["ir", "import", str(not_onnx)]) == 2
    assert "not an ONNX model" in capsys.readouterr().err
    # an IR file (JSON), and a directory: one line each saying what the path is
    ir_file = tmp_path / "m.json"
    ir_file.write_text('{"format": "aicf.ir/1"}')
    assert main(["ir", "import", str(ir_file)]) == 2
    err = capsys.readouterr().err
    assert "a JSON file: an IR file needs no import" in err and err.count("\n") == 1
    assert main(["ir", "import", str(tmp_path)]) == 2
    assert "a directory, not an ONNX file" in capsys.readouterr().err


def test_cli_trains_an_imported_model_from_its_values(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import json

    problem = load_problem("wine", seed=0)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(problem.n_features, 16), nn.Tanh(),
                          nn.Linear(16, problem.n_outputs))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.from_numpy(problem.train.X).float(), torch.from_numpy(problem.train.y)
    for _ in range(100):  # trained in torch, so its weights are worth importing
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    with torch.no_grad():
        logits = model(torch.from_numpy(problem.test.X).float())
    acc = float((logits.argmax(1).numpy() == problem.test.y).mean())
    path = export(model, problem.n_features, tmp_path / "m.onnx")
    out, vals = tmp_path / "m.json", tmp_path / "m.npz"
    assert main(["ir", "import", str(path), "-o", str(out), "--values", str(vals)]) == 0
    capsys.readouterr()
    args = ["train", "--quiet", "--json", "--no-log", "--dataset", "wine", "--ir", str(out),
            "--epochs", "1", "--lr", "1e-9"]  # one epoch at a negligible learning rate
    assert main([*args, "--values", str(vals)]) == 0
    imported = json.loads(capsys.readouterr().out)
    assert main(args) == 0  # the same graph from its initializers
    fresh = json.loads(capsys.readouterr().out)
    assert acc > 0.9 and imported["test_accuracy"] == pytest.approx(acc, abs=1e-9)
    assert fresh["test_accuracy"] < 0.8
    assert main([*args, "--values", str(tmp_path / "none.npz")]) == 2
    assert f"{tmp_path / 'none.npz'}: no such file" in capsys.readouterr().err
    assert main([*args[:5], "iris", *args[6:]]) == 2  # 4 features: the model takes 13
    assert "takes 13 features, the dataset 'iris' has 4" in capsys.readouterr().err
    other = export(nn.Sequential(nn.Linear(problem.n_features, 5)), problem.n_features,
                   tmp_path / "five.onnx")
    assert main(["ir", "import", str(other), "-o", str(tmp_path / "five.json")]) == 0
    capsys.readouterr()
    assert main([*args[:args.index("--ir")], "--ir", str(tmp_path / "five.json")]) == 2
    assert "output '0' has 5 values per example" in capsys.readouterr().err


class Encoder(nn.Module):
    """Tokens through nn.TransformerEncoderLayer: one fx node, no IR op of its own."""

    def __init__(self, f: int, out: int, d: int = 8) -> None:
        super().__init__()
        self.tokenizer = Tokenizer(f, d)
        self.layer = nn.TransformerEncoderLayer(d, 2, 16, dropout=0.0, batch_first=True,
                                                norm_first=True)
        self.head = nn.Linear(d, out)

    def forward(self, x: Any) -> Any:
        return self.head(self.layer(self.tokenizer(x)).mean(1))


def test_a_transformer_encoder_layer_refused_by_from_torch_points_to_onnx_which_imports_it(
        tmp_path: Path) -> None:
    """`from_torch` refuses nn.TransformerEncoderLayer, and its message did not say that the
    module's ONNX export imports."""
    torch.manual_seed(0)
    model = Encoder(4, 3).eval()
    with pytest.raises(ConfigError, match=r"\(TransformerEncoderLayer\); its ONNX export "
                                          r"imports: torch.onnx.export"):
        from_torch(model, 4)
    path = export(model, 4, tmp_path / "enc.onnx")
    graph, values = from_onnx(path)
    assert "attention" in {n.op for n in graph.nodes}
    x = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
    problem = load_problem("iris", seed=0)
    trainer = Trainer(problem, graph, TrainConfig(epochs=1, backend="numpy"), values=values)
    np.testing.assert_allclose(trainer.executor.predict(x.astype(np.float64)),
                               ort.InferenceSession(str(path)).run(None, {"x": x})[0],
                               rtol=1e-5, atol=1e-5)


class RowOffset(nn.Module):
    """A linear layer plus a (4, 1) parameter: one offset per token (row), not per output,
    though its size is the outputs' (4)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 4, bias=False)
        self.pos = nn.Parameter(torch.randn(4, 1))

    def forward(self, x: Any) -> Any:
        return self.lin(x) + self.pos


def test_a_constant_added_per_row_is_no_bias(tmp_path: Path) -> None:
    """It was folded in as the layer's bias: imported without a word, off by 2 from
    onnxruntime."""
    torch.manual_seed(0)
    path = tmp_path / "pos.onnx"
    torch.onnx.export(RowOffset().eval(), (torch.randn(2, 4, 6),), str(path), dynamo=False,
                      opset_version=17, input_names=["x"], dynamic_axes={"x": {0: "b"}})
    with pytest.raises(ConfigError, match=r"^unsupported ONNX node '.*Add' \(Add\): Add of a "
                                          r"constant has no IR op"):
        from_onnx(path)


def test_a_gemm_whose_c_adds_per_row_is_refused() -> None:
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])
    inits = [numpy_helper.from_array(np.ones((3, 4), np.float32), "w"),
             numpy_helper.from_array(np.arange(3, dtype=np.float32).reshape(3, 1), "c")]
    gemm = helper.make_node("Gemm", ["x", "w", "c"], ["y"], name="gemm", transB=1)
    model = helper.make_model(helper.make_graph(
        [gemm], "g", [x], [helper.make_empty_tensor_value_info("y")], inits),
        opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ConfigError, match=r"^unsupported ONNX node 'gemm' \(Gemm\): its bias "
                                          r"\(shape \[3, 1\]\) must be one value per output"):
        from_onnx(model)


@pytest.mark.parametrize("node,says", [
    (("Concat", ["x", "x"], {}), r"'n' \(Concat\) is malformed: KeyError"),
    (("Gemm", ["x"], {}), r"'n' \(Gemm\) is malformed: IndexError"),
    (("LayerNormalization", ["x"], {}), r"'n' \(LayerNormalization\) is malformed"),
    (("Softmax", ["x"], {"axis": "a"}), r"'n' \(Softmax\) is malformed"),
])
def test_a_malformed_node_is_one_error_naming_it(node: tuple, says: str) -> None:
    """Each was a traceback from inside a converter (an attribute or input the spec requires,
    missing or of another type)."""
    from onnx import helper

    op, inputs, attrs = node
    made = helper.make_node(op, inputs, ["y"], name="n", **attrs)
    with pytest.raises(ConfigError, match=r"^ONNX node " + says):
        from_onnx(_hand_built(made))


def test_a_node_without_outputs_or_with_an_unprintable_name_is_named_on_one_line() -> None:
    from onnx import helper

    with pytest.raises(ConfigError, match=r"^unsupported ONNX node 'Relu' \(Relu\)|"
                                          r"^ONNX node 'Relu' \(Relu\)"):
        from_onnx(_hand_built(helper.make_node("Relu", ["x"], [])))
    with pytest.raises(ConfigError) as err:
        from_onnx(_hand_built(helper.make_node("TopK", ["x"], ["y"], name="a\nb")))
    assert "\n" not in str(err.value) and "'a\\nb'" in str(err.value)


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 2)

    def forward(self, x: Any) -> Any:
        return self.lin((x.unsqueeze(-1) * 2.0).sum(-1))


def test_an_unsqueeze_times_a_scalar_is_refused_not_a_traceback(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^unsupported ONNX node '.*Unsqueeze' \(Unsqueeze\): "
                                          r"Unsqueeze has no IR op"):
        from_onnx(export(Scaled(), 4, tmp_path / "u.onnx"))


def test_a_float16_erf_gelu_imports(tmp_path: Path) -> None:
    """Its √2 is 1.4140625: refused as "Div has no IR op" with a tolerance of 1e-6."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.GELU(), nn.Linear(8, 2)).half().eval()
    torch.onnx.export(model, (torch.randn(4, 5).half(),), str(tmp_path / "h.onnx"),
                      dynamo=False, opset_version=17, input_names=["x"],
                      dynamic_axes={"x": {0: "batch"}})
    graph, _ = from_onnx(tmp_path / "h.onnx")
    assert "gelu" in {n.op for n in graph.nodes}


def test_cli_import_whose_ir_file_would_be_a_folder_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The IR file named after the model was a folder: the values were written, then the IR
    failed."""
    path = export(nn.Sequential(nn.Linear(4, 2)), 4, tmp_path / "m.onnx")
    (tmp_path / "m.json").mkdir()
    assert main(["ir", "import", str(path), "--values", str(tmp_path / "v.npz")]) == 2
    assert capsys.readouterr().err == (f"error: {tmp_path / 'm.json'}: is a folder, not a file "
                                       "(name the IR file with -o FILE)\n")
    assert not (tmp_path / "v.npz").exists()


def test_a_batchnorm_momentum_out_of_range_is_said_as_written() -> None:
    """It was said converted to the IR's (1 - it): "got -1.0" for a momentum of 2."""
    from onnx import helper

    bn = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn",
                          momentum=2.0)
    with pytest.raises(ConfigError, match=r"^unsupported ONNX node 'bn' \(BatchNormalization\): "
                                          r"momentum must be in \[0, 1\], got 2$"):
        from_onnx(_hand_built(bn))


def test_a_model_without_an_opset_is_said_so(tmp_path: Path) -> None:
    """A file cut before its opset_import blamed its first Constant node."""
    from onnx import helper

    model = _hand_built(helper.make_node("Relu", ["x"], ["y"], name="r"))
    del model.opset_import[:]
    path = tmp_path / "no_opset.onnx"
    onnx.save_model(model, str(path))
    with pytest.raises(ConfigError, match=r"no_opset\.onnx: the model names no ONNX opset "
                                          r"\(opset_import\): a cut file"):
        from_onnx(path)
