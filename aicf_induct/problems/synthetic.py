"""Synthetic problem families from scikit-learn's generators, with controlled size, noise,
informative features and class balance.

Families and options (all optional; defaults in `FAMILIES`):

- `classification` (make_classification): n, features, informative, redundant, classes,
  clusters (per class; classes × clusters at most n), sep (class separation), noise
  (fraction of labels flipped, 0..1), weights (class proportions, comma separated, e.g.
  0.9,0.1: one per class or one fewer, the last class getting the rest; each within (0, 1),
  summing to at most 1), seed;
- `regression` (make_regression): n, features, informative, noise, seed;
- `friedman1` (make_friedman1, 5 informative features): n, features, noise, seed;
- `moons`, `circles`: n, noise, seed (2 features, 2 classes).

`noise` is a finite number >= 0 and `sep` a finite number > 0. Sizes are bounded as typo
guards: n within 20..`MAX_SYNTHETIC_ROWS`, features at most
`MAX_SYNTHETIC_FEATURES`, n × features at most `MAX_SYNTHETIC_CELLS`.

For regression families `noise` is relative: Gaussian noise with `noise` times the standard
deviation of the noiseless target, so one value means the same signal-to-noise ratio in
every family. For `moons` and `circles` it is scikit-learn's (absolute) noise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from aicf_induct.errors import ConfigError
from aicf_induct.problems.preprocess import Table, Task
from aicf_induct.problems.splits import MAX_SEED

FAMILIES: dict[str, dict[str, Any]] = {
    "classification": {"n": 1000, "features": 20, "informative": 5, "redundant": 0,
                       "classes": 2, "clusters": 2, "sep": 1.0, "noise": 0.01,
                       "weights": None, "seed": 0},
    "regression": {"n": 1000, "features": 20, "informative": 5, "noise": 0.1, "seed": 0},
    "friedman1": {"n": 1000, "features": 10, "noise": 0.1, "seed": 0},
    "moons": {"n": 1000, "noise": 0.2, "seed": 0},
    "circles": {"n": 1000, "noise": 0.1, "seed": 0},
}
MAX_SYNTHETIC_ROWS = 10_000_000  # a typo guard, not a limit of the generators
MAX_SYNTHETIC_FEATURES = 100_000  # a typo guard too, far past any bundled table's width
# n × features: 1.5 GiB of float64, the default 20 features at the largest n (preparing copies
# it a few times); a typo past it (features=10**12: 146 TiB) died in NumPy's allocation
MAX_SYNTHETIC_CELLS = 200_000_000


def _options(family: str, given: Mapping[str, str]) -> dict[str, Any]:
    defaults = FAMILIES[family]
    opts = dict(defaults)
    for key, text in given.items():
        if key not in defaults:
            raise ConfigError(f"synthetic:{family}: unknown option '{key}' "
                              f"(options: {', '.join(defaults)})")
        try:
            if key == "weights":
                opts[key] = [float(w) for w in text.split(",")]
            elif key in ("noise", "sep"):
                opts[key] = float(text)
            else:
                opts[key] = int(text)
        except ValueError:
            raise ConfigError(f"synthetic:{family}: option {key}={text!r} is not a number") \
                from None
    if not 20 <= opts["n"] <= MAX_SYNTHETIC_ROWS:
        raise ConfigError(f"synthetic:{family}: n={opts['n']} must be within 20.."
                          f"{MAX_SYNTHETIC_ROWS}")
    _check_sizes(family, opts)
    if not (math.isfinite(opts["noise"]) and opts["noise"] >= 0):  # (nan, inf: no rows)
        raise ConfigError(f"synthetic:{family}: noise={opts['noise']} must be a finite "
                          "number >= 0")
    if family == "classification" and opts["noise"] > 1:  # make_classification's flip_y
        raise ConfigError(f"synthetic:{family}: noise={opts['noise']} must be within 0..1 "
                          "(the fraction of labels flipped)")
    if not (math.isfinite(opts.get("sep", 1.0)) and opts.get("sep", 1.0) > 0):
        raise ConfigError(f"synthetic:{family}: sep={opts['sep']} must be a finite "
                          "number > 0")
    if not 0 <= opts["seed"] <= MAX_SEED:
        raise ConfigError(f"synthetic:{family}: seed={opts['seed']} must be within "
                          f"0..{MAX_SEED}")
    return opts


def _check_sizes(family: str, opts: dict[str, Any]) -> None:
    """The table's size bounded before anything is allocated (scikit-learn checks the
    lower bounds and the options' consistency)."""
    n, width = opts["n"], opts.get("features", 2)
    if width > MAX_SYNTHETIC_FEATURES:
        raise ConfigError(f"synthetic:{family}: features={width} must be at most "
                          f"{MAX_SYNTHETIC_FEATURES}")
    if n * width > MAX_SYNTHETIC_CELLS:
        raise ConfigError(f"synthetic:{family}: n × features = {n * width} (n={n}, "
                          f"features={width}) must be at most {MAX_SYNTHETIC_CELLS} "
                          f"({MAX_SYNTHETIC_CELLS * 8 / 2**30:.1f} GiB of values)")
    if family == "classification" and opts["classes"] * opts["clusters"] > n:
        # a cluster per class and cluster: past n they hold no rows, and the generator
        # loops over them (classes=10**9 ran for minutes)
        raise ConfigError(f"synthetic:{family}: classes × clusters = "
                          f"{opts['classes'] * opts['clusters']} must be at most n={n} "
                          "(each cluster needs a row)")
    if family == "classification":
        _classification_options(family, opts, width)


