"""Information-theoretic meta-features, as pymfe's `info-theory` group defines them.

Each column is discretised into int(n ** (1/3)) equal-frequency bins (pymfe's
`transform_num`: quantile edges, repeated edges merged, `digitize(right=True)`). Entropies
are in bits. Joint entropies add pymfe's epsilon (1e-8) to every cell of the class x bin
table of present values, so the values match pymfe to rounding. For regression the target
is discretised the same way, so the features exist for both tasks.
"""

from __future__ import annotations

import numpy as np

from aicf_induct.problems.features.stats import summarise

EPSILON = 1e-8  # pymfe _calc_joint_ent
EDGE_TOL = 1e-8  # pymfe _equal_freq_discretization


def n_bins(n: int) -> int:
    return max(int(n ** (1 / 3)), 1)


def discretise(X: np.ndarray, bins: int) -> np.ndarray:
    """(n, d) bin codes, per column, pymfe's equal-frequency discretisation."""
    edges = np.quantile(X, np.linspace(0, 1, bins + 1)[1:], axis=0)  # (bins, d)
    codes = np.empty(X.shape, dtype=np.int64)
    for j in range(X.shape[1]):
        e = edges[:, j]
        e = np.unique(e[np.append(True, np.diff(e) > EDGE_TOL)])
        codes[:, j] = np.searchsorted(e, X[:, j], side="left")  # == digitize(right=True)
    return codes


def _entropy(counts: np.ndarray) -> np.ndarray:
    """Row-wise Shannon entropy (bits) of count arrays, zeros ignored."""
    p = counts / counts.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log2(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=-1)


def info_features(X: np.ndarray, y_codes: np.ndarray,
                  bins: int | None = None) -> dict[str, float]:
    """y_codes: class ids (or target bin codes for regression), 0..k-1. bins: pymfe's bin
    count of the whole dataset when X is a row sample (entropies grow with the bins)."""
    n, d = X.shape
    codes = discretise(X, bins or n_bins(n))
    B = int(codes.max()) + 1
    _, y = np.unique(y_codes, return_inverse=True)  # present classes only
    K = int(y.max()) + 1
    col = np.arange(d)[None, :]
    attr_counts = np.bincount((col * B + codes).ravel(), minlength=d * B).reshape(d, B)
    joint = np.bincount((col * (B * K) + codes * K + y[:, None]).ravel(),
                        minlength=d * B * K).reshape(d, B, K) / n
    present = (attr_counts > 0)[:, :, None] & np.ones((1, 1, K), dtype=bool)
    p = np.where(present, joint + EPSILON, 1.0)  # log2(1) = 0 off the table
    joint_ent = -(np.where(present, p * np.log2(p), 0.0)).sum(axis=(1, 2))
    attr_ent = _entropy(attr_counts)
    class_ent = float(_entropy(np.bincount(y)[None, :])[0])
    mut_inf = attr_ent + class_ent - joint_ent
    total_mi = max(float(mut_inf.sum()), 1e-12)  # no information at all: huge, not inf
    return {
        "info.class_entropy": class_ent,
        **summarise("info.attr_entropy", attr_ent),
        **summarise("info.joint_entropy", joint_ent),
        **summarise("info.mutual_info", mut_inf),
        "info.equivalent_features": d * class_ent / total_mi,  # pymfe eq_num_attr
        "info.noise_signal_ratio": (float(attr_ent.sum()) - total_mi) / total_mi,  # ns_ratio
    }
