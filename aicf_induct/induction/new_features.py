"""Meta-features a corpus lacks, computed now: a corpus swept by an older version of the
featurizer gains the features this version adds, without sweeping again.

`with_new_features(meta)` loads each of the meta-dataset's problems by its name (seed 0's
split, as `propose` does), extracts its features as the sweep does (`extract_features`)
and adds the columns no row of `meta` has yet; the columns it has are kept. A fresh sweep
computes every feature on each seed's split and the meta-dataset keeps one seed's: a feature
added here may differ from a fresh sweep's by that split, so the pack's provenance names the
step (`induce fit --add-features`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pandas as pd

from aicf_induct.errors import AicfError, DataError
from aicf_induct.induction.meta_dataset import (
    FEATURE_PREFIX,
    PATTERN_PREFIX,
    feature_columns,
)

Progress = Callable[[Iterable[str]], Iterable[str]]


def problem_features(name: str) -> dict[str, float]:
    """`name`'s meta-features as `propose` computes them (`proposals.featurise`: seed 0's
    training split), keys with the `f.` prefix."""
    from aicf_induct.induction.proposals import featurise

    try:
        _, features = featurise(name)
    except AicfError as e:
        raise DataError(f"cannot compute the features of corpus problem '{name}': {e}") from e
    return {FEATURE_PREFIX + k: float(v) for k, v in features.items()}


def with_new_features(meta: pd.DataFrame, progress: Progress | None = None,
                      features_of: Callable[[str], dict[str, float]] | None = None
                      ) -> tuple[pd.DataFrame, list[str]]:
    """`meta` with the feature columns it lacks and returns them (sorted); columns in the
    meta-dataset's order (ids, features sorted, patterns). `features_of(name)` is
    `problem_features` by default (tests pass their own)."""
    compute = features_of or problem_features
    have = set(feature_columns(meta))
    names = sorted(meta["problem"].astype(str).unique())
    found: dict[str, dict[str, float]] = {}
    for name in (progress(names) if progress is not None else names):
        found[name] = {k: v for k, v in compute(name).items() if k not in have}
    added = sorted(set().union(*found.values())) if found else []
    if not added:
        return meta, []
    table = pd.DataFrame.from_dict(found, orient="index", columns=added).astype(float)
    out = meta.join(table, on="problem")
    others = [c for c in out.columns
              if not c.startswith((FEATURE_PREFIX, PATTERN_PREFIX))]
    fcols = sorted(c for c in out.columns if c.startswith(FEATURE_PREFIX))
    pcols = [c for c in out.columns if c.startswith(PATTERN_PREFIX)]
    return out[[*others, *fcols, *pcols]], added
