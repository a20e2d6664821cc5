"""Meta-features computed now, as `propose` computes them, in place of or beside a
corpus's.

`with_new_features(meta)` loads each of the meta-dataset's problems by its name (seed 0's
split, as `propose` does), extracts its features as the sweep does (`extract_features`)
and adds the columns no row of `meta` has yet; the columns it has are kept
(`induce fit --add-features`: a corpus swept by an older version of the featurizer gains
the features this version adds, without sweeping again).

With `replace=True` every feature this version extracts is recomputed that way
(`induce fit --refeaturise`). Until the twenty-first sitting a sweep logged each run's
problem with the features of that run's split, and the warehouse keeps one row per feature
and problem, the last written: so an older corpus's features are of whichever seed's split
was logged last (the shipped pack's were seed 6's, its four newest landmarks seed 0's),
while `propose` featurises seed 0's split. Runs now log seed 0's
(`problems.meta_features`); recomputing them puts an older corpus on that split too.
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
                      features_of: Callable[[str], dict[str, float]] | None = None,
                      replace: bool = False) -> tuple[pd.DataFrame, list[str]]:
    """`meta` with the feature columns it lacks, and those columns (sorted); with `replace`,
    with every feature `features_of` gives recomputed (NaN where a problem's split does not
    define it), and those columns; the columns it does not give are kept. Columns in the
    meta-dataset's order (ids, features sorted, patterns). `features_of(name)` is
    `problem_features` by default (tests pass their own)."""
    compute = features_of or problem_features
    have = set() if replace else set(feature_columns(meta))
    names = sorted(meta["problem"].astype(str).unique())
    found: dict[str, dict[str, float]] = {}
    for name in (progress(names) if progress is not None else names):
        found[name] = {k: v for k, v in compute(name).items() if k not in have}
    written = sorted(set().union(*found.values())) if found else []
    if not written:
        return meta, []
    table = pd.DataFrame.from_dict(found, orient="index", columns=written).astype(float)
    out = meta.drop(columns=[c for c in written if c in meta.columns]).join(table,
                                                                           on="problem")
    others = [c for c in out.columns
              if not c.startswith((FEATURE_PREFIX, PATTERN_PREFIX))]
    fcols = sorted(c for c in out.columns if c.startswith(FEATURE_PREFIX))
    pcols = [c for c in out.columns if c.startswith(PATTERN_PREFIX)]
    return out[[*others, *fcols, *pcols]], written
