"""What `Miner.fit` says when it finds no candidate trait: the real limit, by corpus size."""

from __future__ import annotations

import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.induction.mining import Miner
from tests.induction.synthetic_meta import planted


@pytest.mark.parametrize("n", [1, 3])
def test_too_few_candidates_says_a_trait_needs_two_with_and_two_without(n: int) -> None:
    meta = planted(P=12)
    kept = sorted(meta["candidate"].unique())[:n]
    with pytest.raises(ConfigError, match=rf"^mining needs at least 4 candidates \(each trait "
                                          rf"must be held by 2 and lacked by 2\); the corpus "
                                          rf"has {n}, so no candidate trait varies enough$"):
        Miner().fit(meta[meta["candidate"].isin(kept)])
