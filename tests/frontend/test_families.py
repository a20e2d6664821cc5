"""The `ftt` and `cnn` spec families: parsing, errors naming the key, the IR they build, and
a short training run each on a real problem."""

from __future__ import annotations

import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.frontend.families import CNNSpec, FTTSpec, image_side, parse_spec, spec_graph
from aicf_induct.frontend.specs import MLPSpec
from aicf_induct.ir import fingerprint, validate
from aicf_induct.ir.patterns import patterns
from aicf_induct.problems import load_problem
from aicf_induct.runtime.trainer import TrainConfig, Trainer


def test_specs_round_trip_and_mlp_still_parses() -> None:
    f = parse_spec("ftt:depth=1,d_token=8,heads=2,attention_dropout=0.1")
    assert f == FTTSpec(depth=1, d_token=8, heads=2, attention_dropout=0.1)
    assert parse_spec(f.to_string()) == f
    c = parse_spec("cnn:stages=3,channels=4,pool=avg")
    assert c == CNNSpec(stages=3, channels=4, pool="avg") and parse_spec(str(c)) == c
    assert parse_spec("mlp:depth=1") == MLPSpec(depth=1)


@pytest.mark.parametrize("text,message", [
    ("rnn:depth=1", r"unknown model kind 'rnn' \(valid: mlp, ftt, cnn, resmlp\)"),
    ("ftt:width=3", "unknown model key 'width' for ftt"),
    ("ftt:d_token=10,heads=4", r"'heads' \(4\) must divide 'd_token' \(10\)"),
    ("ftt:attention_dropout=1.5", "attention_dropout"),
    ("ftt:depth=x", "bad value 'x' for model key 'depth': expected an integer"),
    ("cnn:kernel=4", "must be odd"),
    ("cnn:pool=min", r"bad value 'min' for model key 'pool' \(valid: max, avg, none\)"),
    ("cnn:stages=0", r"'stages' must be an integer in 1..16"),
])
def test_bad_specs_name_the_key(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_spec(text)


def test_family_graphs_and_patterns_differ() -> None:
    ftt = spec_graph(FTTSpec(depth=2, d_token=8, heads=2), 5, 3)
    cnn = spec_graph(CNNSpec(stages=2, channels=4), 64, 10)
    for g in (ftt, cnn):
        validate(g)
    assert ftt.name.startswith("ftt:") and fingerprint(ftt) != fingerprint(cnn)
    pf, pc = patterns(ftt), patterns(cnn)
    assert pf["attention.blocks"] == 2 and pf["token.width"] == 8
    assert pc["conv.stages"] == 2 and pc["conv.channels_max"] == 8 and pc["pool.max"] == 2
    assert image_side(64) == 8 and image_side(10) is None and image_side(9) is None
    with pytest.raises(ConfigError, match="10 features is not a perfect square"):
        spec_graph(CNNSpec(), 10, 2)


@pytest.mark.parametrize("problem_name,spec", [
    ("iris", "ftt:depth=1,d_token=8,heads=2"),
    ("digits", "cnn:stages=2,channels=4"),
])
def test_families_train_on_real_problems(problem_name: str, spec: str) -> None:
    problem = load_problem(problem_name, seed=0)
    graph = spec_graph(parse_spec(spec), problem.n_features, problem.n_outputs)
    trainer = Trainer(problem, graph, TrainConfig(epochs=10, max_steps=60, lr=1e-2,
                                                  backend="numpy"))
    before, _ = trainer.evaluate(problem.val)
    trainer.fit()
    after, acc = trainer.evaluate(problem.val)
    assert after < 0.8 * before and acc > 0.5
