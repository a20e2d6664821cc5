"""`aicf-induct train` end to end: accuracy targets with the default MLP and a fixed seed,
logging into a real warehouse, IR files in and out, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aicf_induct.cli.main import main

TARGETS = {"iris": ("test_accuracy", 0.93), "wine": ("test_accuracy", 0.93),
           "breast_cancer": ("test_accuracy", 0.95), "diabetes": ("test_r2", 0.40)}


def _train(capsys, *args: str) -> dict:
    assert main(["train", "--quiet", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("dataset", sorted(TARGETS))
def test_default_mlp_reaches_the_target(dataset: str, capsys) -> None:
    metric, floor = TARGETS[dataset]
    out = _train(capsys, "--dataset", dataset, "--epochs", "100", "--seed", "1", "--no-log")
    assert out[metric] >= floor, f"{dataset}: {metric} {out[metric]:.4f} < {floor}"


def test_runs_are_logged_to_the_warehouse_by_default(tmp_path: Path, capsys,
                                                     monkeypatch) -> None:
    import warehouse

    monkeypatch.setenv("AICF_WAREHOUSE", str(tmp_path / "wh"))
    out = _train(capsys, "--dataset", "iris", "--epochs", "3", "--model",
                 "mlp:depth=1,width=8")
    conn = warehouse.connect(tmp_path / "wh")
    runs = conn.execute("SELECT run_id, status FROM runs").fetchall()
    assert runs == [(out["run_id"], out["status"])]
    steps = conn.execute("SELECT count(*) FROM steps WHERE run_id = ?",
                         [out["run_id"]]).fetchone()
    assert steps == (out["steps"],)
    snaps = conn.execute("SELECT reason, param_count FROM ir_snapshots ORDER BY step, "
                         "reason DESC").fetchall()
    assert snaps == [("start", 4 * 8 + 8 + 8 * 3 + 3), ("final", 4 * 8 + 8 + 8 * 3 + 3)]
    # the problem and its meta-features, joinable to the run
    (n_features,) = conn.execute(
        "SELECT count(*) FROM runs JOIN problem_features USING (problem_id) "
        "WHERE run_id = ?", [out["run_id"]]).fetchone()
    assert n_features > 20


def test_save_ir_then_train_from_it(tmp_path: Path, capsys) -> None:
    ir = tmp_path / "model.json"
    a = _train(capsys, "--dataset", "wine", "--epochs", "5", "--seed", "2", "--no-log",
               "--model", "mlp:depth=1,width=16,act=tanh", "--save-ir", str(ir))
    b = _train(capsys, "--dataset", "wine", "--epochs", "5", "--seed", "2", "--no-log",
               "--ir", str(ir))
    assert a["test_loss"] == b["test_loss"]  # same graph, same seed: the same run
    assert main(["ir", "show", str(ir)]) == 0
    assert "fingerprint:" in capsys.readouterr().out


@pytest.mark.parametrize("args,message", [
    (["--dataset", "nope"], "unknown dataset|nope"),
    (["--dataset", "iris", "--model", "mlp:dpth=2"], "dpth"),
    (["--dataset", "iris", "--model", "mlp:act=swish"], "swish"),
    (["--dataset", "iris", "--epochs", "0"], "epochs"),
])
def test_bad_input_is_one_line(args: list[str], message: str, capsys) -> None:
    assert main(["train", "--no-log", "--quiet", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    import re

    assert re.search(message, err)


def test_ir_of_another_width_is_refused(tmp_path: Path, capsys) -> None:
    ir = tmp_path / "m.json"
    _train(capsys, "--dataset", "iris", "--epochs", "1", "--no-log", "--save-ir", str(ir))
    assert main(["train", "--dataset", "wine", "--ir", str(ir), "--no-log", "--quiet"]) == 2
    assert "takes 4 features" in capsys.readouterr().err


def test_ir_with_a_second_input_is_refused_before_the_run(tmp_path: Path, capsys,
                                                          monkeypatch) -> None:
    """A valid IR that training cannot feed (two inputs) is one line, and no run is logged
    (it was a KeyError traceback and a failed run)."""
    ir = tmp_path / "m.json"
    _train(capsys, "--dataset", "iris", "--epochs", "1", "--no-log", "--save-ir", str(ir))
    doc = json.loads(ir.read_text())
    doc["nodes"].insert(1, {"id": "x2", "op": "input", "inputs": [], "params": {},
                            "attrs": {"dtype": "float64", "shape": [None, 4]}})
    doc["nodes"][2]["inputs"] = ["x2"]
    ir.write_text(json.dumps(doc))
    assert main(["ir", "validate", str(ir)]) == 0  # an IR may have two inputs
    capsys.readouterr()
    monkeypatch.setenv("AICF_WAREHOUSE", str(tmp_path / "wh"))
    assert main(["train", "--dataset", "iris", "--ir", str(ir), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err == ("error: " + str(ir) + ": training feeds one input and scores one output; "
                   "the graph has inputs 'x', 'x2' and outputs 'head'\n")
    assert not (tmp_path / "wh").exists()


def _edited_ir(tmp_path: Path, capsys, edit) -> Path:
    """iris's default model saved as IR, then `edit(document)`."""
    ir = tmp_path / "m.json"
    _train(capsys, "--dataset", "iris", "--epochs", "1", "--no-log", "--save-ir", str(ir))
    doc = json.loads(ir.read_text())
    edit(doc)
    ir.write_text(json.dumps(doc))
    return ir


