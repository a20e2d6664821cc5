"""The structure space: parsing, enumeration, sampling, keys and fingerprints."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.frontend.specs import MLPSpec
from aicf_induct.induction.space import Candidate, Recipe, Space, canonical_spec
from aicf_induct.induction.space_io import PRESETS, parse_space

TEXT = "depth=1,2,3;width=32,64;act=relu,gelu;norm=none,layernorm;lr=1e-3,3e-3"


def test_text_form_grid_is_the_full_product_in_axis_order() -> None:
    spec = parse_space(TEXT)
    grid = spec.candidates()
    assert spec.space.size == 48 and len(grid) == 48
    assert len({c.key for c in grid}) == 48
    first, last = grid[0], grid[-1]
    assert (first.spec.depth, first.spec.width, first.spec.act, first.recipe.lr) == \
        (1, 32, "relu", 1e-3)
    assert (last.spec.depth, last.spec.norm, last.recipe.lr) == (3, "layernorm", 3e-3)
    assert first.recipe == Recipe(lr=1e-3)  # axes not given keep their defaults


def test_aliases_and_types() -> None:
    s = parse_space("bs=16,64;opt=sgd,adamw;wd=0,1e-4;residual=yes,no;dropout=0.1").space
    assert s.axes == {"batch_size": (16, 64), "optimizer": ("sgd", "adamw"),
                      "weight_decay": (0.0, 1e-4), "residual": (True, False),
                      "dropout": (0.1,)}


@pytest.mark.parametrize("text, words", [
    ("depth=1;colour=red", ["unknown axis 'colour'", "depth", "lr"]),
    ("act=relu,swish", ["'swish'", "axis 'act'", "gelu"]),
    ("depth=one", ["'one'", "axis 'depth'", "integer"]),
    ("width=0", ["axis 'width'", "width"]),
    ("lr=-1", ["axis 'lr'", "lr"]),
    ("optimizer=lamb", ["'lamb'", "axis 'optimizer'", "adamw"]),
    ("depth=1;sample=halton;n=3", ["unknown sample method 'halton'"]),
    ("depth=1,2;sample=sobol", ["needs n"]),
    ("depth=;width=8", ["needs values"]),
    ("nosuchpreset", ["unknown space 'nosuchpreset'", "default24"]),
    ("lr=0,1e-3", ["axis 'lr' value 0.0", "must be > 0"]),  # trains nothing, as --lr 0
    ("depth=1,2;sample=random;n=2;seed=-1", ["'seed' must be in 0..4294967295, got -1"]),
    ("depth=1,2;sample=random;n=0", ["'n' must be >= 1, got 0"]),
])
def test_bad_specs_name_what_is_wrong(text: str, words: list[str]) -> None:
    with pytest.raises(ConfigError) as err:
        parse_space(text)
    for w in words:
        assert w in str(err.value)


def test_yaml_and_json_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = {"axes": {"depth": [1, 2], "act": ["relu", "tanh"]}, "sample": "random", "n": 3,
            "seed": 5}
    (tmp_path / "s.json").write_text(json.dumps(data))
    (tmp_path / "s.yaml").write_text("axes:\n  depth: [1, 2]\n  act: [relu, tanh]\n"
                                     "sample: random\nn: 3\nseed: 5\n")
    a = parse_space(str(tmp_path / "s.json")).candidates()
    b = parse_space(str(tmp_path / "s.yaml")).candidates()
    assert [c.key for c in a] == [c.key for c in b] and len(a) == 3
    (tmp_path / "bad.json").write_text(json.dumps({"axes": {"depht": [1]}}))
    with pytest.raises(ConfigError, match="unknown axis 'depht'"):
        parse_space(str(tmp_path / "bad.json"))
    (tmp_path / "bad2.json").write_text(json.dumps({"axes": {}, "smaple": "grid"}))
    with pytest.raises(ConfigError, match="unknown key"):
        parse_space(str(tmp_path / "bad2.json"))


def test_malformed_space_files_are_one_line_errors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "bad.yaml").write_text("axes:\n  depth: [1, 2\n  width: 3\n")
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe axes")
    (tmp_path / "dir.yaml").mkdir()
    # a YAML true among integers: said "expected int", and without the file
    (tmp_path / "bool.yaml").write_text("axes:\n  depth: [1, true]\n")
    for name, words in (("bad.yaml", "bad.yaml: not valid YAML: while parsing a flow"),
                        ("bin.yaml", "bin.yaml: not UTF-8 text (byte 0xff at offset 0)"),
                        ("dir.yaml", "dir.yaml: a directory, not a space file"),
                        ("bool.yaml", "bool.yaml: bad value True for axis 'depth': expected "
                                      "an integer")):
        with pytest.raises(ConfigError) as err:
            parse_space(str(tmp_path / name))
        assert words in str(err.value) and "\n" not in str(err.value)


def test_a_space_file_given_as_a_path_or_missing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A Path was an AttributeError ('strip'); a missing file a raw FileNotFoundError."""
    (tmp_path / "s.yaml").write_text("axes:\n  depth: [1, 2]\n")
    assert [c.key for c in parse_space(tmp_path / "s.yaml").candidates()] == \
        [c.key for c in parse_space(str(tmp_path / "s.yaml")).candidates()]
    for given in (tmp_path / "nope.yaml", str(tmp_path / "nope.yaml")):
        with pytest.raises(ConfigError, match=r"nope\.yaml: no such file"):
            parse_space(given)


