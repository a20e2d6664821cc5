"""`aicf-induct train --model` with the families beyond MLPs: ftt, resmlp and (on image-shaped
problems) cnn train and save their IR; cnn on a tabular problem is one error line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aicf_induct.cli.main import main
from aicf_induct.frontend.families import parse_spec
from aicf_induct.ir import canonical


@pytest.mark.parametrize("dataset,model,op", [
    ("wine", "ftt:depth=1,d_token=8,heads=2", "attention"),
    ("wine", "resmlp:blocks=1,d=16,d_hidden=32,dropout1=0.1", "batchnorm"),
    ("digits", "cnn:stages=1,channels=4", "conv2d"),
])
def test_family_models_train(dataset: str, model: str, op: str, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    ir = tmp_path / "m.json"
    assert main(["train", "--quiet", "--json", "--no-log", "--dataset", dataset, "--epochs",
                 "2", "--model", model, "--save-ir", str(ir)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "completed" and out["test_accuracy"] > 0.3
    graph = canonical.load(ir)
    assert graph.name == str(parse_spec(model))
    assert op in {n.op for n in graph.nodes}


@pytest.mark.parametrize("args,message", [
    (["--dataset", "iris", "--model", "cnn:stages=1"],
     r"model kind cnn needs an image-shaped problem; 'iris' is not one \(image-shaped: "
     r"digits \(8x8\)\)"),
    (["--dataset", "iris", "--model", "resmlp:depth=2"], "unknown model key 'depth' for resmlp"),
    (["--dataset", "iris", "--model", "ftt:d_token=10,heads=4"], "must divide"),
])
def test_bad_family_specs_are_one_line(args: list[str], message: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    import re

    assert main(["train", "--no-log", "--quiet", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and re.search(message, err)
