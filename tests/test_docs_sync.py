"""The README's lists of closed vocabularies are the code's: a value added to the op table or
the spec language without the README (or the other way round) fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from aicf_induct.frontend.specs import ACTS, NORM_PLACES, NORMS, PROFILES

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def _listed(key: str) -> tuple[str, ...]:
    """The values the README's model-spec paragraph lists for `key`: `key` (a, b, c)."""
    m = re.search(rf"`{key}` \(([^)]*)\)", README)
    assert m, f"README lists no values for the spec key `{key}`"
    return tuple(v.split(":")[0].strip() for v in m.group(1).split(","))


@pytest.mark.parametrize("key, values", [
    ("act", ACTS), ("norm", NORMS), ("norm_place", NORM_PLACES), ("profile", PROFILES),
])
def test_readme_spec_keys_match_the_code(key: str, values: tuple[str, ...]) -> None:
    assert _listed(key) == tuple(values)
