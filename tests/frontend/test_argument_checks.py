"""What a user's script gets for the arguments the frontend takes: NumPy integers and dtypes
are taken as Python's; a wrong type or size is one error naming the argument (each was an
AttributeError, a TypeError from deep inside, or a division by zero)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.frontend import Linear, ReLU, Sequential, mlp_graph, parse_model_spec, trace
from aicf_induct.frontend.families import build, parse_spec, spec_graph
from aicf_induct.frontend.layers import Conv2d, MaxPool2d
from aicf_induct.frontend.specs import build_mlp
from aicf_induct.ir.validate import infer_types


def _model() -> Sequential:
    return Sequential(Linear(4, 8), ReLU(), Linear(8, 3))


def test_numpy_integers_and_dtypes_are_taken() -> None:
    x = np.zeros((10, 4))
    g = trace(_model(), x.shape[1], dtype=np.float32)
    assert g.inputs[0].attrs == {"shape": [None, 4], "dtype": "float32"}
    assert trace(_model(), (np.int64(4),)).inputs[0].attrs["shape"] == [None, 4]
    assert infer_types(g, batch=np.int64(5))["x"].shape == (5, 4)


@pytest.mark.parametrize("bad", [4.0, "4", True, [4.0], 0, -1, None, [None, "n"]])
def test_in_features_that_is_no_size_is_named(bad: Any) -> None:
    with pytest.raises(ConfigError, match=r"^in_features: a number of features \(an int > 0\)"):
        trace(_model(), bad)


def test_a_dtype_that_is_no_dtype_is_named() -> None:
    with pytest.raises(ConfigError, match=r"^dtype: a dtype name such as 'float32', got <object"):
        trace(_model(), 4, dtype=object())  # type: ignore[arg-type]


@pytest.mark.parametrize("args,message", [
    ((1, 4, 0), r"kernel_size must be an int >= 1 or a pair of them, got 0"),
    ((1, 4, 2.5), r"kernel_size must be an int >= 1 or a pair of them, got 2.5"),
    ((1, 4, (3, True)), r"kernel_size must be an int >= 1 or a pair of them, got \(3, True\)"),
    ((1, 4, 3, 0), r"stride must be an int >= 1 or a pair of them, got 0"),
    ((1, 4, 3, 1, -1), r"padding must be an int >= 0 or a pair of them, got -1"),
])
def test_conv_sizes_out_of_range_are_named(args: tuple, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Conv2d(*args)


def test_pool_of_a_zero_kernel_is_named() -> None:
    with pytest.raises(ConfigError, match="kernel_size must be an int >= 1"):
        MaxPool2d(0)


@pytest.mark.parametrize("call", [
    lambda: mlp_graph("mlp:depth=1", 4, 3),
    lambda: build_mlp("mlp", 4, 3),
])
def test_an_mlp_spec_given_as_text_says_how_to_parse_it(call: Any) -> None:
    with pytest.raises(TypeError, match=r"^spec: a parsed model spec \(MLPSpec; "
                                        r"parse_model_spec\('mlp:depth=2'\) makes one"):
        call()


@pytest.mark.parametrize("call", [lambda: spec_graph("ftt:depth=1", 4, 3),
                                  lambda: build(None, 4, 3)])
def test_a_family_spec_given_as_text_says_how_to_parse_it(call: Any) -> None:
    with pytest.raises(TypeError, match=r"^spec: a parsed model spec \(MLPSpec or FTTSpec or "
                                        r"CNNSpec or ResMLPSpec; .*families\.parse_spec"):
        call()
    assert spec_graph(parse_spec("ftt:depth=1"), 4, 3).name.startswith("ftt:depth=1")


@pytest.mark.parametrize("parse", [parse_model_spec, parse_spec])
def test_a_spec_that_is_no_text_is_named(parse: Any) -> None:
    with pytest.raises(TypeError, match="a model spec is text such as 'mlp:depth=2,width=64', "
                                        "got NoneType"):
        parse(None)


@pytest.mark.parametrize("batch", [-1, "3", 2.0, True])
def test_infer_types_names_a_batch_that_is_no_size(batch: Any) -> None:
    with pytest.raises(ConfigError, match=r"^batch: an int >= 0, or None"):
        infer_types(trace(_model(), 4), batch=batch)
