"""`aicf-induct ir import | show | validate`: outputs that cannot clobber the model, the
listing as JSON, and messages that name what is wrong where it is."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from aicf_induct.cli.main import main
from aicf_induct.ir import canonical

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")


@pytest.fixture
def onnx_model(tmp_path: Path) -> Path:
    path = tmp_path / "m.onnx"
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    torch.onnx.export(model.eval(), (torch.zeros(2, 4),), str(path), input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "n"}}, dynamo=False)
    return path


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


def test_import_never_writes_over_the_model_or_one_output_over_the_other(
        onnx_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`-o model.onnx` replaced the model with the IR; `-o X --values X` kept the values
    only; both said they had written both."""
    before = onnx_model.read_bytes()
    assert main(["ir", "import", str(onnx_model), "-o", str(onnx_model)]) == 2
    assert "is the ONNX model being imported" in _err(capsys)
    same = tmp_path / "both.npz"
    assert main(["ir", "import", str(onnx_model), "-o", str(same), "--values", str(same)]) == 2
    assert "are one file" in _err(capsys)
    assert onnx_model.read_bytes() == before and not same.exists()


def test_import_names_the_values_file_numpy_writes(onnx_model: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """`--values vals` wrote vals.npz and said "values to vals": the next `train --values
    vals` found no file."""
    out = tmp_path / "m.json"
    assert main(["ir", "import", str(onnx_model), "-o", str(out), "--values",
                 str(tmp_path / "vals")]) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"values to {tmp_path / 'vals.npz'}")
    with np.load(tmp_path / "vals.npz") as arrays:
        assert set(arrays.files) == set(canonical.load(str(out)).params)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "m.onnx", "vals.npz"]
    # the IR gets the mode any new file gets (mkstemp's 0600 before)
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~mask


def test_show_json_lists_the_graph_and_onnx_files_get_a_hint(
        onnx_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m.json"
    assert main(["ir", "import", str(onnx_model), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["ir", "show", str(out), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [n["op"] for n in shown["nodes"]] == ["input", "linear", "relu", "linear"]
    assert shown["nodes"][1]["type"] == "float64[N, 8]"
    assert shown["nodes"][1]["params"] == {"weight": [8, 4], "bias": [8]}
    assert shown["outputs"] == [shown["nodes"][-1]["id"]] and shown["param_count"] == 67
    for command in ("show", "validate"):  # an ONNX file given where IR is read
        assert main(["ir", command, str(onnx_model)]) == 2
        assert "an ONNX model? `aicf-induct ir import` converts one" in _err(capsys)


def _ir(tmp_path: Path, edit: object) -> Path:
    """A valid 2-layer IR file, changed by `edit(document)`."""
    def param(name: str, role: str, shape: list[int], init: str) -> dict[str, object]:
        return {"dtype": "float64", "init": init, "name": name, "owner": "h", "role": role,
                "shape": shape, "trainable": True}

    doc = {"format": "aicf.ir/1", "name": "m", "nodes": [
        {"id": "x", "op": "input", "inputs": [], "attrs": {"shape": [None, 4]}, "params": {}},
        {"id": "h", "op": "linear", "inputs": ["x"], "attrs": {"out_features": 3},
         "params": {"weight": "h.weight", "bias": "h.bias"}},
        {"id": "a", "op": "relu", "inputs": ["h"], "attrs": {}, "params": {}}],
        "params": [param("h.weight", "weight", [3, 4], "uniform:0.5"),
                   param("h.bias", "bias", [3], "zeros")],
        "outputs": ["a"]}
    assert callable(edit)
    edit(doc)
    path = tmp_path / "g.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("edit, words, count", [
    # an input without a batch axis, said at the input (was: at its consumer)
    (lambda d: d["nodes"][0]["attrs"].update(shape=[4]),
     "node 'x': input shape [4] has no batch axis: give it first, as null", 1),
    # not negative, but not a number a parameter can start from
    (lambda d: d["params"][0].update(init="uniform:Infinity"),
     "initializer 'uniform:Infinity' needs a finite number >= 0", 1),
    # one duplicated id: that problem only (it also gave a dangling reference and a cycle
    # that were not there)
    (lambda d: d["nodes"][2].update(id="h", inputs=["x"]), "node 'h': duplicate node id", 2),
])
def test_validate_says_the_problem_where_it_is(edit: object, words: str, count: int,
                                              tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = _ir(tmp_path, edit)
    assert main(["ir", "validate", str(path)]) == 2
    listed = capsys.readouterr().out.splitlines()
    assert words in listed[0] and len(listed) == count, listed


def test_a_model_ending_in_softmax_gets_a_note_at_import_and_at_training(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An exported classifier often ends in Softmax; under cross_entropy (which takes
    logits) it trained with softmax applied twice, and nothing said so."""
    path = tmp_path / "soft.onnx"
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3),
                                torch.nn.Softmax(dim=-1))
    torch.onnx.export(model.eval(), (torch.zeros(2, 4),), str(path), input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "n"}}, dynamo=False)
    out = tmp_path / "soft.json"
    assert main(["ir", "import", str(path), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"note: {path} ends in a softmax (") and "twice" in err
    assert main(["train", "--dataset", "iris", "--ir", str(out), "--epochs", "1",
                 "--no-log", "--quiet"]) == 0
    assert f"note: {out} ends in a softmax" in capsys.readouterr().err
    plain = tmp_path / "plain.onnx"  # the same model without its softmax: no note
    torch.onnx.export(model[:3].eval(), (torch.zeros(2, 4),), str(plain), input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "n"}}, dynamo=False)
    capsys.readouterr()
    assert main(["ir", "import", str(plain), "-o", str(tmp_path / "plain.json")]) == 0
    assert "softmax" not in capsys.readouterr().err


def test_an_import_that_cannot_replace_the_ir_keeps_the_old_pair(
        onnx_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The values were written first: when the IR's write then failed, the old IR sat beside
    the new values, and `train --ir --values` refused the pair (shapes of another model)."""
    out, vals = tmp_path / "m.json", tmp_path / "m.npz"
    out.write_text("old ir")
    vals.write_bytes(b"old values")
    replace = os.replace

    def refused(src: object, dst: object) -> None:
        if str(dst) == str(out):
            raise PermissionError(1, "Operation not permitted", str(src), None, str(dst))
        replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", refused)
    assert main(["ir", "import", str(onnx_model), "-o", str(out), "--values", str(vals)]) == 2
    assert _err(capsys) == f"error: -o {out}: cannot write it (Operation not permitted)\n"
    assert (out.read_text(), vals.read_bytes()) == ("old ir", b"old values")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "m.npz", "m.onnx"]
