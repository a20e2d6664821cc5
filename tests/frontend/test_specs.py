from __future__ import annotations

import dataclasses

import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.frontend import MLPSpec, build_mlp, mlp_graph, parse_model_spec
from aicf_induct.ir import patterns, validate


def test_plain_mlp_is_the_default() -> None:
    assert parse_model_spec("mlp") == parse_model_spec(" mlp: ") == MLPSpec()
    spec = MLPSpec()
    assert (spec.depth, spec.width, spec.act, spec.norm, spec.norm_place, spec.residual,
            spec.dropout, spec.profile) == (2, 64, "relu", "none", "pre", False, 0.0, "constant")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.depth = 3  # type: ignore[misc]


@pytest.mark.parametrize("text", [
    "mlp:depth=2,width=64,act=gelu,norm=layernorm",
    "mlp:depth=0",
    "mlp:depth=5,width=100,act=gelu_tanh,norm=batchnorm,norm_place=post,residual=true,"
    "dropout=0.25,profile=bottleneck",
    "mlp:act=silu,profile=funnel,residual=yes,dropout=0",
    "mlp:act=sigmoid,profile=expand,width=7",
])
def test_spec_strings_round_trip(text: str) -> None:
    spec = parse_model_spec(text)
    assert parse_model_spec(spec.to_string()) == spec
    assert spec.to_string() == str(spec) and spec.to_string().startswith("mlp:depth=")


def test_parsed_values_have_their_types() -> None:
    spec = parse_model_spec("mlp:residual=true,dropout=0,depth=3")
    assert spec.residual is True and spec.dropout == 0.0 and isinstance(spec.dropout, float)
    assert spec.depth == 3


@pytest.mark.parametrize(("text", "message"), [
    ("mlp:dpth=2", "unknown model key 'dpth' (valid: depth, width, act, norm, norm_place, "
                   "residual, dropout, profile)"),
    ("cnn:depth=2", "unknown model kind 'cnn' (valid: mlp)"),
    ("mlp:act=swish", "bad value 'swish' for model key 'act' (valid: relu, gelu, gelu_tanh, "
                      "tanh, silu, sigmoid)"),
    ("mlp:norm=groupnorm", "model key 'norm' (valid: none, layernorm, batchnorm)"),
    ("mlp:profile=diamond", "(valid: constant, funnel, bottleneck, expand)"),
    ("mlp:norm_place=middle", "(valid: pre, post)"),
    ("mlp:depth=two", "bad value 'two' for model key 'depth': expected an integer"),
    ("mlp:residual=maybe", "expected true or false"),
    ("mlp:dropout=1.0", "'dropout' must be a float in [0, 1)"),
    ("mlp:depth=-1", "'depth' must be in 0..64"),
    ("mlp:width=0", "'width' must be >= 1"),
    ("mlp:depth", "model key 'depth' needs a value"),
    ("mlp:depth=2,depth=3", "model key 'depth' given twice"),
])
def test_bad_specs_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_model_spec(text)
    assert message in str(err.value)


def test_direct_construction_is_validated_too() -> None:
    with pytest.raises(ConfigError, match="'act'"):
        MLPSpec(act="elu")
    with pytest.raises(ConfigError, match="'depth' must be int"):
        MLPSpec(depth=2.0)  # type: ignore[arg-type]


@pytest.mark.parametrize(("profile", "depth", "width", "widths"), [
    ("constant", 3, 64, [64, 64, 64]),
    ("funnel", 4, 64, [64, 32, 16, 8]),
    ("funnel", 6, 64, [64, 32, 16, 8, 8, 8]),  # floor of 8
    ("funnel", 3, 6, [6, 6, 6]),  # narrower than the floor: stays put
    ("expand", 4, 64, [8, 16, 32, 64]),
    ("bottleneck", 5, 64, [64, 32, 16, 32, 64]),
    ("bottleneck", 4, 64, [64, 32, 32, 64]),
    ("bottleneck", 2, 64, [64, 64]),
    ("funnel", 0, 64, []),
])
def test_profiles_give_the_documented_widths(profile: str, depth: int, width: int,
                                             widths: list[int]) -> None:
    spec = MLPSpec(depth=depth, width=width, profile=profile)
    assert spec.hidden_widths() == widths
    g = mlp_graph(spec, 5, 3)
    types = validate(g)
    linears = [n for n in g.nodes if n.op == "linear"]
    assert [types[n.id].shape[-1] for n in linears] == [*widths, 3]
    flags = patterns(g)
    if len(set(widths)) > 1:
        assert flags[f"width.{profile}"] == 1.0


def test_blocks_follow_norm_placement_dropout_and_residual() -> None:
    spec = parse_model_spec("mlp:depth=3,width=16,act=tanh,norm=batchnorm,norm_place=post,"
                            "residual=true,dropout=0.2")
    g = mlp_graph(spec, 16, 2)
    assert g.name == spec.to_string()
    ops = [n.op for n in g.nodes]
    assert ops[:5] == ["input", "linear", "tanh", "batchnorm", "dropout"]
    assert ops.count("add") == 3  # in_features == width: every block is residual
    assert g.node("blocks.0.block.norm").inputs == ("blocks.0.block.act",)
    pre = mlp_graph(parse_model_spec("mlp:depth=2,width=8,norm=layernorm,residual=true"), 4, 2)
    assert [n.op for n in pre.nodes] == ["input", "linear", "layernorm", "relu", "linear",
                                         "layernorm", "relu", "add", "linear"]
    assert patterns(pre)["norm.placement.pre_act"] == 2.0


def test_zero_depth_is_a_linear_model() -> None:
    model = build_mlp(MLPSpec(depth=0), 4, 3)
    g = mlp_graph(MLPSpec(depth=0), 4, 3)
    assert [n.id for n in g.nodes] == ["x", "head"] and len(list(model.parameters())) == 2
    with pytest.raises(ConfigError, match="in_features"):
        build_mlp(MLPSpec(), 0, 3)


@pytest.mark.parametrize("text", [
    "mlp", "mlp:depth=0", "mlp:depth=3,width=100,norm=batchnorm,profile=funnel",
    "mlp:depth=4,width=48,norm=layernorm,residual=true,dropout=0.1,profile=bottleneck",
])
def test_param_count_is_the_built_graphs(text: str) -> None:
    spec = parse_model_spec(text)
    assert spec.param_count(7, 3) == mlp_graph(spec, 7, 3).param_count()


def test_width_and_parameter_ceilings_are_one_line_errors() -> None:
    """A typo must not allocate petabytes: width=100000000 fails at parse time, a model past
    MAX_PARAMS before anything is built."""
    from aicf_induct.frontend.specs import MAX_PARAMS, MAX_WIDTH

    assert parse_model_spec(f"mlp:width={MAX_WIDTH}").width == MAX_WIDTH
    with pytest.raises(ConfigError, match=rf"'width' must be <= {MAX_WIDTH} .*got 100000000"):
        parse_model_spec("mlp:width=100000000")
    spec = parse_model_spec(f"mlp:depth=2,width={MAX_WIDTH}")  # 4.3e9 parameters
    assert spec.param_count(4, 3) > MAX_PARAMS
    with pytest.raises(ConfigError, match=r"4,295,.* parameters for 4 inputs and 3 outputs; "
                                          r"the ceiling is 100,000,000"):
        build_mlp(spec, 4, 3)
    assert build_mlp(parse_model_spec("mlp:depth=1,width=4096"), 4, 3) is not None


@pytest.mark.parametrize("text", ["", "   ", ":", "mlp:width=", "mlp:,=3"])
def test_empty_specs_are_errors(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_model_spec(text)
