"""What `ir validate` and `ir import` let through: a document's name that is no string, and
an ONNX model whose weights are not finite (which `train --values` then refused), are one
error line naming the field or the initializer, and nothing is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from aicf_induct.cli.main import main
from aicf_induct.ir import canonical
from tests.graphs import mlp


def _error(capsys: pytest.CaptureFixture[str], rc: int) -> str:
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1, (rc, err)
    return err


# -- 4. the document's name ---------------------------------------------------------------

@pytest.mark.parametrize("name,kind", [(5, "int"), ({"a": 1}, "dict"), (None, "NoneType"),
                                       (["m"], "list")])
@pytest.mark.parametrize("command", ["validate", "show"])
def test_a_name_that_is_no_string_is_refused(name: Any, kind: str, command: str,
                                             tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """It was read as no name and the file called valid."""
    doc = canonical.to_dict(mlp(4, 3))
    doc["name"] = name
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    err = _error(capsys, main(["ir", command, str(path)]))
    assert f"document: 'name' must be str, got {kind}" in err and str(path) in err, err


def test_a_string_name_or_none_given_is_valid(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    doc = canonical.to_dict(mlp(4, 3))
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    assert main(["ir", "validate", str(path)]) == 0
    del doc["name"]  # the name is optional: an unnamed graph
    path.write_text(json.dumps(doc))
    assert main(["ir", "validate", str(path)]) == 0
    assert canonical.load(str(path)).name == ""


# -- 5. an ONNX model's weights ------------------------------------------------------------

def _gemm_model(path: Path, weight: np.ndarray, bias: np.ndarray,
                elem: str = "FLOAT") -> Path:
    """x (N, 4) -> Gemm(fc.weight, fc.bias, transB=1) -> y (N, 3), written with onnx.helper."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    dtype = np.float32 if elem == "FLOAT" else np.float64
    kind = getattr(TensorProto, elem)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["y"], name="fc", transB=1)],
        "m",
        [helper.make_tensor_value_info("x", kind, ["n", 4])],
        [helper.make_tensor_value_info("y", kind, ["n", 3])],
        [numpy_helper.from_array(weight.astype(dtype), "fc.weight"),
         numpy_helper.from_array(bias.astype(dtype), "fc.bias")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("where,bad,words", [
    ("fc.weight", np.nan, "NaN"), ("fc.bias", np.inf, "infinite"),
    ("fc.weight", -np.inf, "infinite")])
def test_import_refuses_weights_that_are_not_finite(
        where: str, bad: float, words: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """They were written to --values, which `train --values` then refused."""
    w, b = np.ones((3, 4)), np.zeros(3)
    (w if where == "fc.weight" else b).flat[1] = bad
    model = _gemm_model(tmp_path / "m.onnx", w, b)
    out, vals = tmp_path / "m.json", tmp_path / "v.npz"
    err = _error(capsys, main(["ir", "import", str(model), "-o", str(out),
                               "--values", str(vals)]))
    assert f"initializer '{where}'" in err and words in err and "ONNX node 'fc'" in err, err
    assert not out.exists() and not vals.exists()


def test_import_refuses_weights_past_the_chosen_float_type(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """1e39 is finite in a DOUBLE initializer and infinite in the float32 IR asked for."""
    w = np.ones((3, 4))
    w[0, 0] = 1e39
    model = _gemm_model(tmp_path / "m.onnx", w, np.zeros(3), elem="DOUBLE")
    out = tmp_path / "m.json"
    assert main(["ir", "import", str(model), "-o", str(out), "--dtype", "float64"]) == 0
    out.unlink()
    capsys.readouterr()
    err = _error(capsys, main(["ir", "import", str(model), "-o", str(out),
                               "--dtype", "float32"]))
    assert "initializer 'fc.weight'" in err and "float32" in err, err
    assert not out.exists()


def test_import_of_finite_weights_writes_them(tmp_path: Path) -> None:
    model = _gemm_model(tmp_path / "m.onnx", np.arange(12.0).reshape(3, 4), np.ones(3))
    out, vals = tmp_path / "m.json", tmp_path / "v.npz"
    assert main(["ir", "import", str(model), "-o", str(out), "--values", str(vals)]) == 0
    with np.load(vals) as saved:
        np.testing.assert_array_equal(saved["fc.weight"], np.arange(12.0).reshape(3, 4))


@pytest.mark.parametrize("as_path", [str, Path])
def test_load_and_save_take_a_path_or_a_string_and_name_the_file(tmp_path: Path,
                                                                as_path: Any) -> None:
    """A `Path` (a user's script) loads and saves as a string does; an invalid file's error
    names it either way (with a Path it was a TypeError from the message check)."""
    good = tmp_path / "m.json"
    graph = mlp(4, 3)
    canonical.save(graph, as_path(good))
    assert canonical.to_json(canonical.load(as_path(good))) == canonical.to_json(graph)
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(canonical.IRError, match="not valid JSON") as err:
        canonical.load(as_path(bad))
    assert str(bad) in str(err.value)