def _image_input(doc: dict) -> None:
    """The input takes (2, 2) per example, reshaped to 4 features for the first layer."""
    doc["nodes"][0]["attrs"]["shape"] = [None, 2, 2]
    doc["nodes"].insert(1, {"id": "flat", "op": "reshape", "inputs": ["x"], "params": {},
                            "attrs": {"shape": [-1, 4]}})
    doc["nodes"][2]["inputs"] = ["flat"]


def _token_input(doc: dict) -> None:
    """Token ids embedded, one value each, as the first layer's 4 features."""
    doc["nodes"][0]["attrs"]["dtype"] = "int64"
    doc["nodes"][1:1] = [
        {"id": "emb", "op": "embedding", "inputs": ["x"], "params": {"weight": "emb.weight"},
         "attrs": {"num_embeddings": 10, "embedding_dim": 1}},
        {"id": "flat", "op": "reshape", "inputs": ["emb"], "params": {},
         "attrs": {"shape": [-1, 4]}}]
    doc["nodes"][3]["inputs"] = ["flat"]
    doc["params"].append({"dtype": "float64", "init": "normal:1.0", "name": "emb.weight",
                          "owner": "emb", "role": "weight", "shape": [10, 1],
                          "trainable": True})


def _huge(doc: dict) -> None:
    """A first layer 2 million wide (its parameters under the ceiling): each example's 2 M
    values allocate per node and batch until memory runs out."""
    width = 2_000_000
    doc["nodes"][1]["attrs"]["out_features"] = width
    doc["nodes"][3]["attrs"]["out_features"] = 4
    for p in doc["params"]:
        if p["name"] == "blocks.0.linear.weight":
            p["shape"] = [width, 4]
        elif p["name"] == "blocks.0.linear.bias":
            p["shape"] = [width]
        elif p["name"] == "blocks.1.linear.weight":
            p["shape"] = [4, width]
        elif p["name"] == "blocks.1.linear.bias":
            p["shape"] = [4]
        elif p["name"] == "head.weight":
            p["shape"] = [3, 4]


@pytest.mark.parametrize("edit, message", [
    (_image_input, "input 'x' takes (2, 2) per example; the dataset 'iris' feeds rows of 4 "
                   "features: reshape inside the model (x.view(-1, 2, 2))"),
    (_token_input, "input 'x' takes int64 values (token ids?); a table feeds rows of float "
                   "features"),
    (_huge, "node 'blocks.0.linear' computes 2,000,000 values per example; the ceiling is "
            "1,048,576"),
])
def test_an_ir_training_cannot_feed_is_refused_before_the_run(
        edit, message: str, tmp_path: Path, capsys, monkeypatch) -> None:
    """Each was a traceback from the first step (or the memory running out) after a run was
    logged as failed."""
    ir = _edited_ir(tmp_path, capsys, edit)
    monkeypatch.setenv("AICF_WAREHOUSE", str(tmp_path / "wh"))
    assert main(["train", "--dataset", "iris", "--ir", str(ir), "--quiet"]) == 2
    assert capsys.readouterr().err == f"error: {ir}: {message}\n"
    assert not (tmp_path / "wh").exists()


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                            "ignore:invalid value encountered:RuntimeWarning")
def test_a_diverged_run_s_json_has_null_for_its_nan_loss(tmp_path: Path, capsys) -> None:
    """`--json` printed a bare NaN, which strict JSON readers refuse."""
    out = _train(capsys, "--dataset", "diabetes", "--epochs", "2", "--no-log", "--lr", "1e300",
                 "--patience", "0")
    assert out["status"] in ("completed", "failed", "early_stopped")
    assert any(v is None for v in out.values())  # some loss was not a number


