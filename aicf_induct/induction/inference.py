"""Small statistics the induction layer shares: multiple-testing corrections and bootstrap CIs.

Problems, not runs, are the unit of replication: every bootstrap here resamples the first
axis of what it is given, which callers make the problem axis.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import false_discovery_control


def bh(p: np.ndarray) -> np.ndarray:
    """Benjamini–Hochberg q-values (scipy's `false_discovery_control`); NaN stays NaN."""
    p = np.asarray(p, dtype=float)
    q = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        q[ok] = false_discovery_control(p[ok], method="bh")
    return q


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error); NaN stays NaN."""
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    m = len(order)
    running = 0.0
    for i, j in enumerate(order):  # multiply the i-th smallest by (m - i), keep it monotone
        running = max(running, min(1.0, (m - i) * p[j]))
        out[j] = running
    return out


def bootstrap_indices(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n) row indices drawn with replacement."""
    return rng.integers(0, n, size=(n_boot, n))


def bootstrap_mean_ci(x: np.ndarray, n_boot: int = 1000, level: float = 0.95,
                      seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of `x` (axis 0 resampled); NaNs dropped first."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return (float("nan"), float("nan"))
    idx = bootstrap_indices(len(x), n_boot, np.random.default_rng(seed))
    means = x[idx].mean(axis=1)
    a = (1 - level) / 2
    lo, hi = np.quantile(means, [a, 1 - a])
    return float(lo), float(hi)