def _classification_options(family: str, opts: dict[str, Any], width: int) -> None:
    """make_classification's own rules, said in this module's option names (its messages
    name its parameters: n_classes, n_clusters_per_class, n_informative)."""
    informative, redundant = opts["informative"], opts["redundant"]
    if informative < 1:
        raise ConfigError(f"synthetic:{family}: informative={informative} must be at least 1")
    if informative + redundant > width:
        raise ConfigError(f"synthetic:{family}: informative + redundant = "
                          f"{informative + redundant} must be at most features={width}")
    cells = opts["classes"] * opts["clusters"]
    if informative < 64 and cells > 2 ** informative:  # (corners of the informative cube)
        raise ConfigError(f"synthetic:{family}: classes × clusters = {cells} must be at most "
                          f"2 ** informative = {2 ** informative} (raise informative)")
    if opts["weights"] is not None:
        _check_weights(family, opts["weights"], opts["classes"])


def _check_weights(family: str, weights: list[float], classes: int) -> None:
    """make_classification's class proportions: one per class, or one fewer (the last class
    gets the rest); each in (0, 1) so that each class has rows, and summing to at most 1 (past
    it the generator returns more than n rows; with one fewer, below 1, the rest's share)."""
    shown = ",".join(f"{w:g}" for w in weights)
    if len(weights) not in (classes, classes - 1):
        raise ConfigError(f"synthetic:{family}: weights={shown} gives {len(weights)} "
                          f"value{'s' * (len(weights) != 1)}: classes={classes} takes "
                          f"{classes} (or {classes - 1}, the last class getting the rest)")
    for w in weights:
        if not 0 < w < 1:  # (nan fails too)
            raise ConfigError(f"synthetic:{family}: weights={shown}: each weight must be "
                              f"within (0, 1), not {w:g}")
    total = sum(weights)
    if len(weights) == classes - 1 and total >= 1:
        raise ConfigError(f"synthetic:{family}: weights={shown} sum to {total:g}: with "
                          f"{len(weights)} for classes={classes} they must sum to less than 1 "
                          "(the last class gets the rest)")
    if total > 1 + 1e-9:  # (0.7,0.2,0.1 sums to 1.0000000000000002)
        raise ConfigError(f"synthetic:{family}: weights={shown} sum to {total:g}: they must "
                          "sum to at most 1")


def _relative_noise(y: np.ndarray, noise: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return y + noise * float(y.std()) * rng.standard_normal(y.shape)


def _generate(family: str, o: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, Task]:
    from sklearn import datasets  # lazy: ~30 ms that `propose` on a file does not need

    n, seed = o["n"], o["seed"]
    if family == "classification":
        X, y = datasets.make_classification(
            n_samples=n, n_features=o["features"], n_informative=o["informative"],
            n_redundant=o["redundant"], n_classes=o["classes"],
            n_clusters_per_class=o["clusters"], class_sep=o["sep"], flip_y=o["noise"],
            weights=o["weights"], random_state=seed)
        return X, y, "classification"
    if family == "regression":
        X, y = datasets.make_regression(n_samples=n, n_features=o["features"],
                                        n_informative=o["informative"], random_state=seed)
        return X, _relative_noise(y, o["noise"], seed), "regression"
    if family == "friedman1":
        X, y = datasets.make_friedman1(n_samples=n, n_features=o["features"], noise=0.0,
                                       random_state=seed)
        return X, _relative_noise(y, o["noise"], seed), "regression"
    maker = datasets.make_moons if family == "moons" else datasets.make_circles
    X, y = maker(n_samples=n, noise=o["noise"], random_state=seed)
    return X, y, "classification"


def synthetic_table(name: str, family: str, given: Mapping[str, str]) -> Table:
    if family not in FAMILIES:
        raise ConfigError(f"unknown synthetic family '{family}' "
                          f"(families: {', '.join(FAMILIES)})")
    opts = _options(family, given)
    try:
        X, y, task = _generate(family, opts)
    except ValueError as err:  # scikit-learn's own check of the option combination
        raise ConfigError(f"synthetic:{family}: {err}") from None
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])])
    return Table(name=name, source="synthetic", frame=frame, y=pd.Series(y), task=task,
                 target="y")