def test_json_is_what_the_result_gives_python_callers(capsys, returns) -> None:
    """`--json` was a dict built in the command, beside which `TrainResult` had no JSON form
    (`AdaptResult.as_dict` is adapt's)."""
    from aicf_induct.runtime.trainer import Trainer, TrainResult

    results = returns(Trainer, "fit")
    out = _train(capsys, "--dataset", "iris", "--epochs", "2", "--no-log")
    assert out == results[0].as_dict()
    assert list(out)[:3] == ["run_id", "status", "steps"] and "test_accuracy" in out
    nan = TrainResult("r", "failed", 1, 1, 0, 0.1, {"val_loss": float("nan")})
    assert json.loads(json.dumps(nan.as_dict(), allow_nan=False))["val_loss"] is None


def test_backend_and_precision_are_options_and_recorded(tmp_path: Path, capsys,
                                                        monkeypatch) -> None:
    """--backend numpy runs on NumPy; a GPU precision policy there is said, not dropped in
    silence; both land in the run's recorded config."""
    import warehouse

    monkeypatch.setenv("AICF_WAREHOUSE", str(tmp_path / "wh"))
    assert main(["train", "--quiet", "--json", "--dataset", "iris", "--epochs", "2",
                 "--backend", "numpy", "--precision", "tf32"]) == 0
    out = capsys.readouterr()
    run_id = json.loads(out.out)["run_id"]
    assert "note: --precision tf32 applies to the GPU backend" in out.err
    conn = warehouse.connect(tmp_path / "wh")
    (config,) = conn.execute("SELECT config FROM runs WHERE run_id = ?", [run_id]).fetchone()
    train = json.loads(config)["train"]
    assert (train["backend"], train["precision"]) == ("numpy", "tf32")