@pytest.mark.parametrize("method, n, seed, words", [
    ("sobol", 0, 0, "'n' must be >= 1, got 0"),  # drew 1 candidate
    ("random", -3, 0, "'n' must be >= 1, got -3"),  # drew 1
    ("grid", -1, 0, "'n' must be >= 1, got -1"),  # the grid less its last
    ("grid", 0, 0, "'n' must be >= 1, got 0"),  # none
    ("sobol", 2.5, 0, "'n' must be an integer, got 2.5"),  # AttributeError 'bit_length'
    ("random", "3", 0, "'n' must be an integer, got '3'"),  # TypeError
    ("random", True, 0, "'n' must be an integer, got True"),
    ("random", 3, -1, "'seed' must be in 0..4294967295, got -1"),  # numpy's ValueError
    ("sobol", 3, 2**32, "'seed' must be in 0..4294967295, got 4294967296"),
])
def test_sample_refuses_an_n_or_seed_as_a_space_spec_does(method: str, n: object, seed: object,
                                                          words: str) -> None:
    space = parse_space("depth=1,2,3;width=8,16").space
    with pytest.raises(ConfigError, match=re.escape(words)):
        space.sample(method, n, seed)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'n' must be >= 1, got 0"):
        parse_space("depth=1,2,3;width=8,16;n=0")  # the same words


def test_a_grid_too_large_to_enumerate_is_refused_at_once() -> None:
    huge = parse_space("width=" + ",".join(map(str, range(8, 1108))) + ";batch_size="
                       + ",".join(map(str, range(1, 1001))))
    with pytest.raises(ConfigError, match=r"the grid has 1,100,000 points \(at most "
                                          r"1,000,000\): sample it"):
        huge.candidates()


def test_asking_for_more_candidates_than_the_space_holds_gives_them_all() -> None:
    """n past the space's size: its distinct candidates, at once (it drew 20 n times)."""
    space = parse_space("depth=1,2").space
    for method in (space.random, space.sobol):
        assert sorted(c.key for c in method(10**9, seed=3)) == sorted(c.key
                                                                      for c in space.grid())


def test_random_and_sobol_are_deterministic_and_distinct() -> None:
    space = parse_space(TEXT).space
    for method in (space.random, space.sobol):
        a, b, c = method(20, seed=1), method(20, seed=1), method(20, seed=2)
        assert [x.key for x in a] == [x.key for x in b]
        assert [x.key for x in a] != [x.key for x in c]
        assert len({x.key for x in a}) == 20
    assert len(space.random(100, seed=0)) == 48  # never more than the space holds
    assert len(space.sobol(100, seed=0)) == 48


def test_sobol_covers_every_axis_value_evenly() -> None:
    space = Space({"depth": [1, 2, 3, 4], "width": [16, 32], "act": ["relu", "gelu"],
                   "lr": [1e-3, 3e-3], "batch_size": [16, 32, 64, 128]})
    cands = space.sobol(16, seed=0)
    assert len(cands) == 16
    assert Counter(c.spec.depth for c in cands) == {1: 4, 2: 4, 3: 4, 4: 4}
    assert Counter(c.recipe.batch_size for c in cands) == {16: 4, 32: 4, 64: 4, 128: 4}
    assert Counter(c.spec.act for c in cands) == {"relu": 8, "gelu": 8}


def test_canonical_candidates_merge_points_that_build_the_same_network() -> None:
    space = Space({"depth": [0, 1], "norm_place": ["pre", "post"],
                   "profile": ["constant", "funnel"], "act": ["relu", "tanh"]})
    # depth 0 is one linear model; depth 1 ignores norm_place (no norm) and profile
    assert space.size == 16 and len(space.grid()) == 1 + 2
    assert canonical_spec(MLPSpec(depth=2, norm="layernorm", norm_place="post")).norm_place \
        == "post"


def test_keys_and_fingerprints() -> None:
    cands = parse_space("depth=1,2,3;width=16,32;act=relu,gelu;norm=none,layernorm").candidates()
    assert len({c.fingerprint(5, 3) for c in cands}) == len(cands)  # structure → fingerprint
    c = cands[3]
    assert c.key == Candidate(c.spec, c.recipe).key and len(c.key) == 16
    assert c.structure_key.startswith(c.spec.to_string() + "|optimizer=adam")
    assert c.fingerprint(5, 3) != c.fingerprint(6, 3)  # depends on the problem's sizes
    # the recipe is not structure: same fingerprint, different key
    d = Candidate(c.spec, Recipe(lr=0.01))
    assert d.fingerprint(5, 3) == c.fingerprint(5, 3) and d.key != c.key
    g = c.graph(5, 3)
    assert g.name == c.spec.to_string()


def test_presets() -> None:
    cands = parse_space("default24").candidates()
    assert len(cands) == 24 and len({c.key for c in cands}) == 24
    assert {c.spec.norm for c in cands} == {"none", "layernorm", "batchnorm"}
    assert {c.spec.depth for c in cands} == {1, 2, 3, 4}
    assert [c.key for c in cands] == [c.key for c in parse_space("default24").candidates()]
    for name in PRESETS:
        assert parse_space(name).candidates()
