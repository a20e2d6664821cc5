"""Structure families in the candidate space: the `family` axis and `<family>.<key>` axes,
the `families` preset, cnn candidates planned on image-shaped problems only, and the MLP
presets' draws unchanged."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.frontend.families import CNNSpec, FTTSpec, ResMLPSpec
from aicf_induct.frontend.specs import MLPSpec
from aicf_induct.induction.space import Space, candidate_of
from aicf_induct.induction.space_io import parse_space
from aicf_induct.induction.sweep import plan
from aicf_induct.induction.sweep_spec import SweepSpec
from aicf_induct.runtime.trainer import TrainConfig

# sha256 of the structure keys, one a line, of each MLP preset's draw before the families
PINNED = {
    "corpus32": "1c26156d135ad523f4a6503746e9ddbd25a356c947eae15f1696d9150dad52f1",
    "default24": "5f8708e73ca7dade36681edcd47a89194d822fcaf52e6faf0f99c757d3f62e23",
    "tiny3": "e6a1d44f956d717e0b3f6ba55a90415758a90d88da79e61986efa5803220ecab",
}


@pytest.mark.parametrize("preset", sorted(PINNED))
def test_mlp_presets_draw_what_they_drew(preset: str) -> None:
    keys = "\n".join(c.structure_key for c in parse_space(preset).candidates())
    assert hashlib.sha256(keys.encode()).hexdigest() == PINNED[preset]


def test_families_preset_holds_every_family() -> None:
    spec = parse_space("families")
    cands = spec.candidates()
    assert len(cands) == 32 and len({c.key for c in cands}) == 32
    kinds = Counter(type(c.spec) for c in cands)
    assert set(kinds) == {MLPSpec, FTTSpec, ResMLPSpec, CNNSpec} and min(kinds.values()) >= 7
    for axis, values in spec.space.axes.items():  # each family's axes are all drawn
        family, dot, key = axis.partition(".")
        if dot:
            seen = {getattr(c.spec, key) for c in cands if c.spec.to_string().startswith(family)}
            assert seen == set(values), axis
    for c in cands:  # structure keys read back (the proposer's candidate_of)
        assert candidate_of(c.structure_key) == c
        if not isinstance(c.spec, CNNSpec):
            c.graph(10, 3)  # builds for a tabular problem


def test_family_axes_build_their_specs() -> None:
    space = Space({"family": ["ftt", "resmlp"], "ftt.d_token": [8, 16], "ftt.heads": [2],
                   "resmlp.blocks": [1], "act": ["gelu"]})
    cands = space.grid()
    specs = {c.spec for c in cands}
    assert specs == {FTTSpec(d_token=8, heads=2, act="gelu"),
                     FTTSpec(d_token=16, heads=2, act="gelu"), ResMLPSpec(blocks=1, act="gelu")}
    assert len(cands) == 3
    # an axis no family of the space reads is named, not dropped from every point (it read
    # as "FT-Transformers of depth 1 and 2" and gave one candidate)
    with pytest.raises(ConfigError, match=r"axis 'depth' is read by family mlp, which the "
                                          r"space's family axis \(ftt, resmlp\) does not hold "
                                          r"\(did you mean ftt.depth\?\)"):
        Space({"family": ["ftt", "resmlp"], "depth": [1, 2]})
    with pytest.raises(ConfigError, match=r"axis 'ftt.d_token' is read by family ftt"):
        Space({"ftt.d_token": [8, 16]})
    mixed = Space({"family": ["mlp", "ftt"], "depth": [1, 2], "ftt.depth": [1, 2]}).grid()
    assert len(mixed) == 4  # each family reads its own depth
    with pytest.raises(ConfigError, match=r"axis 'ftt.heads' value 3: .*must divide"):
        Space({"family": ["ftt"], "ftt.heads": [3]})
    with pytest.raises(ConfigError, match=r"bad value 'min' for axis 'cnn.pool'"):
        Space({"cnn.pool": ["min"]})
    with pytest.raises(ConfigError, match=r"bad value 'rnn' for axis 'family'"):
        Space({"family": ["rnn"]})


def test_cnn_candidates_are_planned_on_image_problems_only() -> None:
    cands = Space({"family": ["cnn", "ftt"], "cnn.channels": [4], "ftt.depth": [1]}).grid()
    spec = SweepSpec(("iris", "digits"), tuple(cands), (0,), TrainConfig(epochs=1), 60.0)
    tasks = plan(spec, {"iris": "p_iris", "digits": "p_digits"}, "/nowhere")
    got = sorted((t.problem, type(t.candidate.spec).__name__) for t in tasks)
    assert got == [("digits", "CNNSpec"), ("digits", "FTTSpec"), ("iris", "FTTSpec")]


def test_the_proposer_drops_cnn_candidates_for_non_image_sizes() -> None:
    from aicf_induct.induction.proposer import _fits

    cnn, ftt = (c.structure_key for c in Space({"family": ["cnn", "ftt"]}).grid())
    assert _fits(cnn, (64, 10)) and not _fits(cnn, (13, 3))
    assert _fits(ftt, (13, 3))
