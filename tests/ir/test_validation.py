"""Malformed IR: one-line errors naming the node and the problem, from the library and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aicf_induct.cli.main import main
from aicf_induct.errors import IRError
from aicf_induct.ir import from_json, to_dict
from tests.graphs import mlp


def _doc() -> dict:
    return to_dict(mlp(4, 3, depth=2, width=8))


def _break(kind: str) -> dict:
    d = _doc()
    nodes = d["nodes"]
    if kind == "unknown_op":
        nodes[2]["op"] = "swish"
    elif kind == "dangling":
        nodes[3]["inputs"] = ["nowhere"]
    elif kind == "duplicate":
        nodes[3]["id"] = nodes[1]["id"]
    elif kind == "cycle":
        nodes[1]["inputs"] = [nodes[3]["id"]]
    elif kind == "order":
        nodes[2], nodes[3] = nodes[3], nodes[2]
    elif kind == "shape":
        d["params"][0]["shape"] = [8, 5]
    elif kind == "owned_twice":
        nodes[3]["params"] = dict(nodes[1]["params"])
    elif kind == "missing_param":
        del nodes[1]["params"]["bias"]
    elif kind == "missing_from_table":
        d["params"] = d["params"][1:]
    elif kind == "bad_attr":
        nodes[1]["attrs"]["out_features"] = -2
    elif kind == "unknown_attr":
        nodes[2]["attrs"]["alpha"] = 0.1
    elif kind == "arity":
        nodes[2]["inputs"] = [nodes[1]["id"], nodes[0]["id"]]
    elif kind == "format":
        d["format"] = "onnx"
    elif kind == "bad_input_shape":
        nodes[0]["attrs"]["shape"] = [None, "four"]
    elif kind == "bool_attr":  # JSON's true is not the integer 1
        nodes[1]["attrs"]["out_features"] = True
    elif kind == "unknown_field":  # a typo or another format's field: named, not ignored
        d["extra"] = 1
    elif kind == "unknown_node_field":
        nodes[2]["atrs"] = {}
    elif kind == "param_dtype":  # a float32 weight in a float64 graph
        d["params"][0]["dtype"] = "float32"
    return d


CASES = {
    "unknown_op": ("relu", "unknown op 'swish'"),
    "dangling": ("linear_1", "'nowhere' is not a node"),
    "duplicate": ("linear", "duplicate node id"),
    "cycle": (None, "cycle"),
    "order": ("linear_1", "input .relu. is defined after its use"),
    "shape": ("linear", r"has shape \[8, 5\], linear needs \[8, 4\]"),
    "owned_twice": ("linear_1", "owned twice"),
    "missing_param": ("linear", "owned by no node"),
    "missing_from_table": ("linear", "missing from the parameter table"),
    "bad_attr": ("linear", "out_features"),
    "unknown_attr": ("relu", "unknown attribute"),
    "arity": ("relu", "needs 1 input"),
    "format": (None, "unsupported format"),
    "bad_input_shape": ("x", r"input attribute 'shape' must be .*, got \[None, 'four'\]"),
    "bool_attr": ("linear", "out_features' must be an integer from 1 to 16777216, got True"),
    "unknown_field": (None, "document: unknown field 'extra'"),
    "unknown_node_field": ("relu", r"nodes\[2\]: unknown field 'atrs'"),
    "param_dtype": ("linear", "parameter 'linear.weight' is float32, and linear computes in "
                              "float64: give it dtype float64"),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_malformed_ir_names_node_and_problem(kind: str) -> None:
    node, pattern = CASES[kind]
    with pytest.raises(IRError, match=pattern) as info:
        from_json(json.dumps(_break(kind)))
    msg = str(info.value)
    assert "\n" not in msg
    if node is not None:
        assert f"node '{node}'" in msg


@pytest.mark.parametrize("kind", ["unknown_op", "cycle", "shape", "owned_twice"])
def test_cli_prints_one_line_and_no_traceback(kind: str, tmp_path: Path, capsys) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_break(kind)))
    assert main(["ir", "show", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: invalid IR") and err.count("\n") == 1
    assert "Traceback" not in err


def test_cli_on_text_that_is_not_json(tmp_path: Path, capsys) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"format": "aicf.ir/1", "nodes": [')
    assert main(["ir", "validate", str(path)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert main(["ir", "show", str(tmp_path / "absent.json")]) == 2
    assert "no such file" in capsys.readouterr().err


def _chain(n: int, *, reverse: bool = False, cycle: bool = False) -> str:
    nodes = [{"id": "x", "op": "input", "inputs": [], "attrs": {"shape": [None, 4]},
              "params": {}}]
    for i in range(n):
        nodes.append({"id": f"r{i}", "op": "relu", "inputs": [nodes[-1]["id"]], "attrs": {},
                      "params": {}})
    if cycle:
        nodes[1]["inputs"] = [f"r{n - 1}"]
    body = nodes[1:][::-1] if reverse else nodes[1:]
    return json.dumps({"format": "aicf.ir/1", "name": "", "nodes": [nodes[0], *body],
                       "params": [], "outputs": [f"r{n - 1}"]})


@pytest.mark.parametrize(("reverse", "cycle", "said"), [
    (True, False, "defined after its use"),
    (False, True, r"node .r0.: cycle: r0 -> r1 -> r2 -> r3 -> \.\.\. \(4,993 more\) -> r4997 -> "
                  r"r4998 -> r4999 -> r0$")])
def test_a_long_graph_out_of_order_or_in_a_cycle_is_one_line(reverse: bool, cycle: bool,
                                                             said: str) -> None:
    """The cycle check was a recursive walk: a chain of 1,000 relus listed output first, or
    a cycle of 5,000, was a RecursionError traceback from `ir validate`."""
    with pytest.raises(IRError, match=said) as err:
        from_json(_chain(5000, reverse=reverse, cycle=cycle))
    assert "\n" not in str(err.value) and len(str(err.value)) < 400
    from_json(_chain(5000))  # in order: valid


def test_an_integer_of_more_digits_than_python_reads_is_not_valid_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(_chain(1))
    text = json.dumps(doc).replace('[null, 4]', "[null, " + "9" * 5000 + "]")
    with pytest.raises(IRError, match="not valid JSON: Exceeds the limit"):
        from_json(text)
    path = tmp_path / "big.json"
    path.write_text(text)
    assert main(["ir", "validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not valid JSON" in err


@pytest.mark.parametrize(("shape", "said"), [
    ([None, None, 4],
     r"input shape \[None, None, 4\]: null stands for the batch axis, first, only"),
    ([3, None, 4], r"input shape \[3, None, 4\]: null stands for the batch axis, first, only"),
    ([3, 4], r"input shape \[3, 4\] has no batch axis: give it first, as null \(e\.g\. "
             r"\[None, 3, 4\]\)")])
def test_null_is_the_batch_axis_first_and_only_there(shape: list, said: str) -> None:
    """`[null, null, 4]` became (5, 5, 4) at batch 5, since the batch goes into every null;
    `[3, 4]`, with no batch axis, validated."""
    doc = json.loads(_chain(1))
    doc["nodes"][0]["attrs"]["shape"] = shape
    with pytest.raises(IRError, match=said):
        from_json(json.dumps(doc))


def test_the_builder_refuses_what_validate_would_naming_the_node() -> None:
    """`GraphBuilder.add` took `bias='zz'` (and declared a bias, 'zz' being truthy), an
    unknown attribute, a one-input concat; only a later validate refused them. A missing
    input was a raw KeyError, a NumPy integer a raw TypeError from the JSON encoder."""
    import numpy as np

    from aicf_induct.ir.builder import GraphBuilder

    b = GraphBuilder("b")
    x = b.input([None, np.int64(4)])
    for op, inputs, attrs, said in [
            ("linear", [x], {"out_features": 2, "bias": "zz"}, "'bias' must be true or false"),
            ("linear", [x], {"units": 2}, r"unknown attribute\(s\) \['units'\]"),
            ("concat", [x], {"axis": 1}, "concat needs at least 2 inputs, got 1"),
            ("relu", ["nope"], {}, "input 'nope' is no node of the graph"),
            ("linear", [x], {"out_features": object()}, "is not a number, string")]:
        with pytest.raises(IRError, match=f"node '{op}.*{said}"):
            b.add(op, inputs, attrs, id=op)
    h = b.add("linear", [x], {"out_features": np.int64(3)})
    g = b.output(h)
    assert g.node_map()[h].attrs["out_features"] == 3
    assert type(g.node_map()[h].attrs["out_features"]) is int