def test_the_cupy_backend_without_a_gpu_is_one_clear_line(capsys) -> None:
    from aicf_induct.runtime.backend import gpu_available

    if gpu_available():
        pytest.skip("this machine has a GPU")
    assert main(["train", "--no-log", "--quiet", "--dataset", "iris",
                 "--backend", "cupy"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: backend 'cupy' needs CuPy") and err.count("\n") == 1


def test_an_unknown_precision_is_refused_by_the_parser(capsys) -> None:
    assert main(["train", "--dataset", "iris", "--precision", "fp8"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'fp8'" in err and err.startswith("error: ") and err.count("\n") == 1


@pytest.mark.parametrize("command", [
    ["train", "--dataset", "iris", "--epochs", "1"],
    ["adapt", "--dataset", "iris", "--steps", "10"],
    ["sweep", "--problems", "iris", "--space", "depth=1;width=8", "--epochs", "1",
     "--workers", "1", "--quiet"],
])
def test_a_warehouse_that_is_a_file_is_refused_before_training(command: list[str],
                                                              tmp_path: Path,
                                                              capsys) -> None:
    f = tmp_path / "wh"
    f.write_text("a file")
    assert main([*command, "--warehouse", str(f)]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: warehouse {f} is not a directory\n"
    assert captured.out == ""  # nothing trained
    assert f.read_text() == "a file" and list(tmp_path.iterdir()) == [f]


def test_from_proposal_trains_the_top_k_and_keeps_the_best_by_validation(
        tmp_path: Path, capsys) -> None:
    import warehouse

    wh = tmp_path / "wh"
    assert main(["propose", "--dataset", "wine", "--top", "3", "--json"]) == 0
    proposed = json.loads(capsys.readouterr().out)["candidates"]
    out = _train(capsys, "--dataset", "wine", "--from-proposal", "--top", "3", "--epochs", "4",
                 "--seed", "5", "--warehouse", str(wh))
    trained = out["trained"]
    assert [t["rank"] for t in trained] == [1, 2, 3]
    assert [t["structure_key"] for t in trained] == [c["structure_key"] for c in proposed]
    best = max(trained, key=lambda t: (t["val_score"], -t["metrics"]["val_loss"], -t["rank"]))
    assert (out["picked_rank"], out["picked_run_id"]) == (best["rank"], best["run_id"])
    assert out["score"] == "accuracy" and all(
        t["val_score"] == t["metrics"]["val_accuracy"] for t in trained)
    # each proposal is one logged run with its own recipe, on the same split (seed)
    conn = warehouse.connect(wh)
    rows = conn.execute("SELECT run_id, seed, config FROM runs").fetchall()
    assert sorted(r[0] for r in rows) == sorted(t["run_id"] for t in trained)
    configs = {r[0]: json.loads(r[2]) for r in rows}
    for t, c in zip(trained, proposed, strict=True):
        cfg = configs[t["run_id"]]
        assert cfg["proposal"]["rank"] == t["rank"] and cfg["model"] == c["model"]
        recipe = cfg["train"]
        assert (recipe["optimizer"], recipe["lr"], recipe["weight_decay"],
                recipe["batch_size"]) == (
            c["recipe"]["optimizer"], c["recipe"]["lr"], c["recipe"]["weight_decay"],
            c["recipe"]["batch_size"])
    assert {r[1] for r in rows} == {5}


def test_from_proposal_text_output_and_the_pick_s_ir(tmp_path: Path, capsys) -> None:
    ir = tmp_path / "pick.json"
    assert main(["train", "--quiet", "--dataset", "iris", "--from-proposal", "--top", "2",
                 "--epochs", "2", "--no-log", "--save-ir", str(ir)]) == 0
    text = capsys.readouterr().out
    assert "[1/2] proposal #1: mlp:" in text and "[2/2] proposal #2: mlp:" in text
    said = ("picked by validation (the best val accuracy, the lowest val loss between "
            "equals): proposal #")
    assert text.count("<- picked") == 1 and said in text
    header = next(line for line in text.splitlines() if line.startswith("#  candidate"))
    assert header.split() == ["#", "candidate", "val", "accuracy", "val", "loss", "test",
                              "accuracy", "epochs", "expected", "norm.", "error", "run", "pick"]
    picked = text.split(said, 1)[1].split(", ", 1)[1].split("\n")[0]
    assert main(["ir", "show", str(ir)]) == 0
    assert picked in capsys.readouterr().out  # the IR written is the pick's graph


@pytest.mark.parametrize(("extra", "text"), [
    (["--top", "2"], "--top: only with --from-proposal"),
    (["--pack", "x.parquet"], "--pack: only with --from-proposal"),
    (["--from-proposal", "--model", "mlp"], "drop --model"),
    (["--from-proposal", "--ir", "m.json"], "drop --ir"),
    (["--from-proposal", "--lr", "0.5", "--batch-size", "7"],
     "takes the recipe (optimizer, learning rate, weight decay, batch size) from the proposal: "
     "drop --lr and --batch-size"),
    (["--from-proposal", "--optimizer", "sgd"], "drop --optimizer"),
    (["--from-proposal", "--ranks", "2"], "drop --gpus/--ranks"),
    (["--from-proposal", "--top", "0"], "argument --top"),
])
def test_from_proposal_bad_combinations_are_one_line_errors(extra: list[str], text: str,
                                                            capsys) -> None:
    assert main(["train", "--dataset", "iris", "--no-log", *extra]) == 2
    err = capsys.readouterr().err
    assert text in err and "Traceback" not in err and len(err.strip().splitlines()) <= 2


def test_from_proposal_with_the_service_down_names_the_local_warehouse(
        tmp_path: Path, capsys, monkeypatch) -> None:
    """The service cannot be reached: the proposal is the embedded proposer's and the run is
    logged locally, which the last line says (it named the service's URL)."""
    monkeypatch.setenv("AICF_WAREHOUSE", str(tmp_path / "wh"))
    assert main(["train", "--dataset", "iris", "--from-proposal", "--top", "1", "--service",
                 "http://127.0.0.1:1", "--api-key", "x", "--epochs", "2", "--quiet"]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines()[-1] == f"logged to {tmp_path / 'wh'}"
    assert "logged locally" in out.err


@pytest.mark.parametrize("command", ["train", "adapt"])
def test_from_proposal_through_the_service_without_a_key_is_refused_before_asking_it(
        command: str, capsys, monkeypatch) -> None:
    """It asked the service for a proposal first, then printed "using the embedded
    proposer" and only then the missing key's error."""
    monkeypatch.delenv("AICF_API_KEY", raising=False)
    assert main([command, "--dataset", "iris", "--from-proposal", "--service",
                 "http://127.0.0.1:1"]) == 2
    assert capsys.readouterr().err == (
        "error: --service logs through the service and needs a write key: --api-key KEY or "
        "$AICF_API_KEY (or --no-log)\n")


def test_values_files_are_checked_as_the_runtime_checks_values(tmp_path: Path, capsys) -> None:
    """A values file of strings was a traceback, NaN weights trained to a NaN run, an empty
    file or one lacking parameters passed silently, and a text file was said to hold pickles."""
    import numpy as np

    ir = tmp_path / "m.json"
    _train(capsys, "--dataset", "iris", "--epochs", "1", "--no-log", "--save-ir", str(ir))
    args = ["train", "--dataset", "iris", "--ir", str(ir), "--no-log", "--quiet", "--epochs",
            "1", "--values"]

    def refused(path: Path, words: str) -> None:
        assert main([*args, str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {path}: ") and words in err and err.count("\n") == 1

    np.savez(tmp_path / "text.npz", **{"head.bias": np.array(["a", "b", "c"])})
    refused(tmp_path / "text.npz", "'head.bias' holds text values, not numbers")
    np.savez(tmp_path / "nan.npz", **{"head.bias": np.full(3, np.nan)})
    refused(tmp_path / "nan.npz", "'head.bias' has non-finite values")
    np.savez(tmp_path / "empty.npz")
    refused(tmp_path / "empty.npz", "the file holds no values")
    (tmp_path / "plain.npz").write_text("head.bias 1 2 3\n")
    refused(tmp_path / "plain.npz", "not an .npz file (numpy.savez writes one)")
    refused(Path("/dev/zero"), "not a regular file (a character device)")
    np.savez(tmp_path / "typo.npz", **{"head.bais": np.zeros(3)})
    refused(tmp_path / "typo.npz", "'head.bais' is no parameter of the graph (did you mean "
                                   "'head.bias'?")
    # a file with some of the parameters: trains, and says which start from initializers
    np.savez(tmp_path / "part.npz", **{"head.bias": np.zeros(3)})
    assert main([*args, str(tmp_path / "part.npz")]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"note: {tmp_path / 'part.npz'} has no value for blocks.0.linear.")
    assert "and 1 more: they start from the initializer" in err


def test_a_log_that_fails_at_the_end_comes_after_the_run_s_results(
        tmp_path: Path, capsys, log_fails_at_close) -> None:
    """A disk that filled during the run: the close's error was all the command printed, no
    run id, status or metrics of a run that trained to its end."""
    assert main(["train", "--dataset", "iris", "--epochs", "2", "--quiet", "--warehouse",
                 str(tmp_path / "wh")]) == 2
    out, err = capsys.readouterr()
    assert out.startswith("iris: classification") and "run " in out and "test" in out
    assert "logged to" not in out
    assert err.startswith("error: warehouse ") and "No space left on device" in err


def test_counts_of_one_are_singular(tmp_path: Path, capsys) -> None:
    """A one-feature table was "60 rows, 1 features"."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=60)
    pd.DataFrame({"x": x, "y": 2 * x + rng.normal(scale=0.1, size=60)}).to_csv(
        tmp_path / "one.csv", index=False)
    assert main(["train", "--quiet", "--dataset", f"file:{tmp_path / 'one.csv'}?target=y",
                 "--epochs", "1", "--no-log"]) == 0
    out = capsys.readouterr().out
    assert "regression, 60 rows, 1 feature; model" in out, out
